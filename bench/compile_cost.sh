#!/usr/bin/env bash
# bench/compile_cost.sh — what a nitro trainer costs to compile: time and peak memory.
#
#   bench/compile_cost.sh [CXX]        (default: c++ — the compiler CMake would pick)
#
# Compiles, with the flags of a Release build of nitro's own targets (-O3 -march=native
# -std=gnu++20), each examples/*.cpp and generated experiments of 3, 10 and 30 fields
# (bench/gen_experiment.py; with the command line of nitro::main when nitro/cli/main.hpp exists),
# one translation unit at a time, and prints one JSON line each: wall seconds, CPU seconds (user +
# system: on a busy machine the wall time stretches, the CPU time much less) and the compiler's
# peak resident memory. The 30-field experiment is then linked and trained for one epoch on 512
# images, to show it is a working trainer and not just a type that compiles.
set -euo pipefail
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
flags=(-O3 -DNDEBUG -march=native -std=gnu++20 -I"$root/include" -I/usr/include/eigen3 -DBOOST_ALL_NO_LIB)

measure() {  # name source
  local name=$1 src=$2
  if ! "$time_bin" -o "$work/time" -f "%e %U %S %M" "$cxx" "${flags[@]}" -c "$src" -o "$work/out.o" 2> "$work/err"; then
    echo "{\"what\": \"compile\", \"name\": \"$name\", \"error\": \"does not compile (first line: $(head -1 "$work/err" | tr -d '"\\' | cut -c1-160))\"}"
    return 0
  fi
  read -r wall user sys kb < <(tail -1 "$work/time")
  python3 -c "import json,sys; print(json.dumps({'what': 'compile', 'name': sys.argv[1], 'wall_s': float(sys.argv[2]), 'cpu_s': round(float(sys.argv[3]) + float(sys.argv[4]), 2), 'peak_mb': round(int(sys.argv[5]) / 1024)}))" \
    "$name" "$wall" "$user" "$sys" "$kb"
}

for src in "$root"/examples/*.cpp; do
  measure "examples/$(basename "$src")" "$src"
done
cli=()
[[ -f $root/include/nitro/cli/main.hpp ]] && cli=(--cli)
for n in 3 10 30; do
  python3 "$here/gen_experiment.py" "$n" "$work/gen$n.cpp" "${cli[@]}"
  measure "generated: $n fields${cli:+ (nitro::main)}" "$work/gen$n.cpp"
done
# the 30-field experiment trains (handle version: it needs no command line)
python3 "$here/gen_experiment.py" 30 "$work/run30.cpp"
"$cxx" "${flags[@]}" "$work/run30.cpp" -o "$work/run30" -lz -pthread 2> "$work/err" || { echo "{\"what\": \"run30\", \"error\": \"does not build\"}"; exit 0; }
out=$(NITRO_NUM_THREADS=1 "$work/run30" 2>&1 | tail -1)
python3 -c "import json,sys; print(json.dumps({'what': 'run30', 'output': sys.argv[1]}))" "$out"
