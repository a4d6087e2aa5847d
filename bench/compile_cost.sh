#!/usr/bin/env bash
# bench/compile_cost.sh — what a nitro trainer costs to compile: time and peak memory.
#
#   bench/compile_cost.sh [--breakdown] [CXX]      (default: c++ — the compiler CMake would pick)
#
# Compiles, with the flags of a Release build of nitro's own targets (-O3 -march=x86-64-v3
# -std=gnu++20), the README's trainer (its first cpp block, as ctest readme.trainer cuts it), each
# examples/*.cpp (these header-only, again linked to nitro::runtime: -DNITRO_RUNTIME_LIB, with
# src/runtime.cpp measured once, and again reusing <nitro/main.hpp> precompiled once, as
# nitro_precompile does: the precompiling measured once) and generated experiments of 3, 10 and 30 fields
# (bench/gen_experiment.py; with the command line of nitro::main when nitro/cli/main.hpp exists),
# one translation unit at a time, and prints one JSON line each: wall seconds, CPU seconds (user +
# system: on a busy machine the wall time stretches, the CPU time much less) and the compiler's
# peak resident memory. The 30-field experiment is then linked and trained for one epoch on 512
# images, to show it is a working trainer and not just a type that compiles.
#
# --breakdown compiles each translation unit once more with clang++ -ftime-trace and prints, after
# its cost, where the time went (bench/time_trace.py): parsing by room, instantiation by template
# family, LLVM's optimisation and the object's code split into what depends on the experiment and
# what does not. g++ 12's -ftime-report stops with an internal compiler error (timevar.cc:453) on
# nitro's trainers, so the breakdown is clang's.
set -euo pipefail
breakdown=0
if [[ ${1:-} == --breakdown ]]; then
  breakdown=1
  shift
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cxx=${1:-${CXX:-c++}}
time_bin=/usr/bin/time
if [[ ! -x $time_bin ]]; then
  echo "compile_cost.sh: /usr/bin/time is missing (scripts/install-deps.sh bench installs it)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-O3 -DNDEBUG -march=x86-64-v3 -std=gnu++20 -I"$root/include" -I/usr/include/eigen3 -DBOOST_ALL_NO_LIB)

report_time() {  # name: one JSON line from /usr/bin/time's last line in $work/time
  local wall user sys kb
  read -r wall user sys kb < <(tail -1 "$work/time")
  python3 -c "import json,sys; print(json.dumps({'what': 'compile', 'name': sys.argv[1], 'wall_s': float(sys.argv[2]), 'cpu_s': round(float(sys.argv[3]) + float(sys.argv[4]), 2), 'peak_mb': round(int(sys.argv[5]) / 1024)}))" \
    "$1" "$wall" "$user" "$sys" "$kb"
}

measure() {  # name source experiment-regex [extra flags...]
  local name=$1 src=$2 exp=$3
  shift 3
  local extra=("$@")
  if ! "$time_bin" -o "$work/time" -f "%e %U %S %M" "$cxx" "${flags[@]}" "${extra[@]}" -c "$src" -o "$work/out.o" 2> "$work/err"; then
    echo "{\"what\": \"compile\", \"name\": \"$name\", \"error\": \"does not compile (first line: $(head -1 "$work/err" | tr -d '"\\' | cut -c1-160))\"}"
    return 0
  fi
  report_time "$name"
  if ((breakdown)) && [[ " ${extra[*]} " != *" -include"* ]]; then  # (not for the precompiled header: g++'s own format)
    if ! clang++ "${flags[@]}" "${extra[@]}" -ftime-trace -ftime-trace-granularity=100 -c "$src" -o "$work/trace.o" 2> "$work/err"; then
      echo "{\"what\": \"compile breakdown\", \"name\": \"$name\", \"error\": \"clang++ does not compile it\"}"
      return 0
    fi
    python3 "$here/time_trace.py" "$work/trace.json" "$work/trace.o" --experiment "$exp" --name "$name"
  fi
}

