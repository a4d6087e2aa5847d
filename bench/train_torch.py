#!/usr/bin/python3
"""bench/train_torch.py - PyTorch's side of the side-by-side training benchmark (bench/run.sh).

    train_torch.py <model> [--epochs N] [--train-limit N] [--threads T] [--device cuda] [--compile]
        model: mlp | wide | cnn | cnn_example

cnn is bench/train_nitro's CNN (no batch norm, no dropout); cnn_example is examples/fashion_cnn.cpp
as it is (batch norm after each pooling, dropout 0.25 before the dense layers), which
bench/gpu_check.sh compares with that example on a GPU. --device cuda keeps the data and the model
on the GPU (synchronising before each epoch's clock stops); --compile runs the model through
torch.compile (PyTorch 2), whose first epoch includes the compilation: see epoch_samples_per_s.

Trains the model bench/train_nitro.cpp trains, the same way: Fashion-MNIST from the same files
(pixels scaled to [0, 1]), the whole 60000-image train split reshuffled each epoch with the last
partial batch dropped, batch 128, AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 1e-2),
cross-entropy with label smoothing 0.05, PyTorch's default initialisation. Then prints one JSON
line: training samples/s (the training loop only), test accuracy, peak resident memory, and which
BLAS library the process loaded.

The data stay in two tensors and batches are gathered by index: no DataLoader, no worker
processes — the cheapest input path PyTorch has, so the comparison measures the framework.
Threads: torch.set_num_threads(T) (bench/run.sh also sets OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS to T).
"""
import argparse
import gzip
import json
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = os.environ.get("NITRO_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def read_idx(name):
    with gzip.open(os.path.join(DATA, name), "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(train_limit):
    xtr = read_idx("train-images-idx3-ubyte.gz")
    ytr = read_idx("train-labels-idx1-ubyte.gz")
    xte = read_idx("t10k-images-idx3-ubyte.gz")
    yte = read_idx("t10k-labels-idx1-ubyte.gz")
    if train_limit > 0:
        xtr, ytr = xtr[:train_limit], ytr[:train_limit]
    as_x = lambda a: torch.from_numpy(a.astype(np.float32) / 255.0).unsqueeze(1)  # [N, 1, 28, 28]
    as_y = lambda a: torch.from_numpy(a.astype(np.int64))
    return as_x(xtr), as_y(ytr), as_x(xte), as_y(yte)


def build(model):
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    if model == "wide":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    if model == "cnn":  # examples/fashion_cnn.cpp with channels = 32
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(49 * 64, 128), nn.ReLU(), nn.Linear(128, 10))
    if model == "cnn_example":  # examples/fashion_cnn.cpp as it is: batch norm and dropout too
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.BatchNorm2d(32),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.BatchNorm2d(64),
                             nn.Flatten(), nn.Dropout(0.25), nn.Linear(49 * 64, 128), nn.ReLU(), nn.Linear(128, 10))
    raise SystemExit(f"train_torch.py: unknown model '{model}' (use mlp, wide, cnn, cnn_example)")


def blas_library():
    """The BLAS shared object this process mapped (torch links libblas.so.3, an alternative)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower() and "/" in line}
        return sorted(os.path.realpath(p) for p in libs)
    except OSError:
        return []


def aten_cpu_capability():
    """The instruction set ATen's own kernels run with (ATEN_CPU_CAPABILITY caps it), as torch reports it."""
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            return line.split(":", 1)[1].strip()
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--train-limit", type=int, default=0)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("train_torch.py: --device cuda, but this PyTorch sees no GPU")
    if args.compile and not hasattr(torch, "compile"):
        raise SystemExit(f"train_torch.py: --compile needs torch.compile (PyTorch 2); this is {torch.__version__}")
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    xtr, ytr, xte, yte = (t.to(dev) for t in load(args.train_limit))
    net = build(args.model).to(dev)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
    step_net = torch.compile(net) if args.compile else net
    batch = 128
    n = xtr.shape[0]
    steps = n // batch
    g = torch.Generator().manual_seed(args.seed)

    net.train()
    seconds = 0.0
    rates = []
    for epoch in range(args.epochs):
        order = torch.randperm(n, generator=g).to(dev)
        sync()
        t0 = time.perf_counter()
        for s in range(steps):
            idx = order[s * batch:(s + 1) * batch]
            x, y = xtr.index_select(0, idx), ytr.index_select(0, idx)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(step_net(x), y, label_smoothing=0.05)
            loss.backward()
            opt.step()
        sync()
        dt = time.perf_counter() - t0
        seconds += dt
        rates.append(steps * batch / dt)

    net.eval()
    correct = 0
    loss_sum = 0.0
    with torch.no_grad():
        for s in range(0, xte.shape[0], 1000):
            logits = net(xte[s:s + 1000])
            loss_sum += float(F.cross_entropy(logits, yte[s:s + 1000], label_smoothing=0.05, reduction="sum"))
            correct += int((logits.argmax(1) == yte[s:s + 1000]).sum())
    samples = args.epochs * steps * batch
    flops = {"mlp": 2.0 * (784 * 256 + 256 * 256 + 2560) * 3 - 2.0 * 784 * 256,
             "wide": 2.0 * (784 * 1024 + 1024 * 1024 + 10240) * 3 - 2.0 * 784 * 1024}.get(args.model, 0.0)
    print(json.dumps({
        "framework": "pytorch",
        "mode": "torch.compile" if args.compile else "eager",
        "model": args.model,
        "device": str(dev) + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else ""),
        "threads": torch.get_num_threads(),
        "epochs": args.epochs,
        "train_samples": samples,
        "seconds": round(seconds, 4),
        "samples_per_s": round(samples / seconds, 1),
        "epoch_samples_per_s": [round(r, 1) for r in rates],
        "flops_per_sample": flops,
        "test_acc": round(correct / xte.shape[0], 4),
        "test_loss": round(loss_sum / xte.shape[0], 4),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "torch": torch.__version__,
        "blas": blas_library(),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
        "openblas_l2_size": os.environ.get("OPENBLAS_L2_SIZE", ""),
        "aten_cpu_capability": aten_cpu_capability(),
        "onednn_max_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", os.environ.get("DNNL_MAX_CPU_ISA", "")),
    }))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
