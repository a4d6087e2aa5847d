#!/usr/bin/python3
"""Storage faults at every write a run makes (ctest e2e.faults).

    fault_check.py FASHION_MLP LIBFAULTFS WORK [--every N]

A clean run (`run --variant smoke --steps 8 --eval-every 4`: two checkpoints) lists the write(2),
fsync(2) and rename(2) calls it makes in its folder through the faultfs shim
(tests/faults/faultfs.cpp, LD_PRELOAD). Then, for every call k (of a run of one call repeated on one file: its first and last), one run each where
call k
  enospc  fails with ENOSPC and every write after it does too (the disk is full),
  eio     fails with EIO, once,
  short   (writes only) writes half of its bytes, and every write after it fails with ENOSPC.
Each faulted run must
  - stop with exit 3 and a coded error (E-REC-001 / E-LOG-002) naming the file that failed;
  - leave no temporary file, and every file it left readable: manifest and status as JSON,
    every metrics.jsonl line whole, the CSV rectangular, the index as JSON and every checkpoint it
    lists a whole safetensors file (header, sizes);
  - leave status.json saying `failed` with that error whenever the disk lets it be written (eio),
    and otherwise its last whole version;
and `run --resume` of it, without the fault (space freed), must end with exactly the parameters
and optimizer state of an uninterrupted run (every tensor of the last checkpoint, bit for bit),
having lost at most the steps since its last checkpoint. A fault before the first checkpoint
leaves nothing to resume: the resume is refused with a coded error and makes no run.
Prints a table by fault kind and "N passed, M failed".
"""
import concurrent.futures
import json
import os
import re
import shutil
import struct
import subprocess
import sys

STEPS, EVERY = 8, 4
# A trainer built with AddressSanitizer (./nitro.sh test) wants its runtime first among the loaded
# libraries; the shim is preloaded before it, which is harmless here (it only wraps libc's calls).
ASAN = ":".join(o for o in (os.environ.get("ASAN_OPTIONS", ""), "verify_asan_link_order=0") if o)
ARGS = ["run", "--variant", "smoke", "--steps", str(STEPS), "--eval-every", str(EVERY), "--quiet"]


def safetensors(path):
    """name -> raw bytes of every tensor; raises when the file is not whole."""
    with open(path, "rb") as f:
        b = f.read()
    (n,) = struct.unpack("<Q", b[:8])
    header = json.loads(b[8:8 + n])
    data = b[8 + n:]
    out, end = {}, 0
    for k, v in header.items():
        if k == "__metadata__":
            continue
        lo, hi = v["data_offsets"]
        if not (0 <= lo <= hi <= len(data)):
            raise ValueError(f"{k}: offsets {lo}..{hi} past {len(data)} bytes")
        out[k] = data[lo:hi]
        end = max(end, hi)
    if end != len(data):
        raise ValueError(f"{len(data)} bytes of data, tensors end at {end}")
    return out


def checkpoints(run):
    idx = os.path.join(run, "checkpoints", "index.json")
    if not os.path.exists(idx):
        return []
    return [(c["step"], os.path.join(run, "checkpoints", c["file"])) for c in json.load(open(idx))["checkpoints"]]


def target_name(path):
    """The file a call wrote, as an error names it: a temporary `.x.tmp.pid.n` is x."""
    base = os.path.basename(path.rstrip("/"))
    m = re.match(r"^\.(.*)\.tmp\.\d+\.\d+$", base)
    return m.group(1) if m else base


def record_problems(run):
    """What in the folder a reader would take for valid and is not."""
    bad = []
    for root, _, files in os.walk(run):
        for f in files:
            p = os.path.join(root, f)
            if ".tmp." in f:
                bad.append(f"temporary left: {p}")
            elif f.endswith(".json"):
                try:
                    json.load(open(p))
                except Exception as e:
                    bad.append(f"{p} is not JSON: {e}")
    jl = os.path.join(run, "metrics.jsonl")
    if os.path.exists(jl):
        for i, line in enumerate(open(jl, "rb").read().split(b"\n")[:-1]):
            try:
                json.loads(line)
            except Exception:
                bad.append(f"metrics.jsonl line {i + 1} is torn: {line[:60]!r}")
        if open(jl, "rb").read()[-1:] not in (b"", b"\n"):
            bad.append("metrics.jsonl ends in a torn line")
    csv = os.path.join(run, "metrics.csv")
    if os.path.exists(csv):
        text = open(csv).read()
        rows = text.split("\n")
        if rows[-1] != "":
            bad.append("metrics.csv ends in a torn row")
        widths = {r.count(",") for r in rows[:-1]}
        if len(widths) > 1:
            bad.append(f"metrics.csv rows of {sorted(widths)} commas")
    try:
        for step, p in checkpoints(run):
            try:
                safetensors(p)
            except Exception as e:
                bad.append(f"checkpoint of step {step} listed but not whole: {e}")
    except Exception as e:
        bad.append(f"index unreadable: {e}")
    return bad


