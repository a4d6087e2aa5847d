#!/usr/bin/python3
"""The soak (ctest e2e.soak): run -> SIGKILL at a random moment -> resume, over and over, with a
checkpoint damaged on some cycles.

    soak_check.py FASHION_MLP WORK [CYCLES]

One uninterrupted run (`run --variant smoke --steps 600 --eval-every 20`: a checkpoint every 20
steps, the last ten kept) gives the reference: every tensor of its last checkpoint. Then CYCLES
(default 40) cycles, seeded: start the chain's next process (a fresh run, or `run --resume` of the
newest run of the chain that holds a checkpoint), SIGKILL it after a random 0.05 s .. 0.9x the
uninterrupted run's time (a window that doubles with each kill in a row before a checkpoint was
saved, so that a loaded machine cannot stall the chain). Every fourth cycle first damages a checkpoint of the run about to be
resumed (a flipped byte or a cut file; its latest one half of the time). A process that finishes
ends its chain: its last checkpoint must equal the reference bit for bit, and the next cycle starts
a new chain. Checked every cycle: the process either was killed or finished (never a failed run);
a resume after its latest checkpoint was damaged says W-CKPT-002 and starts at the one before; the
saved work a resume gives up is never more than one checkpoint interval.
Prints the figures and "N passed, M failed".
"""
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

STEPS, EVERY = 600, 20
FLAGS = ["--variant", "smoke", "--steps", str(STEPS), "--eval-every", str(EVERY), "--quiet"]
passed, failed = 0, 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAILED:", what)


def tensors(path):
    b = open(path, "rb").read()
    (n,) = struct.unpack("<Q", b[:8])
    header = json.loads(b[8:8 + n])
    data = b[8 + n:]
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items() if k != "__metadata__"}


def saved(run):
    """(step, file) of every checkpoint the run's index lists, oldest first; [] without an index."""
    try:
        idx = json.load(open(os.path.join(run, "checkpoints", "index.json")))
    except (OSError, ValueError):
        return []
    return [(c["step"], os.path.join(run, "checkpoints", c["file"])) for c in idx["checkpoints"]]


def main():
    exe, work = sys.argv[1], os.path.abspath(sys.argv[2])
    cycles = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = random.Random(20261204)

    t0 = time.time()
    p = subprocess.run([exe, "run", *FLAGS, "--run-dir", work, "--id", "reference"], capture_output=True, text=True, timeout=300)
    took = time.time() - t0
    ref_ckpt = saved(os.path.join(work, "fashion_mlp-smoke-reference"))
    if p.returncode != 0 or not ref_ckpt or ref_ckpt[-1][0] != STEPS:
        print("FAILED: the uninterrupted run", p.returncode, p.stdout, p.stderr)
        return 1
    reference = tensors(ref_ckpt[-1][1])
    ref_bytes = sum(len(v) for v in reference.values())

    chain = []            # the chain's run folders that hold a checkpoint, oldest first
    damaged_latest = None  # (run, step) when the latest checkpoint of the run to resume was damaged
    kills = finished = chains_equal = damaged = damaged_latest_n = fallbacks = refused = 0
    bytes_compared = 0
    most_saved_lost = 0
    stalls = most_stalls = 0  # kills in a row before the process saved a checkpoint
    for i in range(cycles):
        head = chain[-1] if chain else None
        damaged_latest = None
        if head and i % 4 == 3:
            files = saved(head)
            latest = rng.random() < 0.5 or len(files) == 1
            step, f = files[-1] if latest else rng.choice(files[:-1])
            b = bytearray(open(f, "rb").read())
            if rng.random() < 0.5:
                b[rng.randrange(8, len(b))] ^= 1 << rng.randrange(8)
            else:
                b = b[:rng.randrange(0, len(b))]
            open(f, "wb").write(bytes(b))
            damaged += 1
            if latest:
                damaged_latest_n += 1
                damaged_latest = (head, step, files[-2][0] if len(files) > 1 else None)
        cmd = [exe, "run", "--resume", head] if head else [exe, "run"]
        cmd += (FLAGS if not head else ["--quiet"]) + ["--run-dir", work, "--id", f"c{i:02d}"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # A kill before the process saved anything is a stall; each stall in a row doubles the window
        # (to 32x), so that on a loaded machine (ctest -j, where a process's start alone can outlast
        # the uninterrupted run's time) the chain still moves on and finishes.
        time.sleep(rng.uniform(0.05, 0.9 * took * 2 ** min(stalls, 5)))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
        run = os.path.join(work, f"fashion_mlp-smoke-c{i:02d}")
        stalls = stalls + 1 if proc.returncode == -signal.SIGKILL and not saved(run) else 0
        most_stalls = max(most_stalls, stalls)
        if damaged_latest:
            _, step, before = damaged_latest
            if before is not None and ("W-CKPT-002" in err or proc.returncode == 0):  # (the only one damaged: refused, below)
                fallbacks += 1
                check(f"resuming at step {before}" in err, f"cycle {i}: resumed at step {before} after step {step} was damaged:\n{err}")
                most_saved_lost = max(most_saved_lost, step - before)
            # else: killed before it read the checkpoint
        if proc.returncode == -signal.SIGKILL:
            kills += 1
            if saved(run):
                chain.append(run)
        elif proc.returncode == 0:
            finished += 1
            # a resume of a run killed after its last step has nothing left to train: the head's last is the state
            last = saved(run) or (saved(head) if head else [])
            check(bool(last) and last[-1][0] == STEPS, f"cycle {i}: a finished run ends at step {last and last[-1][0]}")
            if last and last[-1][0] == STEPS:
                got = tensors(last[-1][1])
                bytes_compared += sum(len(v) for v in got.values())
                diff = sorted(k for k in reference if got.get(k) != reference[k])
                check(not diff and got.keys() == reference.keys(), f"cycle {i}: the chain's last state differs in {diff[:5]}")
                chains_equal += 1 if not diff else 0
            chain = []
        else:
            # refused: every checkpoint of the head damaged (E-CKPT-035); a new chain starts
            refused += 1
            check("E-CKPT-035" in err and not os.path.exists(run), f"cycle {i}: exit {proc.returncode}\n{out}{err}")
            chain = []

    print(f"\n{cycles} cycles ({took:.2f} s uninterrupted run of {STEPS} steps, a checkpoint every {EVERY}):")
    print(f"| cycles | killed | finished chains | equal to the uninterrupted run | bytes compared | checkpoints damaged (latest) | "
          f"resumes past a damaged latest | refused (none whole) | saved work lost at most |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| {cycles} | {kills} | {finished} | {chains_equal} | {bytes_compared} ({ref_bytes} a state) | {damaged} ({damaged_latest_n}) | "
          f"{fallbacks} | {refused} | {most_saved_lost} steps |")
    print(f"most kills in a row before a checkpoint was saved: {most_stalls}")
    check(finished >= 1, "at least one chain finished")
    check(kills >= cycles // 2, f"most cycles were killed mid-run ({kills})")
    check(most_saved_lost <= EVERY, f"saved work lost {most_saved_lost} <= {EVERY}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
