#!/usr/bin/env python3
"""One registry of error codes: docs/errors.md, checked against the code.

  check_errors.py ERRORS_MD SOURCE_DIR...

A code is *raised* where a string literal starts with it: `error("E-CKPT-017", ...)` at run time,
`static_assert(..., "E-BIND-001: ...")` at compile time. A code is *documented* by a table row of
docs/errors.md that starts with it (`| E-CKPT-017 | ...`) or with a range (`| E-SHAPE-001..011 |`).
Every raised code must be documented; every documented code must be raised somewhere, or its row
must begin its description with `reserved` (a code once used is never given a new meaning).

Every static_assert in the headers carries a code and a fix, so the first error a user reads is a
coded sentence: its message starts with the code, or it is `static_assert(checks_evaluated<...>)`
(which cannot fail: the checks it forces print coded diagnostics of their own), or its message
starts with `nitro invariant:` (nitro's own assumption, which no user's code can break), or it is the
`static_assert(true, "")` a macro ends with. Exit 1 with the list of what is missing on either side.
"""
import pathlib
import re
import sys

RAISED = re.compile(r'"(E-[A-Z]+-\d{3})\b')
ROW = re.compile(r'^\|\s*(E-[A-Z]+)-(\d{3})(?:\.\.(\d{3}))?\s*\|(.*)$')
SOURCES = (".hpp", ".cuh", ".cu", ".cpp", ".h")


def static_asserts(text):
    """(line, body) of every static_assert( ... ) outside comments, strings skipped while matching."""
    for m in re.finditer(r"\bstatic_assert\s*\(", text):
        start = text.rfind("\n", 0, m.start()) + 1
        if "//" in text[start:m.start()]:
            continue
        i, depth = m.end(), 1
        while depth and i < len(text):
            c = text[i]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif c == '"':
                i += 1
                while i < len(text) and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
            i += 1
        yield text.count("\n", 0, m.start()) + 1, text[m.end():i - 1]


def uncoded_static_asserts(path, text):
    for line, body in static_asserts(text):
        flat = " ".join(body.split())
        if flat.startswith("checks_evaluated<") or flat == 'true, ""':
            continue
        message = re.search(r',\s*"(.*)', flat)
        if message and (re.match(r"[EW]-[A-Z]+-\d{3}: .*Fix: ", message.group(1)) or message.group(1).startswith("nitro invariant:")):
            continue
        yield f"{path}:{line}: a static_assert without a code and a fix: {flat[:100]}. Fix: start its message with a code (E-ROOM-NNN: ... Fix: ...)"


def main(errors_md, dirs):
    raised, uncoded = {}, []
    for d in dirs:
        for p in sorted(pathlib.Path(d).rglob("*")):
            if p.suffix in SOURCES and p.is_file():
                text = p.read_text(encoding="utf-8", errors="replace")
                for n, line in enumerate(text.splitlines(), 1):
                    for code in RAISED.findall(line):
                        raised.setdefault(code, f"{p}:{n}")
                if p.suffix in (".hpp", ".cuh", ".h"):
                    uncoded.extend(uncoded_static_asserts(p, text))
    documented, reserved = {}, set()
    for n, line in enumerate(pathlib.Path(errors_md).read_text(encoding="utf-8").splitlines(), 1):
        m = ROW.match(line)
        if not m:
            continue
        family, lo, hi, rest = m.group(1), int(m.group(2)), int(m.group(3) or m.group(2)), m.group(4)
        for k in range(lo, hi + 1):
            code = f"{family}-{k:03d}"
            documented.setdefault(code, n)
            if re.match(r"\s*reserved\b", rest, re.I):  # the description cell says so
                reserved.add(code)
    bad = list(uncoded)
    for code, where in sorted(raised.items()):
        if code not in documented:
            bad.append(f"{where}: {code} is raised but not documented. Fix: add a row for it to {errors_md}")
    for code, n in sorted(documented.items()):
        if code not in raised and code not in reserved:
            bad.append(f"{errors_md}:{n}: {code} is documented but raised nowhere. Fix: raise it, remove the row, or mark it reserved")
    for b in bad:
        print(b)
    print(f"{len(raised)} codes raised, {len(documented)} documented ({len(reserved)} reserved): {len(bad)} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
