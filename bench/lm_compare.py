#!/usr/bin/python3
"""tiny_lm side by side with PyTorch: tokens/s, the train loss at equal steps, the valid loss, peak RSS.

    bench/lm_compare.py TINY_LM [--threads 2] [--sizes default:30,small:60,smoke:60] [--repeats 1] [--json out.json]

For each size (default: layers 4, width 256, seq 1024; small: layers 2, width 128, seq 1024; smoke:
layers 2, width 128, seq 64) and its step count: `tiny_lm run` (NITRO_NUM_THREADS = threads), then
bench/lm_torch.py twice, with the environment's OpenBLAS setup and with OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE unset; the ratio is nitro over the faster PyTorch. nitro's tokens/s is the steps
between its first and last train lines (steps 10 and N) times batch x seq over the wall time between
them (metrics.jsonl; evaluation comes after), PyTorch's the training loop after its first 5 steps.
Peak RSS from /usr/bin/time. Both frameworks train on the same windows in the same batches (PyTorch
replays nitro's training order, bench/nitro_order.py). With --repeats R the three runs alternate R
times; the table shows each framework's median tokens/s and the spread of its repeats.
"""
import statistics
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {"default": (4, 256, 1024, []), "small": (2, 128, 1024, ["--variant", "small"]), "smoke": (2, 128, 64, ["--variant", "smoke"])}


def timed(cmd, env=None, cwd=None):
    p = subprocess.run(["/usr/bin/time", "-f", "RSS_KB=%M", *cmd], capture_output=True, text=True, env=env, cwd=cwd)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    rss = int(re.findall(r"RSS_KB=(\d+)", p.stderr)[-1]) / 1024
    return p.stdout, rss


def nitro(exe, size, steps, threads):
    layers, width, seq, args = SIZES[size]
    work = tempfile.mkdtemp(prefix="lm_bench_")
    env = dict(os.environ, NITRO_NUM_THREADS=str(threads))
    out, rss = timed([exe, "run", *args, "--steps", str(steps), "--run-dir", os.path.join(work, "runs"), "--id", "bench"], env=env, cwd=work)
    (folder,) = [os.path.join(work, "runs", d) for d in os.listdir(os.path.join(work, "runs"))]
    train, valid, stamps = [], None, []
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "metrics" and r.get("split") == "train":
                train.append(r["loss"])
                stamps.append((r["step"], r["wall_time"]))
            if r.get("type") == "metrics" and r.get("split") == "valid":
                valid = r["loss"]
    shutil.rmtree(work)
    # tokens/s between the first and the last train line (the first 10 steps excluded, as PyTorch's first 5)
    (s0, t0), (s1, t1) = stamps[0], stamps[-1]
    batch = 8
    return {"framework": "nitro", "tokens_per_s": (s1 - s0) * batch * seq / (t1 - t0), "train_loss_every_10": train,
            "valid_loss": valid, "peak_rss_mb": rss}


def torch(size, steps, threads, unset):
    layers, width, seq, _ = SIZES[size]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    if unset:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    out, rss = timed(["/usr/bin/python3", os.path.join(HERE, "lm_torch.py"), "--layers", str(layers), "--width", str(width), "--seq",
                      str(seq), "--steps", str(steps), "--threads", str(threads)], env=env)
    r = json.loads(out.strip().splitlines()[-1])
    r["peak_rss_mb"] = rss
    r["openblas_env"] = "unset" if unset else "as set"
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tiny_lm")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", default="default:30,small:60,smoke:60")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json")
    a = ap.parse_args()
    a.tiny_lm = os.path.abspath(a.tiny_lm)  # runs in a scratch folder
    load = os.getloadavg()[0]
    rows = []
    for item in a.sizes.split(","):
        size, steps = item.split(":")
        steps = int(steps)
        runs = {"nitro": [], "as set": [], "unset": []}
        for _ in range(a.repeats):  # alternated, so a slow minute of the machine hits every framework
            runs["nitro"].append(nitro(a.tiny_lm, size, steps, a.threads))
            runs["as set"].append(torch(size, steps, a.threads, False))
            runs["unset"].append(torch(size, steps, a.threads, True))
        median = {k: statistics.median(r["tokens_per_s"] for r in v) for k, v in runs.items()}
        setup = max(("as set", "unset"), key=lambda k: median[k])
        rows.append({"size": size, "steps": steps, "runs": runs, "median": median, "torch_setup": setup,
                     "ratio": median["nitro"] / median[setup]})
        print(f"{size}: nitro {median['nitro']:.0f} tokens/s, torch {median[setup]:.0f} ({setup}): {rows[-1]['ratio']:.2f}x",
              file=sys.stderr)
    print(f"load average before: {load:.2f}, threads {a.threads}, repeats {a.repeats}\n")
    print("| size | steps | nitro tokens/s | PyTorch tokens/s (faster setup) | ratio | train loss at steps 10, 20, ... (nitro / PyTorch) | valid loss (nitro / PyTorch) | peak RSS MB (nitro / PyTorch) |")
    print("|---|---|---|---|---|---|---|---|")
    spread = lambda v: f" ({min(r['tokens_per_s'] for r in v):.0f}-{max(r['tokens_per_s'] for r in v):.0f})" if len(v) > 1 else ""
    for r in rows:
        n, t = r["runs"]["nitro"], r["runs"][r["torch_setup"]]
        losses = ", ".join(f"{x:.2f}/{y:.2f}" for x, y in zip(n[0]["train_loss_every_10"], t[0]["train_loss_every_10"]))
        print(f"| {r['size']} | {r['steps']} | {r['median']['nitro']:.0f}{spread(n)} | {r['median'][r['torch_setup']]:.0f}{spread(t)} "
              f"({r['torch_setup']}) | {r['ratio']:.2f} | {losses} | {n[0]['valid_loss']:.3f} / {t[0]['valid_loss']:.3f} | "
              f"{max(x['peak_rss_mb'] for x in n):.0f} / {max(x['peak_rss_mb'] for x in t):.0f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"load_before": load, "threads": a.threads, "repeats": a.repeats, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
