#!/usr/bin/env bash
# bench/run.sh — the whole comparison in one command: nitro against PyTorch on Fashion-MNIST, the
# machine's fp32 GEMM peak, compile costs; prints the table (bench/README.md explains it).
#
#   bench/run.sh                     everything: 3 repeats, every core, MLP (3 epochs), wide MLP and
#                                    CNN (1 epoch each), compile costs  (~15-25 min on 2 cores)
#   bench/run.sh --quick             a smoke run: 1 repeat, 1 epoch on 6400 images, no compile costs
#   bench/run.sh --threads 1 --repeats 5 --models mlp --epochs mlp=5 --no-compile --json out.json
#   bench/run.sh --isa avx2          both frameworks as on a CPU without AVX-512 (compare.py says how)
#
# Builds bench/'s targets in $NITRO_BENCH_BUILD (default: build-bench-run) first. Needs PyTorch
# with OpenBLAS: scripts/install-deps.sh bench installs them (python3-torch, libopenblas0-pthread).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NITRO_BENCH_BUILD:-$root/build-bench-run}
args=()
quick=0
for a in "$@"; do
  if [[ $a == --quick ]]; then quick=1; else args+=("$a"); fi
done
if ((quick)); then
  args=(--repeats 1 --train-limit 6400 --epochs mlp=1,wide=1,cnn=1 --no-compile --gemm-seconds 0.5 "${args[@]}")
fi
if ! /usr/bin/python3 -c "import torch" 2> /dev/null; then
  echo "bench/run.sh: PyTorch is not importable by /usr/bin/python3; run scripts/install-deps.sh bench" >&2
  exit 2
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNITRO_CUDA=OFF -DNITRO_BUILD_TESTS=OFF \
  -DNITRO_BUILD_EXAMPLES=OFF -DNITRO_BUILD_BENCH=ON > /dev/null
cmake --build "$build" --target train_nitro gemm_peak -j "$(nproc)" > /dev/null
exec /usr/bin/python3 "$root/bench/compare.py" --build "$build" "${args[@]}"
