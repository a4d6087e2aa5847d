#!/usr/bin/python3
"""Concurrent runs of one trainer never share or clobber a run's record (ctest e2e.concurrent).

    concurrent_check.py FASHION_MLP WORK

1. Four `run`s of one selection started in the same instant: four finished runs in four folders,
   each with its own manifest, status, metrics and checkpoint index.
2. Two `run --id same` at once: one run, the other refused with E-REC-001 (the folder is not shared).
3. `run --resume latest` (and by slug) while another process writes that run: refused with
   E-REC-009 naming the writer's pid, before anything is made (no new run folder).
4. The writer killed with SIGKILL: its lock is taken over, the resume runs and finishes.
Prints "N passed, M failed".
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

passed, failed = 0, 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAILED:", what)


def runs_in(d):
    return sorted(x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x))) if os.path.isdir(d) else []


def main():
    exe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    smoke = ["--variant", "smoke", "--steps", "4", "--quiet"]

    # 1. four processes of one selection at once
    r1 = os.path.join(work, "same_second")
    procs = [subprocess.Popen([exe, "run", *smoke, "--run-dir", r1], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    check(all(p.returncode == 0 for p in procs), f"four runs at once all exit 0: {[p.returncode for p in procs]}\n" + "\n".join(outs))
    folders = [d for d in runs_in(r1) if d.startswith("fashion_mlp-smoke-")]
    check(len(folders) == 4, f"four run folders, got {folders}")
    for d in folders:
        st = json.load(open(os.path.join(r1, d, "status.json")))
        check(st["state"] == "finished" and st["slug"] == d, f"{d}: its own finished status ({st.get('state')}, {st.get('slug')})")
        man = json.load(open(os.path.join(r1, d, "manifest.json")))
        check(man.get("slug", d) == d, f"{d}: its own manifest")
        idx = os.path.join(r1, d, "checkpoints", "index.json")
        check(os.path.exists(idx), f"{d}: its own checkpoint index")
        first = json.loads(open(os.path.join(r1, d, "metrics.jsonl")).readline())
        check(first.get("slug", d) == d, f"{d}: its own metrics ({first.get('slug')})")

    # 2. two processes given the same --id: one record, one refusal
    r2 = os.path.join(work, "same_id")
    procs = [subprocess.Popen([exe, "run", *smoke, "--run-dir", r2, "--id", "twin"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    codes = sorted(p.returncode for p in procs)
    check(codes[0] == 0 and codes[1] != 0, f"same --id: one run and one refusal, got {codes}")
    check(any("E-REC-001" in o and "exists already" in o for o in outs), "the refusal is E-REC-001:\n" + "\n".join(outs))
    check(runs_in(r2) == ["fashion_mlp-smoke-twin"], f"one folder: {runs_in(r2)}")
    st = json.load(open(os.path.join(r2, "fashion_mlp-smoke-twin", "status.json")))
    check(st["state"] == "finished", f"the one run finished, not clobbered: {st['state']}")

    # 3. a resume of a run another process is writing
    r3 = os.path.join(work, "live")
    live = subprocess.Popen([exe, "run", "--variant", "smoke", "--steps", "1000000", "--run-dir", r3, "--id", "live", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    folder = os.path.join(r3, "fashion_mlp-smoke-live")
    deadline = time.time() + 120
    while time.time() < deadline and not os.path.exists(os.path.join(folder, "checkpoints", "index.json")):
        time.sleep(0.1)
    check(os.path.exists(os.path.join(folder, "checkpoints", "index.json")), "the live run wrote a checkpoint")
    for ref in ("latest", "fashion_mlp-smoke-live"):
        p = subprocess.run([exe, "run", "--resume", ref, "--run-dir", r3, "--steps", "5"], capture_output=True, text=True, timeout=120)
        out = p.stdout + p.stderr
        check(p.returncode != 0, f"--resume {ref} of a live run is refused (exit {p.returncode})")
        check(f"E-REC-009: cannot resume from the run {folder}: it is being written by pid {live.pid} on host " in out,
              f"--resume {ref}: E-REC-009 names the writer:\n{out}")
        check(runs_in(r3) == ["fashion_mlp-smoke-live"], f"--resume {ref}: nothing made: {runs_in(r3)}")
    with open(os.path.join(folder, "lock")) as f:
        check(f.read().startswith(f"pid {live.pid} on host "), "the lock file names the writer")

    # 4. the writer dies without a word: its lock goes with it
    live.send_signal(signal.SIGKILL)
    live.wait()
    p = subprocess.run([exe, "run", "--resume", "latest", "--run-dir", r3, "--variant", "smoke", "--steps", "5", "--quiet"], capture_output=True, text=True,
                       timeout=300)
    check(p.returncode == 0, f"resume after the writer died: exit {p.returncode}\n{p.stdout}{p.stderr}")
    new = [d for d in runs_in(r3) if d != "fashion_mlp-smoke-live"]
    check(len(new) == 1, f"the resume made one new run: {new}")
    if new:
        st = json.load(open(os.path.join(r3, new[0], "status.json")))
        check(st["state"] == "finished", f"the resumed run finished: {st['state']}")
        check(open(os.path.join(r3, new[0], "lock")).read() == "", "a finished run's lock is released (an empty file)")

    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
