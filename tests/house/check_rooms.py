#!/usr/bin/env python3
"""The house's one-way rule, checked: a header includes only headers of its own room or of rooms
below it (docs/architecture.md draws the order; ROOMS below is that order, written once).

  check_rooms.py INCLUDE_DIR...     exit 0 when every include points down or sideways within a room

Also checked: <mpi.h> is included only in dist/ (the trainer holds MPI-free `replicas`), and no
.hpp includes a .cuh (what g++ compiles never needs nvcc) outside an `#if` on `__CUDACC__` (what
only nvcc sees, as nitro/main.hpp's CUDA backend); a text fragment (.inc: one text a header
includes several times, as tensor/cpu/gemm.hpp does per instruction set) is included only from its
own folder, and its own includes obey the rule.  Prints every violation with its file and line, and
the fix.
"""
import pathlib
import re
import sys

# Lowest first. A room may include its own headers and those of any room before it.
ROOMS = ["core", "bind", "tensor", "kernels", "nn", "optim", "data", "record", "dist", "train", "knobs", "cli"]
# Headers at include/nitro/ itself (nitro.hpp, main.hpp, dist.hpp, cuda.cuh) gather rooms: above every room.
TOP = len(ROOMS)
# kernels/ is kernels/include/nitro/kernels: the CUDA kernels and the CUDA backend that launches them,
# above tensor/ (whose cuda/ runtime, tile and pointwise helpers they use) and below every room that
# trains with them.

# Folders only their own room may include: the CPU backend is reached through the step context's
# device_ops (tensor/backend.hpp), never named by a layer, an op or the trainer.
PRIVATE = {"tensor/cpu/": "tensor"}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
RAW_OPEN = re.compile(r'R"([^(\s]*)\(')  # a raw string literal's lines are text, not directives


def rank(room):
    return ROOMS.index(room) if room is not None else TOP


def room_of(rel):  # "record/loggers/csv.hpp" -> "record"; "nitro.hpp" -> None (top)
    parts = rel.split("/")
    return parts[0] if len(parts) > 1 else None


def main(dirs):
    headers = {}
    for d in dirs:
        root = pathlib.Path(d) / "nitro"
        for p in sorted(root.rglob("*")):
            if p.suffix in (".hpp", ".cuh", ".inc") and p.is_file():
                headers[p.relative_to(root).as_posix()] = p
    bad = []
    for rel, path in headers.items():
        room = room_of(rel)
        if room is not None and room not in ROOMS:
            bad.append(f"{path}: room '{room}' is not in the order. Fix: add it to ROOMS in {__file__} and to docs/architecture.md")
            continue
        raw_end = None
        conditions = []  # the open #if blocks: True where only nvcc compiles the lines (#if ... __CUDACC__)
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            directive = line.strip()
            if directive.startswith("#if"):
                conditions.append("__CUDACC__" in directive and "!" not in directive and "ifndef" not in directive)
            elif directive.startswith(("#else", "#elif")) and conditions:
                conditions[-1] = False
            elif directive.startswith("#endif") and conditions:
                conditions.pop()
            if raw_end is not None:
                if raw_end in line:
                    raw_end = None
                continue
            o = RAW_OPEN.search(line)
            if o and (")" + o.group(1) + '"') not in line[o.end():]:
                raw_end = ")" + o.group(1) + '"'
            m = INCLUDE.match(line)
            if not m:
                continue
            inc = m.group(1)
            if inc == "mpi.h" and room != "dist":
                bad.append(f"{path}:{n}: <mpi.h> outside dist/. Fix: reach MPI through nitro::dist::replicas (MPI-free)")
            if not inc.startswith("nitro/"):
                continue
            target = inc[len("nitro/"):]
            if target not in headers:
                bad.append(f"{path}:{n}: includes {inc}, which is not a header of nitro. Fix: the path")
                continue
            if target.endswith(".inc") and pathlib.PurePosixPath(target).parent != pathlib.PurePosixPath(rel).parent:
                bad.append(f"{path}:{n}: includes the fragment {inc} of another folder. Fix: a fragment belongs to the headers beside it")
            if path.suffix == ".hpp" and target.endswith(".cuh") and not any(conditions):
                bad.append(f"{path}:{n}: a .hpp includes {inc}. Fix: only nvcc's translation units (.cu/.cuh) include .cuh")
            for folder, owner in PRIVATE.items():
                if target.startswith(folder) and room != owner:
                    bad.append(f"{path}:{n}: {room}/ includes {inc}, which only {owner}/ may include. "
                               f"Fix: reach the backend through nitro::detail::active_ops() (tensor/backend.hpp)")
            to = room_of(target)
            if to is None and room is not None:
                bad.append(f"{path}:{n}: room {room}/ includes the gathering header {inc}. Fix: include the headers it needs")
            elif room is not None and rank(to) > rank(room):
                bad.append(f"{path}:{n}: {room}/ includes {inc}, a room above it ({' < '.join(ROOMS)}). "
                           f"Fix: move what {room}/ needs down, or the including code up")
    for b in bad:
        print(b)
    print(f"{len(headers)} headers checked against {' < '.join(ROOMS)}: {len(bad)} upward or forbidden includes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["include", "kernels/include"]))
