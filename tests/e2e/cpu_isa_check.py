#!/usr/bin/python3
"""The matrix products' kernel is this CPU's best, and NITRO_CPU_ISA caps it (ctest e2e.cpu_isa).

    cpu_isa_check.py FASHION_MLP WORK

1. NITRO_CPU_ISA unset: the run's manifest (backend.kernels) and binding report (show()'s backend
   line) name the best kernel this CPU has, read independently from /proc/cpuinfo (avx512f:
   avx512; avx2 and fma: avx2; else generic).
2. NITRO_CPU_ISA set to each instruction set this CPU runs: the run finishes and names that
   kernel, and its training loss at every logged step agrees with the best kernel's to 1e-4
   (the same sums, added in another order).
3. NITRO_CPU_ISA=avx1024, and avx512 on a CPU without it: exit 2 with E-CPU-002 and its fix,
   before a run folder is made.
Prints "N passed, M failed".
"""
import json
import os
import shutil
import subprocess
import sys

passed, failed = 0, 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAILED:", what)


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def runs_in(d):
    return sorted(x for x in os.listdir(d) if os.path.isdir(os.path.join(d, x))) if os.path.isdir(d) else []


def run(exe, work, isa):
    env = dict(os.environ)
    env.pop("NITRO_CPU_ISA", None)
    if isa is not None:
        env["NITRO_CPU_ISA"] = isa
    d = os.path.join(work, isa or "unset")
    p = subprocess.run([exe, "run", "--variant", "smoke", "--steps", "12", "--quiet", "--run-dir", d], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    return p, d


def losses(run_dir):
    out = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            for k, v in r.items():
                if k.endswith("loss") and isinstance(v, (int, float)):
                    out[(r.get("step"), k)] = float(v)
    return out


def main():
    exe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    flags = cpu_flags()
    best = "avx512" if "avx512f" in flags else "avx2" if {"avx2", "fma"} <= flags else "generic"
    runnable = [i for i in ("avx512", "avx2", "generic")
                if i == "generic" or (i == "avx2" and {"avx2", "fma"} <= flags) or (i == "avx512" and "avx512f" in flags)]

    # 1. unset: the best
    p, d = run(exe, work, None)
    check(p.returncode == 0, f"the run with NITRO_CPU_ISA unset exits 0: {p.returncode}\n{p.stdout}")
    reference = {}
    if p.returncode == 0:
        (slug,) = runs_in(d)
        man = json.load(open(os.path.join(d, slug, "manifest.json")))
        check(man["backend"].get("kernels") == "gemm " + best, f"manifest backend.kernels is 'gemm {best}': {man['backend']}")
        report = open(os.path.join(d, slug, "binding_report.txt")).read()
        check(f"cpu (Eigen), gemm {best}\n" in report, f"show()'s backend line names gemm {best}:\n{report[:400]}")
        reference = losses(os.path.join(d, slug))
        check(len(reference) > 0, "the run logged its losses")

    # 2. each set this CPU runs
    for isa in runnable:
        p, d = run(exe, work, isa)
        check(p.returncode == 0, f"NITRO_CPU_ISA={isa}: exit 0: {p.returncode}\n{p.stdout}")
        if p.returncode != 0:
            continue
        (slug,) = runs_in(d)
        man = json.load(open(os.path.join(d, slug, "manifest.json")))
        check(man["backend"].get("kernels") == "gemm " + isa, f"NITRO_CPU_ISA={isa}: manifest names it: {man['backend']}")
        got = losses(os.path.join(d, slug))
        check(got.keys() == reference.keys(), f"NITRO_CPU_ISA={isa}: the same losses logged ({len(got)} vs {len(reference)})")
        worst = max((abs(got[k] - reference[k]) / max(1.0, abs(reference[k])) for k in got.keys() & reference.keys()), default=0.0)
        check(worst <= 1e-4, f"NITRO_CPU_ISA={isa}: losses within 1e-4 of the {best} kernel's (worst {worst:.2e})")

    # 3. refused before anything is made
    refused = ["avx1024"] + ([] if "avx512f" in flags else ["avx512"])
    for isa in refused:
        p, d = run(exe, work, isa)
        check(p.returncode == 2, f"NITRO_CPU_ISA={isa}: exit 2, got {p.returncode}\n{p.stdout}")
        check("E-CPU-002" in p.stdout and "NITRO_CPU_ISA='" + isa + "'" in p.stdout and "unset it" in p.stdout,
              f"NITRO_CPU_ISA={isa}: E-CPU-002 names the setting and the fix:\n{p.stdout}")
        check(runs_in(d) == [], f"NITRO_CPU_ISA={isa}: no run folder made: {runs_in(d)}")

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