def run_case(exe, shim, work, reference, k, op, path, kind):
    d = os.path.join(work, f"{kind}-{k:03d}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    env = dict(os.environ, LD_PRELOAD=shim, NITRO_FAULT_DIR=d, NITRO_FAULT_AT=str(k), NITRO_FAULT_KIND=kind, ASAN_OPTIONS=ASAN)
    p = subprocess.run([exe, *ARGS, "--run-dir", d, "--id", "f"], env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    run = os.path.join(d, "fashion_mlp-smoke-f")
    fails = []
    if p.returncode != 3:
        fails.append(f"exit {p.returncode}, not 3")
    codes = re.findall(r"E-(?:REC|LOG)-\d{3}", out)
    if not codes:
        fails.append("no E-REC/E-LOG error")
    name = target_name(path)
    if name not in out and os.path.basename(os.path.dirname(path.rstrip("/"))) not in out:
        fails.append(f"the error does not name {name}")
    fails += record_problems(run)
    status = json.load(open(os.path.join(run, "status.json"))) if os.path.exists(os.path.join(run, "status.json")) else None
    if kind == "eio":
        if not status or status.get("state") != "failed" or not re.search(r"E-(REC|LOG)-\d{3}", status.get("error", "")):
            fails.append(f"status.json does not say failed with the error: {status and status.get('state')}")
    saved = checkpoints(run)
    # resume with the space back
    r = subprocess.run([exe, "run", "--resume", run, "--run-dir", d, "--id", "r", "--quiet"], capture_output=True, text=True, timeout=300)
    resumed = os.path.join(d, "fashion_mlp-smoke-r")
    lost = None
    if not saved:
        if r.returncode == 0 or not re.search(r"E-[A-Z]+-\d{3}", r.stdout + r.stderr) or os.path.exists(resumed):
            fails.append(f"a resume with no checkpoint: exit {r.returncode}, run made: {os.path.exists(resumed)}\n{r.stdout}{r.stderr}")
        outcome = "nothing to resume"
    else:
        if r.returncode != 0:
            fails.append(f"resume: exit {r.returncode}\n{r.stdout}{r.stderr}")
        last = checkpoints(resumed) or saved
        step, f = last[-1]
        if step != STEPS:
            fails.append(f"the resumed run ends at step {step}, not {STEPS}")
        else:
            got = safetensors(f)
            if got != reference:
                diff = sorted(n for n in reference if got.get(n) != reference[n])
                fails.append(f"resumed state differs from the uninterrupted run in {diff[:5]}")
        lost = max(0, max_step_reached(run) - saved[-1][0])
        if lost > EVERY:
            fails.append(f"{lost} steps lost, more than the checkpoint interval {EVERY}")
        outcome = f"resumed from step {saved[-1][0]}"
    return dict(k=k, op=op, path=path, kind=kind, fails=fails, outcome=outcome, lost=lost, out=out.strip().splitlines()[:3],
                status=status and status.get("state"))


def max_step_reached(run):
    """The last step the faulted run's metrics recorded (what a fault could lose)."""
    best = 0
    jl = os.path.join(run, "metrics.jsonl")
    if os.path.exists(jl):
        for line in open(jl, "rb").read().split(b"\n"):
            try:
                best = max(best, int(json.loads(line).get("step", 0)))
            except Exception:
                pass
    return best


def main():
    exe, shim, work = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    every = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--every" else 1
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    # the uninterrupted run, and the calls it makes
    base = os.path.join(work, "clean")
    os.makedirs(base)
    log = os.path.join(work, "calls.txt")
    env = dict(os.environ, LD_PRELOAD=shim, NITRO_FAULT_DIR=base, NITRO_FAULT_AT="0", NITRO_FAULT_LOG=log, ASAN_OPTIONS=ASAN)
    p = subprocess.run([exe, *ARGS, "--run-dir", base, "--id", "f"], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print("FAILED: the clean run:", p.stdout, p.stderr)
        return 1
    calls = [line.split(" ", 2) for line in open(log).read().splitlines()]
    ref_ckpt = checkpoints(os.path.join(base, "fashion_mlp-smoke-f"))
    if not calls or not ref_ckpt or ref_ckpt[-1][0] != STEPS:
        print(f"FAILED: the clean run made {len(calls)} calls and checkpoints {ref_ckpt}")
        return 1
    reference = safetensors(ref_ckpt[-1][1])
    ops = {}
    for _, op, _ in calls:
        ops[op] = ops.get(op, 0) + 1
    print(f"the clean run: {len(calls)} calls in its folder ({', '.join(f'{n} {op}' for op, n in sorted(ops.items()))}), "
          f"{len(reference)} tensors in its last checkpoint")

    # a run of one call repeated on one file (a checkpoint's tensors, written one by one) fails alike
    # at every place inside it: its first and last stand for it
    chosen = [c for i, c in enumerate(calls)
              if i == 0 or i + 1 == len(calls) or c[1:] != calls[i - 1][1:] or c[1:] != calls[i + 1][1:]]
    cases = []
    for k, op, path in chosen[::every]:
        k = int(k)
        for kind in ("enospc", "eio") + (("short",) if op == "write" else ()):
            cases.append((k, op, path, kind))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda c: run_case(exe, shim, work, reference, *c), cases))

    passed = sum(1 for r in results if not r["fails"])
    failed = len(results) - passed
    for r in results:
        if r["fails"]:
            print(f"FAILED: {r['kind']} at call {r['k']} ({r['op']} {r['path']}):")
            for f in r["fails"]:
                print("   ", f)
            for line in r["out"]:
                print("    |", line)
    print("\n| fault | calls | cases | exit 3, coded, named | status says failed | resumed exactly | nothing to resume | most steps lost |")
    print("|---|---|---|---|---|---|---|---|")
    for kind in ("enospc", "eio", "short"):
        rs = [r for r in results if r["kind"] == kind]
        ok = [r for r in rs if not r["fails"]]
        print(f"| {kind} | {'writes' if kind == 'short' else 'all'} | {len(rs)} | {len(ok)} | {sum(1 for r in rs if r['status'] == 'failed')} | "
              f"{sum(1 for r in ok if r['outcome'].startswith('resumed'))} | {sum(1 for r in ok if r['outcome'] == 'nothing to resume')} | "
              f"{max([r['lost'] or 0 for r in rs] or [0])} |")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
