#!/usr/bin/python3
"""tiny_lm's run in PyTorch, for bench/lm_compare.py: the same model, data, optimizer and schedule.

    lm_torch.py --layers 2 --width 128 --seq 1024 --steps 60 --threads 2 [--batch 8] [--seed 1]

Model (examples/tiny_lm.cpp): byte embedding [256 -> W] (N(0, 1), as torch.nn.Embedding), learned
positions [1024, W] (N(0, 0.02)), `layers` pre-LN blocks (x + attn(ln1(x)), h + mlp(ln2(h)); attention
is one W -> 3W product, causal softmax(q.k / sqrt(d)) v over W / 64 heads, a W -> W projection; the
MLP W -> 4W gelu (tanh approximation, as nitro's) -> W), a final LayerNorm and a W -> 256 head; every
Linear with PyTorch's default initialisation. AdamW (betas 0.9 / 0.95, eps 1e-8, weight decay 0.1 on
the blocks and the head, none on embeddings and norms; embeddings at half the rate), a linear
warm-up of 10 steps from 0 and a cosine to 0.1 x lr, batch 8 windows of seq + 1 bytes.

Data: Debian's fortunes as nitro cuts them (data/text.hpp): every fortune file of
/usr/share/games/fortunes in name order, documents between `%` lines, document i to test when
i % 20 == 0, valid when 1, train otherwise, each split's documents joined by a newline, windows of
seq + 1 bytes starting every seq bytes. The order of windows is nitro's: the loader's permutation of
epoch e is Fisher-Yates under xoshiro256** seeded from fold(fold(seed, 2), e) (core/rng.hpp,
data/loader.hpp), replayed here bit for bit (bench/nitro_order.py; tests/python/nitro_order_check.py
holds it to the loader), so both frameworks see the same windows in the same batches at every step.

Prints one JSON line: tokens/s of the training loop (the first 5 steps excluded: warm-up of the
allocator and threads), the mean train loss of every 10 steps, the loss over the whole valid split at the end, peak RSS.
"""
import argparse
import json
import math
import os
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from nitro_order import nitro_order


def corpus(seq):
    d = os.environ.get("NITRO_FORTUNES_DIR", "/usr/share/games/fortunes")
    docs = []
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if os.path.islink(p) or not os.path.isfile(p) or name.endswith(".dat") or name.endswith(".u8"):
            continue
        text = open(p, "rb").read()
        lines = text.split(b"\n")
        if text.endswith(b"\n"):
            lines = lines[:-1]  # nitro reads lines up to the last newline
        doc = b""
        for line in lines:
            if line == b"%":
                if doc:
                    docs.append(doc)
                doc = b""
            else:
                doc += line + b"\n"
        if doc:
            docs.append(doc)
    splits = {"train": [], "valid": [], "test": []}
    for i, doc in enumerate(docs):
        splits["test" if i % 20 == 0 else "valid" if i % 20 == 1 else "train"].append(doc)
    out = {}
    for k, v in splits.items():
        text = b"\n".join(v)
        n = (len(text) - 1) // seq
        t = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
        idx = torch.arange(n)[:, None] * seq + torch.arange(seq + 1)[None, :]
        out[k] = t[idx]  # [windows, seq + 1]
    return out


class Block(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.heads = w // 64
        self.ln1, self.ln2 = nn.LayerNorm(w), nn.LayerNorm(w)
        self.qkv, self.proj = nn.Linear(w, 3 * w), nn.Linear(w, w)
        self.fc, self.out = nn.Linear(w, 4 * w), nn.Linear(4 * w, w)

    def attn(self, x):
        b, t, w = x.shape
        q, k, v = self.qkv(x).split(w, dim=2)
        shape = lambda z: z.view(b, t, self.heads, w // self.heads).transpose(1, 2)
        q, k, v = shape(q), shape(k), shape(v)
        s = (q @ k.transpose(-2, -1)) / math.sqrt(w // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        s = s.masked_fill(mask, float("-inf"))
        y = F.softmax(s, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, w))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Net(nn.Module):
    def __init__(self, layers, w):
        super().__init__()
        self.tok = nn.Embedding(256, w)
        self.pos = nn.Parameter(torch.randn(1024, w) * 0.02)
        self.blocks = nn.ModuleList([Block(w) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(w)
        self.head = nn.Linear(w, 256)

    def forward(self, tokens):
        h = self.tok(tokens) + self.pos[: tokens.shape[1]]
        for b in self.blocks:
            h = b(h)
        return self.head(self.ln_f(h))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=0.0015)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    data = corpus(a.seq)
    net = Net(a.layers, a.width)
    embed = [net.tok.weight, net.pos]
    norms = [p for n, p in net.named_parameters() if "ln" in n]
    rest = [p for n, p in net.named_parameters() if "ln" not in n and not n.startswith("tok") and n != "pos"]
    opt = torch.optim.AdamW([{"params": rest, "weight_decay": 0.1, "lr": a.lr},
                             {"params": norms, "weight_decay": 0.0, "lr": a.lr},
                             {"params": embed, "weight_decay": 0.0, "lr": 0.5 * a.lr}], betas=(0.9, 0.95), eps=1e-8)
    base = [g["lr"] for g in opt.param_groups]
    warmup, n = 10, a.steps - 10

    def factor(step):  # nitro's warmup_cosine(lr, 10, {.min = 0.1 lr}) at step (1-based)
        i = step - 1
        if i < warmup:
            return i / warmup
        j = min(i - warmup, n)
        return 0.1 + 0.9 * (1 + math.cos(math.pi * j / n)) / 2

    train = data["train"]
    per_epoch = train.shape[0] // a.batch  # nitro's training loader drops the last partial batch
    orders = {}
    losses, window, t0, timed = [], [], None, 0
    for step in range(1, a.steps + 1):
        if step == 6:
            t0 = time.perf_counter()
        for g, b in zip(opt.param_groups, base):
            g["lr"] = b * factor(step)
        epoch, k = divmod(step - 1, per_epoch)
        if epoch not in orders:
            orders = {epoch: torch.tensor(nitro_order(train.shape[0], a.seed, epoch))}
        batch = train[orders[epoch][k * a.batch: (k + 1) * a.batch]]
        x, y = batch[:, :-1], batch[:, 1:]
        loss = F.cross_entropy(net(x).reshape(-1, 256), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        window.append(loss.item())
        if step % 10 == 0:
            losses.append(sum(window) / len(window))
            window = []
        if step > 5:
            timed += 1
    elapsed = time.perf_counter() - t0
    with torch.no_grad():  # the whole valid split, as nitro evaluates it
        total, count = 0.0, 0
        for v in data["valid"].split(16):
            total += F.cross_entropy(net(v[:, :-1]).reshape(-1, 256), v[:, 1:].reshape(-1), reduction="sum").item()
            count += v[:, 1:].numel()
        valid = total / count
    print(json.dumps({"framework": "torch", "tokens_per_s": timed * a.batch * a.seq / elapsed, "train_loss_every_10": losses,
                      "valid_loss": valid, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "torch": torch.__version__, "threads": a.threads}))


if __name__ == "__main__":
    main()
