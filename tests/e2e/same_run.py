#!/usr/bin/python3
"""The same run from two builds of one example (the g++ build and the nvcc build).

    same_run.py WORK A B [--tol T] -- run args...

Both runs must finish at the same step with the same metrics logged, each final value equal to
within 0.2 % relative (T, where given; the two builds may place fused multiply-adds differently,
so not bit for bit), and the same binding report apart from the run's folder.
"""
import glob
import json
import math
import os
import shutil
import subprocess
import sys

TOL = 2e-3


def main():
    work, a, b = sys.argv[1:4]
    own = sys.argv[4:sys.argv.index("--")]
    tol = float(own[own.index("--tol") + 1]) if "--tol" in own else TOL
    args = sys.argv[sys.argv.index("--") + 1:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    status, reports = {}, {}
    for side, exe in (("A", a), ("B", b)):
        cmd = [exe, "run", *args, "--quiet", "--run-dir", os.path.join(work, "runs"), "--id", side]
        p = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"{' '.join(cmd)} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        found = glob.glob(os.path.join(work, "runs", f"*-{side}", "status.json"))
        if len(found) != 1:
            sys.exit(f"{exe} wrote {len(found)} status.json under {work}/runs, expected 1")
        with open(found[0]) as f:
            status[side] = json.load(f)
        with open(os.path.join(os.path.dirname(found[0]), "binding_report.txt")) as f:
            reports[side] = f.read().replace(os.path.dirname(found[0]), "<run>")
    fails = []
    for key in ("state", "step", "epoch"):
        if status["A"][key] != status["B"][key]:
            fails.append(f"{key}: {status['A'][key]!r} from {a}, {status['B'][key]!r} from {b}")
    last_a, last_b = status["A"]["last"], status["B"]["last"]
    if not last_a:
        fails.append(f"{a}'s run logged no metrics")
    if sorted(last_a) != sorted(last_b):
        fails.append(f"metrics differ: {sorted(last_a)} from {a}, {sorted(last_b)} from {b}")
    for name in sorted(set(last_a) & set(last_b)):
        x, y = last_a[name], last_b[name]
        scale = max(abs(x), abs(y), 1e-3)
        rel = abs(x - y) / scale
        print(f"{name:14s} {x:.9g} vs {y:.9g}  (relative {rel:.2e})")
        if not math.isfinite(x) or not math.isfinite(y) or rel > tol:
            fails.append(f"{name}: {x} from {a}, {y} from {b}")
    if reports["A"] != reports["B"]:
        fails.append("the binding reports differ")
    if fails:
        sys.exit("\n".join(fails))
    print(f"same run: {status['A']['state']} at step {status['A']['step']} from both builds")


if __name__ == "__main__":
    main()
