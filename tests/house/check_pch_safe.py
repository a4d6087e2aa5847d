#!/usr/bin/env python3
"""No lambda written inside decltype in nitro's headers.

clang 14 crashes reading such a lambda back from a precompiled header when it sits in a template
(llvm/llvm-project#53757: the closure's call operator is not loaded yet when the decltype is
profiled), and nitro_precompile offers <nitro/main.hpp> precompiled. Type computations use
declared-only functions called inside decltype instead (core/reflect.hpp: field_value_types, nth_of).

  check_pch_safe.py DIR...   prints file:line for each one and exits 1 when there is any
"""
import pathlib
import re
import sys

LAMBDA_IN_DECLTYPE = re.compile(r"decltype\(\s*(typename\s+)?\[")


def main(dirs):
    bad = []
    for d in dirs:
        for p in sorted(pathlib.Path(d).rglob("*")):
            if p.suffix not in (".hpp", ".cuh", ".h"):
                continue
            text = p.read_text()
            # comments cannot hold a lambda the compiler sees
            code = re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), text)
            for m in LAMBDA_IN_DECLTYPE.finditer(code):
                line = code.count("\n", 0, m.start()) + 1
                bad.append(f"{p}:{line}: a lambda inside decltype (clang 14 cannot read it back from a precompiled header, "
                           "llvm/llvm-project#53757); fix: a declared-only function called inside decltype")
    for b in bad:
        print(b)
    print(f"{len(bad)} lambdas inside decltype")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
