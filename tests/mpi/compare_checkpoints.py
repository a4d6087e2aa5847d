#!/usr/bin/env python3
# Compares the last checkpoints of two runs of the same program (tests/mpi/example_check.cmake):
# every tensor whose name starts with one of the prefixes (params., state., optim.) must match to a
# float tolerance, and both checkpoints must be of the same step. Standard library only: a
# safetensors file is 8 bytes of header length, a JSON header, then the raw little-endian data.
#   compare_checkpoints.py RUN_A RUN_B [--rtol 1e-4] [--atol 1e-5]
import json, math, os, struct, sys

def last_checkpoint(run):
    d = os.path.join(run, "checkpoints")
    files = sorted(f for f in os.listdir(d) if f.startswith("step-") and f.endswith(".safetensors"))
    if not files:
        sys.exit(f"no checkpoint in {d}")
    return os.path.join(d, files[-1])

def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        fmt = {"F32": "f", "F64": "d", "I64": "q", "I32": "i"}.get(e["dtype"])
        if fmt is None:
            continue
        size = struct.calcsize(fmt)
        out[name] = struct.unpack_from("<%d%s" % ((b - a) // size, fmt), raw, base + a)
    return meta, out

def main():
    args = sys.argv[1:]
    rtol, atol = 1e-4, 1e-5
    if "--rtol" in args:
        i = args.index("--rtol"); rtol = float(args[i + 1]); del args[i:i + 2]
    if "--atol" in args:
        i = args.index("--atol"); atol = float(args[i + 1]); del args[i:i + 2]
    a_path, b_path = last_checkpoint(args[0]), last_checkpoint(args[1])
    if os.path.basename(a_path) != os.path.basename(b_path):
        sys.exit(f"the runs end at different steps: {a_path} vs {b_path}")
    _, a = read(a_path)
    _, b = read(b_path)
    names = sorted(k for k in a if k.startswith(("params.", "state.", "optim.")))
    if not names or not any(k.startswith("params.") for k in names):
        sys.exit(f"{a_path} holds no parameters")
    worst, count = 0.0, 0
    for k in names:
        if k not in b or len(a[k]) != len(b[k]):
            sys.exit(f"tensor {k} differs in presence or size between {a_path} and {b_path}")
        for x, y in zip(a[k], b[k]):
            count += 1
            if not (math.isfinite(x) and math.isfinite(y)) or abs(x - y) > atol + rtol * abs(y):
                sys.exit(f"{k}: {x} vs {y} (rtol {rtol}, atol {atol}) in {a_path} vs {b_path}")
            worst = max(worst, abs(x - y))
    print(f"{len(names)} tensors, {count} values equal within rtol {rtol} + atol {atol} (largest difference {worst:.3g}) at {os.path.basename(a_path)}")

main()
