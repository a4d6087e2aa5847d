#!/usr/bin/env python3
"""Every layer type has its case in the law suite (tests/unit/test_layer_laws.cpp).

usage: check_layer_laws.py LAYERS_DIR LAW_SUITE.cpp

A layer type is a struct at namespace level in LAYERS_DIR/*.hpp whose name ends in _layer or _t
(dense_layer, relu_t, ...). Its case is `struct law_<name>` in the suite, listed in the suite's
TEST_CASE_TEMPLATE as laws::law_<name>. Prints one line per layer without a case; exits 1 if any.
"""
import pathlib
import re
import sys


def layer_types(layers_dir):
    found = {}
    for h in sorted(pathlib.Path(layers_dir).glob("*.hpp")):
        for n, line in enumerate(h.read_text().splitlines(), 1):
            m = re.match(r"struct (\w+(?:_layer|_t))\b(?!\s*;)", line)
            if m:
                found.setdefault(m.group(1), f"{h.name}:{n}")
    return found


def main():
    layers_dir, suite = sys.argv[1], sys.argv[2]
    text = pathlib.Path(suite).read_text()
    listed = text[text.find("TEST_CASE_TEMPLATE"):]
    missing = 0
    types = layer_types(layers_dir)
    for name, where in types.items():
        if f"struct law_{name} " not in text or f"laws::law_{name}" not in listed:
            print(f"{where}: layer {name} has no case in the law suite: add `struct law_{name}` to {pathlib.Path(suite).name} "
                  f"and list laws::law_{name} in its TEST_CASE_TEMPLATE")
            missing += 1
    print(f"{len(types)} layer types, {missing} without a case")
    return 1 if missing or not types else 0


if __name__ == "__main__":
    sys.exit(main())
