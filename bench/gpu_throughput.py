#!/usr/bin/python3
"""bench/gpu_throughput.py - the examples through the handle on a GPU, beside PyTorch on the same GPU.

    gpu_throughput.py BUILD [--device cuda] [--work DIR]     (with the Python that has PyTorch)

BUILD holds kernels/fashion_mlp_nvcc and kernels/fashion_cnn_nvcc (examples/fashion_mlp.cpp and
fashion_cnn.cpp built by nvcc). For each, one epoch of `run --set device=DEVICE --set batch_size=128`
through the trainer's own command line, and the same epoch with device=cpu (the same binary on
every core). Samples/s is the training loop's, from the run's own metrics.jsonl: the wall time
between its first and last logged training step (no evaluation in between, no start-up). Then
bench/train_torch.py on the same device with the same model (mlp; cnn_example, the example with its
batch norm and dropout) and batch, eager and under torch.compile where PyTorch has it (2 epochs,
the second one's rate: the first includes the compilation). Prints one table, and one JSON line per
run. Exit 1 when a run fails or does not finish.

--device cpu runs every row on the CPU: how the script is tested on a machine without a GPU.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 128  # nitro's runs and PyTorch's (train_torch.py's batch)


def nitro_run(exe, device, work, tag):
    cmd = [exe, "run", "--set", f"device={device}", "--set", f"batch_size={BATCH}", "--set", "max_epochs=1", "--quiet",
           "--run-dir", work, "--id", tag]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-600:]}")
    folder = glob.glob(os.path.join(work, f"*-{tag}"))
    if len(folder) != 1:
        raise RuntimeError(f"{' '.join(cmd)} left {len(folder)} run folders named *-{tag}")
    rows = [json.loads(l) for l in open(os.path.join(folder[0], "metrics.jsonl")) if l.strip()]
    train = [r for r in rows if r.get("type") == "metrics" and r.get("split") == "train"]
    if len(train) < 2:
        raise RuntimeError(f"{folder[0]}: {len(train)} logged training steps, need two to time the loop")
    status = json.load(open(os.path.join(folder[0], "status.json")))
    if status.get("state") != "finished":
        raise RuntimeError(f"{folder[0]}: state {status.get('state')}")
    backend = json.load(open(os.path.join(folder[0], "manifest.json"))).get("backend", {}).get("name")
    steps = train[-1]["step"] - train[0]["step"]
    return {"framework": "nitro", "backend": backend, "device": device,
            "samples_per_s": round(steps * BATCH / (train[-1]["wall_time"] - train[0]["wall_time"]), 1),
            "test_acc": status.get("last", {}).get("test/acc")}


def torch_run(model, device, compiled):
    cmd = [sys.executable, os.path.join(HERE, "train_torch.py"),
           model, "--device", device, "--epochs", "2", "--threads", str(os.cpu_count())] + (["--compile"] if compiled else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {(p.stderr or p.stdout)[-600:]}")
    row = json.loads(p.stdout.strip().splitlines()[-1])
    return {"framework": "pytorch " + row["mode"], "device": row["device"], "samples_per_s": row["epoch_samples_per_s"][-1],
            "test_acc": row["test_acc"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = args.work or os.path.join(args.build, "gpu_throughput")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        import torch
        has_compile = hasattr(torch, "compile")
    except ImportError:
        has_compile = False
    failed = False
    table = []
    for model, exe, torch_model in (("fashion_mlp", "fashion_mlp_nvcc", "mlp"), ("fashion_cnn", "fashion_cnn_nvcc", "cnn_example")):
        runs = []
        path = os.path.join(args.build, "kernels", exe)
        jobs = [("nitro, the handle", lambda: nitro_run(path, args.device, work, f"{model}-dev")),
                ("nitro, CPU", lambda: nitro_run(path, "cpu", work, f"{model}-cpu")),
                ("pytorch eager", lambda: torch_run(torch_model, args.device, False))]
        if has_compile:
            jobs.append(("pytorch torch.compile", lambda: torch_run(torch_model, args.device, True)))
        for label, job in jobs:
            try:
                r = job()
            except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError, IndexError) as e:
                failed = True
                r = {"error": str(e)}
            r.update(model=model, label=label)
            print(json.dumps(r), flush=True)
            runs.append(r)
        table.append((model, runs))
    print(f"\n{'model':12s} {'run':24s} {'device':28s} {'samples/s':>10s} {'vs handle':>9s} {'test acc':>8s}")
    for model, runs in table:
        base = runs[0].get("samples_per_s")
        for r in runs:
            if "error" in r:
                print(f"{model:12s} {r['label']:24s} FAILED: {r['error'][-160:]}")
                continue
            ratio = f"{base / r['samples_per_s']:.2f}x" if base else "-"
            acc = f"{r['test_acc']:.4f}" if isinstance(r.get("test_acc"), (int, float)) else "-"
            print(f"{model:12s} {r['label']:24s} {str(r.get('backend') or r['device'])[:28]:28s} {r['samples_per_s']:10.0f} {ratio:>9s} {acc:>8s}")
    if not has_compile:
        print("torch.compile: not in this PyTorch (it needs PyTorch 2); eager only")
    print("vs handle: the handle's samples/s over the row's (above 1: the handle is faster). One epoch, batch 128;"
          " nitro's test accuracy after it, PyTorch's after its 2 epochs.")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
