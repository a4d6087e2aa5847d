#!/usr/bin/env bash
# bench/mpi_scaling.sh — samples/s of examples/fashion_mlp trained by 1 process and by 2 MPI ranks on
# this machine (issue 10). The same run each time: the default program (width 256, AdamW + OneCycle),
# global batch 64, STEPS (2000) optimizer steps on the full training split, no valid split; samples/s is the
# console's figure at the last step (training since the run began: no loading, no evaluation).
#
#   bench/mpi_scaling.sh                 1 rank x 1 thread, 1 rank x 2 threads, 2 ranks x 1 thread
#   STEPS=4000 REPEATS=5 bench/mpi_scaling.sh
#   NITRO_BENCH_BUILD=build-mpi bench/mpi_scaling.sh    reuse a configured build (not reconfigured)
#
# Builds fashion_mlp in $NITRO_BENCH_BUILD (default: build-mpi-bench; configured when new) with MPI
# (libopenmpi-dev); the 2-rank line needs fashion_mlp built with MPI.
# Prints one line per configuration: the median of REPEATS runs, and every run's figure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NITRO_BENCH_BUILD:-$root/build-mpi-bench}
steps=${STEPS:-2000}
repeats=${REPEATS:-3}
if [[ ! -f $build/CMakeCache.txt ]]; then  # an existing build (NITRO_BENCH_BUILD=build-mpi) is used as it is
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNITRO_CUDA=OFF -DNITRO_BUILD_TESTS=OFF \
    -DNITRO_BUILD_EXAMPLES=ON -DNITRO_BUILD_BENCH=OFF > /dev/null
fi
cmake --build "$build" --target fashion_mlp -j "$(nproc)" > /dev/null
exe=$build/examples/fashion_mlp
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# samples/s of one run: the last "N samples/s" the console printed
measure() {  # ranks threads
  local out
  if (($1 == 1)); then
    out=$(NITRO_NUM_THREADS=$2 "$exe" run --steps "$steps" --run-dir "$runs" 2>&1)
  else
    out=$(mpirun -np "$1" --oversubscribe --bind-to none -x NITRO_NUM_THREADS="$2" "$exe" run --steps "$steps" \
      --run-dir "$runs" 2>&1)
  fi
  grep -oE '[0-9]+ samples/s' <<< "$out" | tail -1 | cut -d' ' -f1 || echo failed
}

echo "fashion_mlp, width 256, global batch 64, $steps steps, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-22s %12s   %s\n' configuration "samples/s" "runs"
for cfg in "1 1" "1 2" "2 1"; do
  read -r ranks threads <<< "$cfg"
  all=()
  for ((i = 0; i < repeats; i++)); do all+=("$(measure "$ranks" "$threads")"); done
  median=$(printf '%s\n' "${all[@]}" | sort -n | sed -n "$(((repeats + 1) / 2))p")
  printf '%-22s %12s   %s\n' "$ranks rank(s) x $threads thread(s)" "$median" "${all[*]}"
done
