#!/usr/bin/python3
"""bench/compare.py - runs the whole side-by-side comparison and prints the table (bench/run.sh).

    compare.py --build DIR [--threads T] [--repeats R] [--models mlp,wide,cnn] [--epochs mlp=3,...]
               [--train-limit N | mlp=N,...] [--isa avx2] [--no-compile] [--json OUT]
    compare.py --table-from OUT.json        the table of an earlier run, again

1. The machine: CPU, cores, memory, load average, compiler, PyTorch and the BLAS it loads.
2. The fp32 reference (DIR/bench/gemm_peak): the FMA ceiling, a large SGEMM through nitro and
   through OpenBLAS (with the environment's OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE and without),
   and every product of the MLPs' training steps.
3. Training, alternating: for each repeat, for each model, nitro (DIR/bench/train_nitro), then
   PyTorch as the environment sets OpenBLAS up, then PyTorch with OPENBLAS_CORETYPE and
   OPENBLAS_L2_SIZE unset. Every run is its own process (so peak RSS is its own). Samples/s is
   the median over repeats; the ratio is nitro over the faster PyTorch.
4. Compile cost (bench/compile_cost.sh) unless --no-compile.
--isa avx2 runs both frameworks as they run on a CPU with AVX2+FMA and no AVX-512, on a machine that
has AVX-512: nitro's products take their AVX2 kernel (NITRO_CPU_ISA=avx2); PyTorch's ATen kernels
(ATEN_CPU_CAPABILITY=avx2), its oneDNN convolutions and products (DNNL_MAX_CPU_ISA /
ONEDNN_MAX_CPU_ISA=AVX2) and OpenBLAS (OPENBLAS_CORETYPE=Haswell, in both PyTorch setups; the
"native" one then leaves only OPENBLAS_L2_SIZE unset) take theirs. Without it each library takes
the best kernel the CPU has (the environment's OPENBLAS_CORETYPE aside).
The targets of issue 19 are reported, never asserted: MLP >= 6x PyTorch at equal accuracy
(+-0.5 points), CNN >= 3x, wide MLP >= 60% of the best SGEMM measured (nitro's or OpenBLAS's).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
DEFAULT_EPOCHS = {"mlp": 3, "wide": 1, "cnn": 1}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# What caps each library at AVX2+FMA (--isa avx2): an AVX2 machine's kernels, measured on this one.
AVX2_ENV = {"NITRO_CPU_ISA": "avx2", "ATEN_CPU_CAPABILITY": "avx2", "DNNL_MAX_CPU_ISA": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
            "OPENBLAS_CORETYPE": "Haswell"}


def env_for(threads, openblas_env, isa="native"):
    env = dict(os.environ)
    env.update(NITRO_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    if not openblas_env:
        for v in OPENBLAS_VARS:
            env.pop(v, None)
    if isa == "avx2":
        env.update(AVX2_ENV)
    return env


def run_json(cmd, env, timeout):
    """Runs cmd; returns the JSON objects it printed (one a line), or raises with its stderr."""
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-600:]}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def loadavg():
    try:
        return tuple(float(x) for x in open("/proc/loadavg").read().split()[:3])
    except OSError:
        return (float("nan"),) * 3


def machine_info():
    cpu = platform.processor()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(next(l for l in open("/proc/meminfo") if l.startswith("MemTotal")).split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration):
        pass
    flags = ""
    try:
        f = next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split()
        flags = "avx512f" if "avx512f" in f else ("avx2" if "avx2" in f else "")
    except (OSError, StopIteration):
        pass
    cxx = subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    torch = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "simd": flags, "compiler": cxx[0] if cxx else "",
            "torch": torch.stdout.strip() or "not importable", "kernel": platform.release()}


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="")
    ap.add_argument("--table-from", default="", help="print the table of an earlier --json file, run nothing")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", default="mlp,wide,cnn")
    ap.add_argument("--epochs", default="")
    ap.add_argument("--train-limit", default="0", help="images per epoch: N for every model, or mlp=N,cnn=N,...")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--gemm-seconds", type=float, default=2.0)
    ap.add_argument("--isa", choices=("native", "avx2"), default="native",
                    help="avx2: every library (nitro, ATen, oneDNN, OpenBLAS) capped at AVX2+FMA, as on a CPU without AVX-512")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if args.table_from:
        with open(args.table_from) as f:
            r = json.load(f)
        print_table(r, list(dict.fromkeys(x["model"] for x in r["runs"])))
        return
    if not args.build:
        ap.error("--build DIR is required")

    epochs = dict(DEFAULT_EPOCHS)
    for item in filter(None, args.epochs.split(",")):
        k, v = item.split("=")
        epochs[k] = int(v)
    limits = {m: 0 for m in DEFAULT_EPOCHS}
    for item in filter(None, args.train_limit.split(",")):
        if "=" in item:
            k, v = item.split("=")
            limits[k] = int(v)
        else:
            limits = {m: int(item) for m in limits}
    train_nitro = os.path.join(args.build, "bench", "train_nitro")
    gemm_peak = os.path.join(args.build, "bench", "gemm_peak")
    models = [m for m in args.models.split(",") if m]
    # the CNN runs only when train_nitro was built with it (examples/fashion_cnn.cpp exists)
    have = subprocess.run([train_nitro, "--list"], capture_output=True, text=True).stdout.split()
    if "cnn" in models and "cnn" not in have:
        log("compare: this build of train_nitro has no CNN (examples/fashion_cnn.cpp not there yet): skipping it")
        models.remove("cnn")
    T = args.threads
    results = {"machine": machine_info(), "threads": T, "isa": args.isa, "load_start": loadavg(), "epochs": epochs,
               "train_limit": limits, "gemm": [], "runs": [], "compile": []}
    m = results["machine"]
    log(f"machine: {m['cpu']}, {m['cores']} cores, {m['memory']}; {m['compiler']}; torch {m['torch']}; "
        f"load average {results['load_start'][0]:.2f}")

    # ---- 2. the fp32 reference ------------------------------------------------------------------
    for openblas_env in (True, False):
        label = "env" if openblas_env else "native"
        log(f"gemm_peak ({T} threads, OpenBLAS {label}) ...")
        for row in run_json([gemm_peak, "--seconds", str(args.gemm_seconds)], env_for(T, openblas_env, args.isa), 1200):
            row["openblas_setup"] = label
            results["gemm"].append(row)

    # ---- 3. training, alternating -----------------------------------------------------------------
    frameworks = [("nitro", None), ("pytorch", True), ("pytorch", False)]
    for rep in range(args.repeats):
        for model in models:
            for fw, openblas_env in frameworks:
                label = "nitro" if fw == "nitro" else ("pytorch (OpenBLAS env)" if openblas_env else "pytorch (OpenBLAS native)")
                cmd = ([train_nitro, model] if fw == "nitro" else [sys.executable, os.path.join(HERE, "train_torch.py"), model,
                                                                   "--threads", str(T)])
                cmd += ["--epochs", str(epochs[model]), "--train-limit", str(limits[model])]
                t0 = time.time()
                try:
                    row = run_json(cmd, env_for(T, True if openblas_env is None else openblas_env, args.isa), 7200)[-1]
                except (RuntimeError, subprocess.TimeoutExpired, IndexError) as e:
                    row = {"framework": fw, "model": model, "error": str(e)[-400:]}
                row.update(label=label, repeat=rep, load=loadavg()[0], wall=round(time.time() - t0, 1))
                results["runs"].append(row)
                log(f"  [{rep + 1}/{args.repeats}] {model:5s} {label:26s} "
                    + (f"{row['samples_per_s']:9.0f} samples/s  acc {row['test_acc']:.4f}  rss {row['peak_rss_mb']:.0f} MB"
                       if "error" not in row else "ERROR " + row["error"][-200:]))

    # ---- 4. compile cost ------------------------------------------------------------------------
    if not args.no_compile:
        log("compile cost ...")
        p = subprocess.run(["bash", os.path.join(HERE, "compile_cost.sh")], capture_output=True, text=True, timeout=7200)
        results["compile"] = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    results["load_end"] = loadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print_table(results, models)


def print_table(r, models):
    out = []
    m = r["machine"]
    T = r["threads"]
    out.append(f"nitro vs PyTorch — {m['cpu']}, {m['cores']} cores ({m['simd']}), {m['memory']}, {T} threads each")
    if r.get("isa", "native") == "avx2":
        out.append("every library capped at AVX2+FMA (--isa avx2): NITRO_CPU_ISA=avx2, ATEN_CPU_CAPABILITY=avx2, "
                   "DNNL_MAX_CPU_ISA=AVX2, OPENBLAS_CORETYPE=Haswell")
    out.append(f"{m['compiler']}; PyTorch {m['torch']}; load average {r['load_start'][0]:.2f} at start, {r['load_end'][0]:.2f} at end")
    # reference
    fma = max((g["gflops"] for g in r["gemm"] if g["what"] == "fma"), default=float("nan"))
    sg = [g for g in r["gemm"] if g["what"] == "sgemm"]
    nitro_sg = max((g["nitro_gflops"] for g in sg), default=0.0)
    ob = {g["openblas_setup"]: g["openblas_gflops"] for g in sg}
    peak = max([nitro_sg] + list(ob.values()))
    size = sg[0]["m"] if sg else 0
    out.append("")
    kernel = next((g.get("kernel") for g in r["gemm"] if g.get("kernel")), "?")
    out.append(f"nitro's GEMM kernel: {kernel} (NITRO_CPU_ISA caps it; the FMA ceiling is that instruction set's)")
    out.append(f"fp32 reference ({T} threads): FMA ceiling {fma:.0f} GFLOP/s; SGEMM {size}^3: nitro {nitro_sg:.0f}, "
               f"OpenBLAS {ob.get('env', 0):.0f} (env) / {ob.get('native', 0):.0f} (native) GFLOP/s -> peak {peak:.0f} GFLOP/s")
    handoff = [g["us"] for g in r["gemm"] if g["what"] == "handoff"]
    if handoff:
        out.append(f"thread hand-off (a region every thread takes part in): {min(handoff):.2f} us")
    # products of a training step
    line = [g["ns"] for g in r["gemm"] if g["what"] == "line"]
    if line:
        out.append(f"a cache line from one thread to another: {min(line):.0f} ns")
    shapes = [g for g in r["gemm"] if "op" in g and g["what"] != "sgemm"]
    if shapes:
        out.append("")
        out.append(f"{'product':12s} {'op':3s} {'m x n x k':>16s} {'nitro':>8s} {'OpenBLAS':>9s}   GFLOP/s (best of env/native)")
        names = []
        for g in shapes:
            if g["what"] not in names:
                names.append(g["what"])
        for name in names:
            rows = [g for g in shapes if g["what"] == name]
            g0 = rows[0]
            out.append(f"{name:12s} {g0['op']:3s} {g0['m']:>5d}x{g0['n']:>4d}x{g0['k']:>5d} "
                       f"{max(g['nitro_gflops'] for g in rows):8.0f} {max(g['openblas_gflops'] for g in rows):9.0f}")
    # training
    out.append("")
    out.append(f"{'model':6s} {'framework':28s} {'epochs':>6s} {'images':>6s} {'samples/s':>10s} {'ratio':>6s} {'test acc':>8s} {'peak RSS':>9s}  (median of {max(1, len({x['repeat'] for x in r['runs']}))})")
    verdicts = []
    for model in models:
        rows = [x for x in r["runs"] if x["model"] == model and "error" not in x]
        by = {}
        for x in rows:
            by.setdefault(x["label"], []).append(x)
        stat = {lab: (median([x["samples_per_s"] for x in xs]), median([x["test_acc"] for x in xs]),
                      max(x["peak_rss_mb"] for x in xs), xs[0]["epochs"], xs[0]["train_samples"] // max(1, xs[0]["epochs"]))
                for lab, xs in by.items()}
        torch_labels = [lab for lab in stat if lab.startswith("pytorch")]
        best_torch = max(torch_labels, key=lambda lab: stat[lab][0]) if torch_labels else None
        for lab in ["nitro", "pytorch (OpenBLAS env)", "pytorch (OpenBLAS native)"]:
            if lab not in stat:
                errs = [x for x in r["runs"] if x["model"] == model and x.get("label") == lab and "error" in x]
                if errs:
                    out.append(f"{model:6s} {lab:28s} failed: {errs[0]['error'][-120:]}")
                continue
            sps, acc, rss, ep, per_epoch = stat[lab]
            ratio = sps / stat[best_torch][0] if best_torch and lab == "nitro" else float("nan")
            mark = " *" if lab == best_torch else ""
            out.append(f"{model:6s} {lab + mark:28s} {ep:6d} {per_epoch:6d} {sps:10.0f} {'' if ratio != ratio else f'{ratio:5.1f}x':>6s} "
                       f"{acc * 100:7.2f}% {rss:7.0f} MB")
        if "nitro" in stat and best_torch:
            ratio = stat["nitro"][0] / stat[best_torch][0]
            dacc = (stat["nitro"][1] - stat[best_torch][1]) * 100
            if model == "mlp":
                verdicts.append(f"MLP: {ratio:.1f}x PyTorch (target >= 6x), accuracy {dacc:+.2f} points (target within +-0.5): "
                                + ("met" if ratio >= 6 and abs(dacc) <= 0.5 else "NOT met"))
            elif model == "cnn":
                verdicts.append(f"CNN: {ratio:.1f}x PyTorch (target >= 3x), accuracy {dacc:+.2f} points: " + ("met" if ratio >= 3 else "NOT met"))
            elif model == "wide":
                flops = by["nitro"][0].get("flops_per_sample", 0)
                gf = stat["nitro"][0] * flops / 1e9
                frac = gf / peak if peak else float("nan")
                verdicts.append(f"wide MLP: nitro trains at {gf:.0f} GFLOP/s = {frac * 100:.0f}% of the {peak:.0f} GFLOP/s GEMM peak "
                                f"(target >= 60%): " + ("met" if frac >= 0.6 else "NOT met") + f"; {ratio:.1f}x PyTorch")
    out.append("(* the faster PyTorch setup: the ratio is nitro over it)")
    if verdicts:
        out.append("")
        out += verdicts
    if r["compile"]:
        out.append("")
        out.append(f"{'compile (one translation unit, -O3 -march=native)':52s} {'wall s':>7s} {'CPU s':>7s} {'peak MB':>8s}")
        for c in r["compile"]:
            if c["what"] == "compile":
                if "error" in c:
                    out.append(f"{c['name']:52s} {c['error']}")
                else:
                    out.append(f"{c['name']:52s} {c['wall_s']:7.1f} {c['cpu_s']:7.1f} {c['peak_mb']:8d}")
            elif c["what"] == "run30":
                out.append(f"the 30-field experiment trains: {c.get('output', c.get('error', ''))}")
    print("\n".join(out), flush=True)


if __name__ == "__main__":
    main()