if ((breakdown)) && ! command -v clang++ > /dev/null; then
  echo "compile_cost.sh: --breakdown needs clang++ (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
# The README's trainer: its first cpp block after "## A trainer in code" (tests/readme/CMakeLists.txt).
python3 - "$root/README.md" "$work/readme_trainer.cpp" << 'EOF'
import sys
text = open(sys.argv[1]).read()
block = text[text.index("## A trainer in code"):]
block = block[block.index("```cpp\n") + len("```cpp\n"):]
open(sys.argv[2], "w").write(block[:block.index("\n```")] + "\n")
EOF
measure "README trainer" "$work/readme_trainer.cpp" 'FashionMLP'
# the same, linked to nitro::runtime (the products compiled once, in src/runtime.cpp), and that part
measure "README trainer, with nitro::runtime" "$work/readme_trainer.cpp" 'FashionMLP' -DNITRO_RUNTIME_LIB
measure "src/runtime.cpp (nitro::runtime, once per build)" "$root/src/runtime.cpp" 'FashionMLP' -DNITRO_RUNTIME_LIB
# nitro_precompile: <nitro/main.hpp> precompiled once (with the runtime's define), then reused
mkdir -p "$work/pch"
echo '#include <nitro/main.hpp>' > "$work/pch/nitro_pch.hpp"
if "$cxx" --version | grep -q clang; then
  pch_out="$work/pch/nitro_pch.hpp.pch"; pch_use=(-include-pch "$pch_out")
else
  pch_out="$work/pch/nitro_pch.hpp.gch"; pch_use=(-include "$work/pch/nitro_pch.hpp" -Winvalid-pch -Werror=invalid-pch)  # an unusable one fails
fi
if "$time_bin" -o "$work/time" -f "%e %U %S %M" "$cxx" "${flags[@]}" -DNITRO_RUNTIME_LIB -x c++-header "$work/pch/nitro_pch.hpp" -o "$pch_out" 2> "$work/err"; then
  report_time "nitro_precompile: <nitro/main.hpp> (once per build)"
  measure "README trainer, with nitro::runtime and nitro_precompile" "$work/readme_trainer.cpp" 'FashionMLP' -DNITRO_RUNTIME_LIB "${pch_use[@]}"
else
  echo "{\"what\": \"compile\", \"name\": \"nitro_precompile\", \"error\": \"$(head -1 "$work/err" | tr -d '"\\' | cut -c1-160)\"}"
  pch_use=()
fi
for src in "$root"/examples/*.cpp; do
  exp=$(sed -n 's/^NITRO_EXPERIMENT(\([A-Za-z_0-9]*\),.*/\1/p' "$src" | head -1)
  measure "examples/$(basename "$src")" "$src" "${exp:-Fashion}"
  measure "examples/$(basename "$src"), with nitro::runtime" "$src" "${exp:-Fashion}" -DNITRO_RUNTIME_LIB
  ((${#pch_use[@]})) && measure "examples/$(basename "$src"), with nitro::runtime and nitro_precompile" "$src" "${exp:-Fashion}" -DNITRO_RUNTIME_LIB "${pch_use[@]}"
done
cli=()
[[ -f $root/include/nitro/cli/main.hpp ]] && cli=(--cli)
for n in 3 10 30; do
  python3 "$here/gen_experiment.py" "$n" "$work/gen$n.cpp" "${cli[@]}"
  measure "generated: $n fields${cli:+ (nitro::main)}" "$work/gen$n.cpp" 'Experiment[0-9]'
done
# the 30-field experiment trains (handle version: it needs no command line)
python3 "$here/gen_experiment.py" 30 "$work/run30.cpp"
"$cxx" "${flags[@]}" "$work/run30.cpp" -o "$work/run30" -lz -pthread 2> "$work/err" || { echo "{\"what\": \"run30\", \"error\": \"does not build\"}"; exit 0; }
out=$(NITRO_NUM_THREADS=1 "$work/run30" 2>&1 | tail -1)
python3 -c "import json,sys; print(json.dumps({'what': 'run30', 'output': sys.argv[1]}))" "$out"
