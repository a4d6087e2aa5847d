#!/usr/bin/env python3
"""Docs that the code and the README point to exist, and the README's counts are the tree's.

usage: check_docs.py DOCS_PARENT README COMPILE_FAIL_DIR SRC_DIR...

- every `docs/<name>.md` named in a source under SRC_DIR (headers, kernels, examples) or in README
  exists under DOCS_PARENT (an error's fix that points to a missing page is a broken promise);
- README's "(N compile-fail tests" is the number of COMPILE_FAIL_DIR/*.cpp.
Prints one line per mismatch; exits 1 if any.
"""
import pathlib
import re
import sys


def main():
    parent, readme, cf_dir, *srcs = sys.argv[1:]
    bad = 0
    files = [pathlib.Path(readme)]
    for s in srcs:
        files += [p for p in pathlib.Path(s).rglob("*") if p.suffix in (".hpp", ".cuh", ".cpp", ".cu")]
    seen = 0
    for f in files:
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            for ref in re.findall(r"docs/[A-Za-z0-9_-]+\.md", line):
                seen += 1
                if not (pathlib.Path(parent) / ref).exists():
                    print(f"{f}:{n}: points to {ref}, which does not exist")
                    bad += 1
    text = pathlib.Path(readme).read_text()
    m = re.search(r"\((\d+) compile-fail tests", text)
    count = len(list(pathlib.Path(cf_dir).glob("*.cpp")))
    if not m:
        print(f"{readme}: says nothing of the form '(N compile-fail tests'")
        bad += 1
    elif int(m.group(1)) != count:
        print(f"{readme}: says {m.group(1)} compile-fail tests, {cf_dir} holds {count}")
        bad += 1
    print(f"{seen} references to docs/ checked, {count} compile-fail tests: {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
