#!/usr/bin/env bash
# Installs, from Debian's packages, what nitro needs and the machine lacks. Idempotent and
# non-interactive: packages already present are left alone, and nothing is asked.
#   scripts/install-deps.sh          build, test and run dependencies
#   scripts/install-deps.sh bench    also what bench/ compares against (PyTorch with OpenBLAS)
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config
  libboost-dev          # Boost.Hana
  libeigen3-dev         # the CPU backend
  doctest-dev           # unit tests
  nlohmann-json3-dev    # manifests, safetensors headers
  zlib1g-dev            # gzip'd IDX files
  dataset-fashion-mnist # the embedded default data set
  fortunes              # the default text corpus (tiny_lm): Debian's fortune files, plain English
  clang libclang-rt-14-dev  # the clang build, sanitizers, libFuzzer
  python3 python3-numpy     # independent readers of nitro's files in tests
  chromium                  # a real browser renders `report`'s pages in tests (e2e.report_browser)
  libopenmpi-dev openmpi-bin  # nitro/dist: data parallel over MPI (optional to build; tested when present)
)
if [[ "${1:-}" == "bench" ]]; then
  packages+=(python3-torch libopenblas0-pthread time)
  # bench/gemm_libraries dlopens these: oneDNN, BLIS (runtime only: libblis-dev would repoint the
  # libblas.so link), libxsmm (Debian ships only its static archives; bench/CMakeLists.txt links them into a .so)
  packages+=(libdnnl2 libblis4 libxsmm-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "nitro: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
