#!/usr/bin/python3
"""Reads a nitro checkpoint with the Python standard library and numpy only, and checks that it
holds the numbers nitro wrote: the format (length, JSON header, offsets covering the data), nitro's
CRC-32 checksums, every parameter value, the column-major layout (nitro's W(i, j) is the file
array's [j, i]) and a forward pass computed here in numpy that matches nitro's logits.

    check_checkpoint.py WRITER WORK_DIR     runs WRITER WORK_DIR/ckpt.safetensors WORK_DIR/expected.json
"""
import json
import os
import struct
import subprocess
import sys
import zlib

import numpy as np

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
          "I16": np.int16, "I8": np.int8, "U8": np.uint8, "U16": np.uint16, "U32": np.uint32, "U64": np.uint64,
          "BOOL": np.bool_}

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED:", what)


def read_safetensors(path):
    """A complete safetensors reader: (tensors by name, metadata, header dict, raw data bytes)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header_text = blob[8:8 + n].decode("utf-8")
    header = json.loads(header_text)
    data = blob[8 + n:]
    meta = header.get("__metadata__", {})
    tensors, spans = {}, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dt = np.dtype(DTYPES[info["dtype"]]).newbyteorder("<")
        shape = tuple(info["shape"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        assert end - begin == count * dt.itemsize, name
        tensors[name] = np.frombuffer(data, dtype=dt, count=count, offset=begin).reshape(shape)
        spans.append((begin, end, name))
    spans.sort()
    at = 0
    for begin, end, name in spans:
        assert begin == at, "offsets leave a gap or overlap at " + name
        at = end
    assert at == len(data), "the offsets do not cover the data exactly"
    return tensors, meta, header, data


def main():
    writer, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    ckpt, expected_path = os.path.join(work, "ckpt.safetensors"), os.path.join(work, "expected.json")
    subprocess.run([writer, ckpt, expected_path], check=True)
    with open(expected_path) as f:
        expected = json.load(f)
    tensors, meta, header, data = read_safetensors(ckpt)

    # nitro's metadata
    check(meta["format"] == "nitro.checkpoint", "format is nitro.checkpoint")
    check(meta["format_version"] == "1", "format_version 1")
    check(int(meta["step"]) == expected["step"], "step recorded")
    check(meta["seed"] == expected["seed"], "seed recorded")
    check(json.loads(meta["metrics"]) == {"train.note": 0.125}, "metrics recorded")
    check(json.loads(meta["selection"]) == {"experiment": "Small"}, "selection recorded")

    # nitro's checksums, recomputed with zlib from the standard library
    crcs = json.loads(meta["crc32.tensors"])
    for name, arr in tensors.items():
        check("%08x" % zlib.crc32(arr.tobytes()) == crcs[name], "crc32 of " + name)
    stripped = json.loads(json.dumps(header))
    recorded = stripped["__metadata__"].pop("crc32.header")
    canonical = json.dumps(stripped, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    check("%08x" % zlib.crc32(canonical.encode("utf-8")) == recorded, "crc32 of the header")
    check(int(meta["data_bytes"]) == len(data), "data_bytes")

    # every value, bit for bit; shapes are nitro's reversed
    for name, ex in expected["tensors"].items():
        arr = tensors[name]
        check(arr.shape == tuple(reversed(ex["nitro_shape"])), "shape of %s: %s vs nitro %s" % (name, arr.shape, ex["nitro_shape"]))
        want = np.array(ex["values"], dtype=np.float64).astype(np.float32)
        check(np.array_equal(arr.ravel(order="C"), want), "values of " + name)
    for p in expected["probes"]:
        i, j = p["nitro_index"]
        check(float(tensors[p["name"]][j, i]) == p["value"], "nitro %s(%d, %d) is the file's [%d, %d]" % (p["name"], i, j, j, i))

    # a forward pass in numpy from the file alone: row-major x [B, 784] @ W [784, 16] (nitro [16, 784])
    x = tensors["data.img"].astype(np.float64)  # NCHW (nitro WHCN reversed)
    x = x.reshape(x.shape[0], -1)  # each image's 784 values, in memory order, as the dense layer reads them
    h = np.maximum(x @ tensors["params.layer_1.weight"].astype(np.float64) + tensors["params.layer_1.bias"], 0.0)
    logits = h @ tensors["params.layer_2.weight"].astype(np.float64) + tensors["params.layer_2.bias"]
    nitro_logits = tensors["data.logits"].astype(np.float64)
    check(logits.shape == (8, 10), "logits shape")
    err = float(np.max(np.abs(logits - nitro_logits)))
    check(err < 1e-4 * max(1.0, float(np.max(np.abs(nitro_logits)))), "numpy's forward matches nitro's logits (max error %g)" % err)

    checks = 6 + 3 + len(tensors) + 2 * len(expected["tensors"]) + len(expected["probes"]) + 2
    print("%d passed, %d failed" % (checks - len(failures), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
