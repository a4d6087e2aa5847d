#!/usr/bin/python3
"""An independent reader of the run files nitro writes, in standard-library Python only.

Runs the C++ writer (tests/python/write_logs.cpp), then reads back:
  - the TensorBoard event file: TFRecord framing (uint64 length, masked CRC32C of the length,
    payload, masked CRC32C of the payload; CRC32C computed here), each payload decoded as a
    tensorflow.Event protocol buffer by a small wire-format parser (no protobuf package);
  - metrics.jsonl: metadata first, then one JSON object per record;
  - metrics.csv: the history table.
Every value is compared with what the writer's formulas give. The reader itself is checked too:
a truncated last record and a flipped payload byte must both be caught.

Usage: read_logs.py <trainer_write_logs executable> <scratch directory>
"""
import csv
import json
import math
import os
import struct
import subprocess
import sys

# ---- CRC-32C (Castagnoli), reflected polynomial 0x82F63B78 ----------------------------------------
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class Corrupt(Exception):
    pass


def read_records(data: bytes):
    """Yields each TFRecord payload; raises Corrupt on a bad CRC; returns the truncated tail size."""
    at = 0
    records = []
    while at < len(data):
        if at + 12 > len(data):
            return records, len(data) - at
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (crc_len,) = struct.unpack("<I", data[at + 8:at + 12])
        if crc_len != masked_crc32c(header):
            raise Corrupt("length CRC mismatch at offset %d" % at)
        if at + 12 + length + 4 > len(data):
            return records, len(data) - at
        payload = data[at + 12:at + 12 + length]
        (crc_data,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if crc_data != masked_crc32c(payload):
            raise Corrupt("payload CRC mismatch at offset %d" % at)
        records.append(payload)
        at += 16 + length
    return records, 0


# ---- protocol buffer wire format -------------------------------------------------------------------
def varint(buf: bytes, at: int):
    shift = value = 0
    while True:
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7


def fields(buf: bytes):
    """[(field number, wire type, value)] with value an int, bytes, or raw fixed-width bytes."""
    out = []
    at = 0
    while at < len(buf):
        key, at = varint(buf, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            v, at = varint(buf, at)
        elif wire == 1:
            v, at = buf[at:at + 8], at + 8
        elif wire == 2:
            n, at = varint(buf, at)
            v, at = buf[at:at + n], at + n
        elif wire == 5:
            v, at = buf[at:at + 4], at + 4
        else:
            raise Corrupt("wire type %d" % wire)
        out.append((number, wire, v))
    if at != len(buf):
        raise Corrupt("message overruns its length")
    return out


def decode_event(payload: bytes):
    ev = {"values": []}
    for number, wire, v in fields(payload):
        if number == 1 and wire == 1:
            ev["wall_time"] = struct.unpack("<d", v)[0]
        elif number == 2 and wire == 0:
            ev["step"] = v - (1 << 64) if v >= (1 << 63) else v
        elif number == 3 and wire == 2:
            ev["file_version"] = v.decode()
        elif number == 5 and wire == 2:
            for sn, sw, sv in fields(v):
                assert sn == 1 and sw == 2, "Summary holds only values"
                value = {}
                for vn, vw, vv in fields(sv):
                    if vn == 1:
                        value["tag"] = vv.decode()
                    elif vn == 2 and vw == 5:
                        value["simple_value"] = struct.unpack("<f", vv)[0]
                    elif vn == 9:
                        for pn, _, pv in fields(vv):
                            if pn == 1:
                                for qn, _, qv in fields(pv):
                                    if qn == 1:
                                        value["plugin"] = qv.decode()
                    elif vn == 8:
                        for tn, tw, tv in fields(vv):
                            if tn == 1:
                                value["dtype"] = tv
                            elif tn == 8:
                                value["text"] = tv.decode()
                ev["values"].append(value)
        else:
            raise Corrupt("unexpected Event field %d" % number)
    return ev


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ---- what the writer wrote -------------------------------------------------------------------------
def expected_rows():
    """(step, epoch, split, {metric: value}) in writing order, from write_logs.cpp's formulas."""
    rows = []
    window = 0.0
    for s in range(1, 11):
        window = window + 1.0 / s
        if s % 2 == 0:
            rows.append((s, (s - 1) // 5 + 1, "train", {"loss": window / 2, "eta": 0.001 * s}))
            window = 0.0
        if s % 5 == 0:
            m = {"acc": 0.5 + s / 100.0, "loss": 2.0 / s}
            if s == 10:
                m["weird"] = float("nan")
            rows.append((s, s // 5, "valid", m))
    return rows


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def check_tensorboard(directory: str, rows):
    tb = os.path.join(directory, "tb")
    names = [n for n in os.listdir(tb) if n.startswith("events.out.tfevents.")]
    assert len(names) == 1, "one event file, found %r" % names
    data = open(os.path.join(tb, names[0]), "rb").read()
    payloads, tail = read_records(data)
    assert tail == 0, "no truncated tail in a finished run"
    events = [decode_event(p) for p in payloads]
    assert events[0].get("file_version") == "brain.Event:2", "file_version first"
    for ev in events:
        assert ev["wall_time"] > 1.6e9, "wall_time is seconds since the epoch"
    report = events[1]["values"][0]
    assert report["tag"] == "binding_report" and report["plugin"] == "text" and report["dtype"] == 7
    assert report["text"] == "Nitro PyCheck<8>\n  the binding report\n"
    scalar_events = events[2:-1]
    assert len(scalar_events) == len(rows), "one event per logged step or evaluation"
    for ev, (step, _, split, metrics) in zip(scalar_events, rows):
        assert ev["step"] == step, (ev["step"], step)
        got = {v["tag"]: v["simple_value"] for v in ev["values"]}
        want = {split + "/" + k: f32(v) for k, v in metrics.items()}
        assert got.keys() == want.keys(), (got, want)
        for k in want:
            assert same(got[k], want[k]), (k, got[k], want[k])
    status = events[-1]["values"][0]
    assert status["tag"] == "status" and status["text"] == "finished" and events[-1]["step"] == 10

    # the reader catches damage: a cut-short last record, a flipped byte
    cut_records, cut_tail = read_records(data[:-3])
    assert len(cut_records) == len(payloads) - 1 and cut_tail > 0
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x40
    try:
        read_records(bytes(flipped))
        raise AssertionError("a flipped byte went unnoticed")
    except Corrupt:
        pass
    return len(payloads)


def check_jsonl(directory: str, rows):
    lines = open(os.path.join(directory, "metrics.jsonl"), encoding="utf-8").read().split("\n")
    assert lines[-1] == "", "every line ends with a newline"
    objs = [json.loads(l) for l in lines[:-1]]
    meta = objs[0]
    assert meta["type"] == "metadata" and meta["format"] == "nitro.metrics.v1"
    assert meta["selection"] == {"variant": "small", "set": {"lr": 0.002}} and meta["seed"] == 7
    assert meta["experiment"] == "PyCheck<8>" and meta["total_steps"] == 10 and meta["resumed"] is False
    body = objs[1:-1]
    assert len(body) == len(rows)
    for o, (step, epoch, split, metrics) in zip(body, rows):
        assert o["type"] == "metrics" and o["step"] == step and o["epoch"] == epoch and o["split"] == split, o
        for k, v in metrics.items():
            if math.isnan(v):
                assert o[k] is None, "NaN is null in JSON"
            else:
                assert o[k] == v, (k, o[k], v)  # exact: shortest round-trip text
    end = objs[-1]
    assert end["type"] == "end" and end["status"] == "finished" and end["step"] == 10
    return len(objs)


def check_csv(directory: str, rows):
    with open(os.path.join(directory, "metrics.csv"), newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    assert table[0] == ["step", "epoch", "split", "loss", "eta", "acc", "weird"], table[0]
    assert len(table) - 1 == len(rows)
    for line, (step, epoch, split, metrics) in zip(table[1:], rows):
        assert int(line[0]) == step and int(line[1]) == epoch and line[2] == split, line
        for name, cell in zip(table[0][3:], line[3:]):
            if name in metrics:
                assert same(float(cell), metrics[name]), (name, cell, metrics[name])
            else:
                assert cell == "", (name, cell)
    return len(table)


def main():
    writer, directory = sys.argv[1], sys.argv[2]
    subprocess.run([writer, directory], check=True)
    rows = expected_rows()
    n_tb = check_tensorboard(directory, rows)
    n_jsonl = check_jsonl(directory, rows)
    n_csv = check_csv(directory, rows)
    print("ok: %d TensorBoard records (CRCs verified), %d JSONL lines, %d CSV lines" % (n_tb, n_jsonl, n_csv))


if __name__ == "__main__":
    main()
