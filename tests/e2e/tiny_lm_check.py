#!/usr/bin/python3
"""tiny_lm end to end: the smoke run trains (loss falls, valid bits per byte below the unigram
baseline), `sample` prints text from its checkpoint (the prompt first, the same text for the same
seed, sliding past the model's 1024 positions), and a missing, empty or too short text file stops the run before its first step with a
coded error naming the file and the knob (the run's record: failed at step 0, the error in it).

    tiny_lm_check.py TINY_LM WORK
"""
import glob
import json
import os
import shutil
import subprocess
import sys


def run(exe, work, *args):
    return subprocess.run([exe, *args], cwd=work, capture_output=True, text=True)


def main():
    exe, work = sys.argv[1:3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    fails = []

    p = run(exe, work, "run", "--variant", "smoke", "--steps", "40", "--quiet", "--run-dir", "runs", "--id", "smoke")
    if p.returncode != 0:
        sys.exit(f"tiny_lm run --variant smoke exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    (folder,) = glob.glob(os.path.join(work, "runs", "*-smoke"))
    train, valid = [], []
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "metrics" and r.get("split") == "train":
                train.append(r["loss"])
            if r.get("type") == "metrics" and r.get("split") == "valid":
                valid.append(r)
    print("train losses:", " ".join(f"{x:.3f}" for x in train))
    if len(train) < 3 or not train[-1] < train[0] - 1.0:
        fails.append(f"the smoke run's train loss did not fall by a nat: {train}")
    if not valid:
        fails.append("the smoke run logged no valid metrics")
    else:
        v = valid[-1]
        print(f"valid bpb {v['bpb']:.3f}, unigram {v['unigram_bpb']:.3f}, ppl {v['ppl']:.2f}, loss {v['loss']:.3f}")
        if not v["bpb"] < v["unigram_bpb"]:
            fails.append(f"valid bits per byte {v['bpb']} is not below the unigram baseline {v['unigram_bpb']}")
        if abs(v["bpb"] * 0.6931471805599453 - v["loss"]) > 1e-3:
            fails.append(f"bpb {v['bpb']} is not the loss {v['loss']} in bits")
    with open(os.path.join(folder, "status.json")) as f:
        status = json.load(f)
    if status["state"] != "finished" or status["step"] != 40:
        fails.append(f"status: {status['state']} at step {status['step']}")

    # sample: text from the smoke run's best checkpoint, the prompt first, seeded, past the model's positions
    def sample(*extra):
        return subprocess.run([exe, "sample", "--run-dir", "runs", folder, *extra], cwd=work, capture_output=True)
    args = ["--weights", "best", "--prompt", "The cat ", "--tokens", "100"]
    a, b = sample(*args), sample(*args)
    if a.returncode != 0 or not a.stdout.startswith(b"The cat ") or len(a.stdout) != len("The cat ") + 100 + 1:
        fails.append(f"sample: exit {a.returncode}, {len(a.stdout)} bytes:\n{a.stdout!r}\n{a.stderr!r}")
    if a.stdout != b.stdout:
        fails.append("sample: two draws with one seed differ")
    print("sample:", a.stdout.decode("latin-1").strip().replace("\n", " ")[:100])
    hot = sample(*args, "--temperature", "1.5", "--top-k", "0")
    if hot.returncode != 0 or hot.stdout == a.stdout:
        fails.append(f"sample --temperature 1.5 --top-k 0: exit {hot.returncode}, the same text as at 0.8")
    long = sample("--tokens", "1100")  # the latest checkpoint; slides past the model's 1024 positions
    if long.returncode != 0 or len(long.stdout) != 1100 + 1:
        fails.append(f"sample --tokens 1100: exit {long.returncode}, {len(long.stdout)} bytes\n{long.stderr!r}")

    # bad text files: coded errors before any step, no run folder
    open(os.path.join(work, "empty.txt"), "w").close()
    with open(os.path.join(work, "short.txt"), "w") as f:
        f.write("too short for a window of 65 bytes")
    for name, code in (("absent.txt", "E-DATA-010"), ("empty.txt", "E-DATA-011"), ("short.txt", "E-DATA-012")):
        before = set(os.listdir(os.path.join(work, "runs")))
        p = run(exe, work, "run", "--variant", "smoke", "--set", f"text={name}", "--run-dir", "runs")
        said = p.stdout + p.stderr
        print(f"text={name}: exit {p.returncode}: {said.strip().splitlines()[0] if said.strip() else ''}")
        if p.returncode == 0 or code not in said or name not in said or "knob text" not in said:
            fails.append(f"text={name}: expected {code} naming the file and the knob, got exit {p.returncode}:\n{said}")
        # the record says so: failed at step 0, with the error
        new = sorted(set(os.listdir(os.path.join(work, "runs"))) - before)
        if len(new) != 1:
            fails.append(f"text={name}: expected one failed run record, found {new}")
            continue
        with open(os.path.join(work, "runs", new[0], "status.json")) as f:
            failed = json.load(f)
        if failed["state"] != "failed" or failed["step"] != 0 or code not in failed.get("error", ""):
            fails.append(f"text={name}: the record says {failed['state']} at step {failed['step']}: {failed.get('error')}")
    if fails:
        sys.exit("\n".join(fails))
    print("tiny_lm: the smoke run trains; bad text files are coded errors before the first step")


if __name__ == "__main__":
    main()
