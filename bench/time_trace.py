#!/usr/bin/env python3
"""bench/time_trace.py: where one translation unit's compile time goes.

    bench/time_trace.py TRACE.json OBJECT.o --experiment REGEX [--name NAME] [--top N]

TRACE.json is what clang++ -ftime-trace writes next to OBJECT.o. REGEX matches the experiment's
type names, for example 'FashionMLP' or '\\bgen\\b'. A symbol or function whose name matches it,
or that is specialised for the experiment's shapes (a layer, a parameter tree, a name as a template
argument: --specialised), was compiled for this experiment. Every other one (the command line, JSON records,
safetensors, loggers, GEMM) does not depend on the experiment, and a compiled runtime part could
build it once. The script prints one JSON line:
  frontend_s / backend_s  clang's own totals (parsing and instantiation / LLVM optimisation and
                          code generation).
  parse_s_by_room         the time spent reading each header (its own text, not the headers it
                          includes, nor the instantiations that happen while it is read), summed
                          by room: nitro/<room>, eigen, nlohmann, hana, std, ...
  instantiate_s_by_family the self time of instantiating templates, summed by template name (the
                          arguments dropped), the largest first.
  optimize_s              the self time of LLVM's per-function passes, split into the experiment's
                          own functions and the rest. Events under the trace granularity are
                          dropped, so this total is smaller than clang's.
  text_bytes              the object's code (nm), split the same way, with the largest families
                          that do not depend on the experiment.
Self times mean that nested events (a header included from a header, a template instantiated
while instantiating another) are counted once, in the innermost event.
"""
import argparse
import collections
import json
import re
import subprocess
import sys


def family(name):
    """A template's name without its arguments: 'nitro::cli::program::run' from its full text."""
    s = name
    for _ in range(16):
        t = re.sub(r"<[^<>]*>", "", s)
        if t == s:
            break
        s = t
    s = s.split("(")[0].replace("[abi:cxx11]", "").strip()
    s = s.split(" ")[-1] if " " in s else s
    parts = [p for p in s.split("::") if p]
    keep = 3 if parts and parts[0] == "nitro" else 2
    return "::".join(parts[:keep]) or name[:60]


def room(path):
    p = path.replace("\\", "/")
    m = re.search(r"/include/nitro/([a-z_]+)/", p)
    if m:
        return "nitro/" + m.group(1)
    if "/include/nitro/" in p:
        return "nitro"
    for key, label in (("eigen3", "eigen"), ("nlohmann", "nlohmann"), ("boost/hana", "hana"), ("boost/", "boost"),
                       ("openmpi", "mpi"), ("zlib", "zlib"), ("/c++/", "std"), ("/usr/include/", "libc")):
        if key in p:
            return label
    return "the translation unit"


def self_times(events):
    """(event, self seconds, innermost enclosing Source event's file) for complete events, with
    each child's time taken from its parent."""
    out = []
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and not e["name"].startswith("Total "):
            by_thread[e.get("tid", 0)].append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [event, child time, enclosing source file]

        def pop():
            done, child, source = stack.pop()
            out.append((done, (done["dur"] - child) / 1e6, source))

        for e in evs:
            while stack and e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]:
                pop()
            source = stack[-1][2] if stack else None
            if e["name"] == "Source":
                source = e.get("args", {}).get("detail", "")
            if stack:
                stack[-1][1] += e["dur"]
            stack.append([e, 0, source])
        while stack:
            pop()
    return out


_demangled = {}


def demangle(names):
    todo = [n for n in names if n not in _demangled]
    if todo:
        out = subprocess.run(["c++filt"], input="\n".join(todo), capture_output=True, text=True).stdout.split("\n")
        _demangled.update(zip(todo, out))
    return [_demangled.get(n, n) for n in names]


def rounded(counter, top):
    return {k: round(v, 2) for k, v in counter.most_common(top) if v >= 0.005}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("object")
    ap.add_argument("--experiment", required=True, help="regex matching the experiment's type names")
    ap.add_argument("--specialised", default=r"nitro::(nn::\w+_layer|tree|entry|fixed_string|str|knob_name)<",
                    help="regex for demangled names specialised for the experiment's shapes")
    ap.add_argument("--name", default=None)
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    named = re.compile(a.experiment)
    shaped = re.compile(a.specialised)
    with open(a.trace) as f:
        events = json.load(f)["traceEvents"]
    totals = {e["name"][6:]: e["dur"] / 1e6 for e in events if e.get("ph") == "X" and e["name"].startswith("Total ")}

    parse, inst, opt = collections.Counter(), collections.Counter(), collections.Counter()
    timed = self_times(events)
    demangle([e.get("args", {}).get("detail", "") for e, _, _ in timed if e["name"] == "OptFunction"])  # one c++filt for all
    for e, s, source in timed:
        detail = e.get("args", {}).get("detail", "")
        if e["name"] in ("InstantiateFunction", "InstantiateClass"):
            inst[family(detail)] += s
        elif e["name"] == "OptFunction":
            opt["experiment" if named.search(detail) or shaped.search(demangle([detail])[0]) else "independent"] += s
        elif source is not None:  # parsing: the header being read, whatever clang was doing in it
            parse[room(source)] += s

    nm = subprocess.run(["nm", "-S", "-t", "d", a.object], capture_output=True, text=True, check=True).stdout
    sized = []
    for line in nm.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tTwW":
            sized.append((int(f[1]), f[3]))
    demangled = demangle([n for _, n in sized])
    text, indep = collections.Counter(), collections.Counter()
    for (size, mangled), name in zip(sized, demangled):
        if named.search(mangled) or named.search(name) or shaped.search(name):
            text["experiment"] += size
        else:
            text["independent"] += size
            indep[family(name)] += size

    print(json.dumps({
        "what": "compile breakdown",
        "name": a.name or a.object,
        "frontend_s": round(totals.get("Frontend", 0), 2),
        "backend_s": round(totals.get("Backend", 0), 2),
        "parse_s": round(sum(parse.values()), 2),
        "parse_s_by_room": rounded(parse, a.top),
        "instantiate_s": round(sum(inst.values()), 2),
        "instantiate_s_by_family": rounded(inst, a.top),
        "optimize_s": rounded(opt, 2),
        "text_bytes": dict(text),
        "independent_text_share": round(text["independent"] / max(1, sum(text.values())), 2),
        "independent_text_top": dict(indep.most_common(a.top)),
    }))


if __name__ == "__main__":
    sys.exit(main())
