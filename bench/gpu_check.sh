#!/usr/bin/env bash
# bench/gpu_check.sh — the CUDA backend's device check, on one GPU, in about five minutes:
#   1. builds the CUDA targets (test_gpu, test_gpu_handle, fashion_mlp_cuda, bench_fused_mlp, and
#      the examples as nvcc builds them: fashion_mlp_nvcc, fashion_cnn_nvcc) for this GPU only;
#   2. runs the GPU tests: fused kernels, cuBLASLt, cuDNN, loss, optimizer, transfers, NCCL against
#      the CPU backend, each with its max relative error; then the handle on nitro::cuda_device{}
#      against the same runs on the CPU (AdamW and SAM, accum 1 and 2; fashion_cnn's layers on
#      Fashion-MNIST);
#   3. trains fashion_mlp for one epoch on the GPU (fused MLP, TF32) and the same run on the CPU
#      backend, and compares their test accuracy;
#   4. where Open MPI is installed: the same epoch under mpirun, one rank per GPU, through the NCCL
#      communicator bootstrapped over MPI;
#   5. the examples' own command line on the GPU: `fashion_mlp_nvcc run --set device=cuda` and the
#      same for fashion_cnn_nvcc (tests/e2e/device_check.py: the run finishes on the cuda backend);
#   6. the throughput table (bench/gpu_throughput.py): one epoch of each example through the handle
#      on the GPU and on the CPU, beside PyTorch on the same GPU, eager and torch.compile;
#   7. prints the throughput of the fused MLP against the cuBLASLt path, widths 32/64/128, batches
#      2^14 .. 2^20, as samples/s and as a fraction of the chip's peak.
#
# Usage
#   bench/gpu_check.sh --bundle    on a machine with nitro's dependencies (the dev machine): gathers
#                                  the headers the CUDA targets include (Eigen, Boost.Hana, nlohmann,
#                                  doctest, zlib), CMake package files for them and the Fashion-MNIST
#                                  files into build-gpu-bundle/ (git-ignored, about 35 MB)
#   bench/gpu_check.sh             on the GPU machine, from the repository root. Uses the system's
#                                  packages when it has them, else build-gpu-bundle/ (carry it:
#                                  run(command="bash bench/gpu_check.sh", carry=["build-gpu-bundle"]))
# NITRO_GPU_CHECK_USE_BUNDLE=1 uses the bundle even where the system has the packages (to try it).
# Everything it prints also goes to $OUT/gpu_check.log ($OUT: the device tool's output folder; else
# build-gpu-check/). Exit status: 0 when every step passed; the first failing step's otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUNDLE=$ROOT/build-gpu-bundle
BUILD=$ROOT/build-gpu-check

# ---- --bundle: gather what the GPU machine may lack ----------------------------------------------------
if [[ "${1:-}" == "--bundle" ]]; then
  NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/include" "$BUNDLE/cmake" "$BUNDLE/fashion-mnist"
  # every system header the CUDA targets include, as nvcc sees them
  deps=$(for src in tests/gpu/test_gpu.cu tests/gpu/test_gpu_handle.cu examples/fashion_mlp_cuda.cu kernels/bench/fused_mlp_throughput.cu \
                   examples/fashion_mlp.cpp examples/fashion_cnn.cpp; do
    "$NVCC" -std=c++20 -M -x cu -Iinclude -Ikernels/include -I/usr/include/eigen3 -DNITRO_HAVE_CUDNN=1 -DNITRO_HAVE_NCCL=1 "$src" 2>/dev/null
  done | tr ' \\' '\n\n' | grep -E '^/usr/include/(eigen3/|boost/|nlohmann/|doctest/|zlib\.h|zconf\.h)' | sort -u)
  [[ -n "$deps" ]] || { echo "gpu_check --bundle: nvcc -M found no dependency headers; is nvcc at $NVCC?"; exit 1; }
  # (nlohmann whole: the top-level CMakeLists requires the package even where these TUs need none of it)
  for f in $deps /usr/include/boost/version.hpp /usr/include/boost/config.hpp $(find /usr/include/nlohmann -type f); do
    rel=${f#/usr/include/}
    mkdir -p "$BUNDLE/include/$(dirname "$rel")" && cp "$f" "$BUNDLE/include/$rel"
  done
  ev=$(awk '/define EIGEN_WORLD_VERSION/{w=$3}/define EIGEN_MAJOR_VERSION/{a=$3}/define EIGEN_MINOR_VERSION/{b=$3}END{print w"."a"."b}' /usr/include/eigen3/Eigen/src/Core/util/Macros.h)
  config() {  # name target include-dir version
    cat >"$BUNDLE/cmake/$1Config.cmake" <<EOF
# written by bench/gpu_check.sh --bundle: the headers gathered from the dev machine
if(NOT TARGET $2)
  add_library($2 INTERFACE IMPORTED)
  set_target_properties($2 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "\${CMAKE_CURRENT_LIST_DIR}/../include$3")
endif()
set($1_INCLUDE_DIR "\${CMAKE_CURRENT_LIST_DIR}/../include$3")
EOF
    cat >"$BUNDLE/cmake/$1ConfigVersion.cmake" <<EOF
set(PACKAGE_VERSION "$4")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
EOF
  }
  config Eigen3 Eigen3::Eigen /eigen3 "$ev"
  echo 'set(EIGEN3_INCLUDE_DIR "${Eigen3_INCLUDE_DIR}")' >>"$BUNDLE/cmake/Eigen3Config.cmake"
  config nlohmann_json nlohmann_json::nlohmann_json "" 3.11.2
  config doctest doctest::doctest "" 2.4.9
  # the data set must be here to travel: a bundle without it would fail later, on the GPU machine's clock
  data_files=(/usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz)
  for f in "${data_files[@]}"; do
    [[ -f "$f" ]] || { echo "gpu_check --bundle: $f is missing; install it first: apt-get install dataset-fashion-mnist"; exit 1; }
  done
  cp "${data_files[@]}" "$BUNDLE/fashion-mnist/" || { echo "gpu_check --bundle: copying Fashion-MNIST into $BUNDLE failed"; exit 1; }
  echo "gpu_check --bundle: $(du -sh "$BUNDLE" | cut -f1) in $BUNDLE ($(echo "$deps" | wc -l) headers, Eigen $ev, Fashion-MNIST)"
  echo "carry it: run(command=\"bash bench/gpu_check.sh\", carry=[\"build-gpu-bundle\"])"
  exit 0
fi

# ---- the check ---------------------------------------------------------------------------------------
OUTDIR=${OUT:-$BUILD}
mkdir -p "$OUTDIR" "$BUILD"
LOG=$OUTDIR/gpu_check.log

run_check() {
START=$(date +%s)
say() { printf '\n==== %s  [%ds]\n' "$*" $(($(date +%s) - START)); }
status=0
fail() { echo "FAILED: $*"; [[ $status -ne 0 ]] || status=$1; }

say "machine"
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,compute_cap,memory.total,clocks.max.sm,driver_version --format=csv,noheader 2>&1 || echo "nvidia-smi: not available"
nvcc --version | tail -2
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
ARCH=${NITRO_CUDA_ARCH:-${cap:-90}}
JOBS=$(nproc)

# dependencies: the system's, else the bundle
args=()
missing=""
[[ -f /usr/include/eigen3/Eigen/Core ]] || missing+=" eigen3"
[[ -f /usr/include/boost/hana.hpp ]] || missing+=" boost-hana"
[[ -f /usr/include/nlohmann/json.hpp ]] || missing+=" nlohmann-json"
[[ -f /usr/include/doctest/doctest.h ]] || missing+=" doctest"
[[ -f /usr/include/zlib.h ]] || missing+=" zlib"
[[ "${NITRO_GPU_CHECK_USE_BUNDLE:-0}" == 1 ]] && missing+=" (bundle forced)"
if [[ -n "$missing" ]]; then
  if [[ ! -d "$BUNDLE/include" ]]; then
    echo "this machine lacks$missing and build-gpu-bundle/ is not here."
    echo "On the dev machine run: bench/gpu_check.sh --bundle, then carry build-gpu-bundle to this one."
    return 3
  fi
  libz=$(ldconfig -p 2>/dev/null | awk '/libz\.so\.1 /{print $NF; exit}')
  [[ -n "$libz" ]] || libz=$(ls /lib/x86_64-linux-gnu/libz.so.1 /usr/lib/x86_64-linux-gnu/libz.so.1 2>/dev/null | head -1)
  echo "dependencies from build-gpu-bundle (missing here:$missing); zlib: ${libz:-none found}"
  args+=(-DEigen3_DIR="$BUNDLE/cmake" -Dnlohmann_json_DIR="$BUNDLE/cmake" -Ddoctest_DIR="$BUNDLE/cmake"
         -DBOOST_INCLUDEDIR="$BUNDLE/include" -DBoost_NO_BOOST_CMAKE=ON -DBoost_NO_SYSTEM_PATHS=ON
         -DZLIB_INCLUDE_DIR="$BUNDLE/include" -DZLIB_LIBRARY="$libz")
fi
if [[ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz && -d "$BUNDLE/fashion-mnist" ]]; then
  export NITRO_FASHION_MNIST_DIR=$BUNDLE/fashion-mnist
fi

# cuDNN and NCCL: the toolkit's, else the Python wheels' (nvidia-cudnn-cu13, nvidia-nccl-cu13)
wheel_dir() { python3 -c "import importlib.util as u; s=u.find_spec('nvidia.$1'); print(list(s.submodule_search_locations)[0] if s else '')" 2>/dev/null; }
for lib in cudnn nccl; do
  if [[ ! -f /usr/local/cuda/include/$lib.h ]]; then
    d=$(wheel_dir $lib)
    if [[ -n "$d" && -d "$d" ]]; then
      up=$(echo $lib | tr a-z A-Z)
      args+=(-D${up}_ROOT="$d")
      export LD_LIBRARY_PATH=$d/lib:${LD_LIBRARY_PATH:-}
      echo "$lib from the Python wheel at $d"
    else
      echo "$lib: not found (test_gpu reports its cases as skipped)"
    fi
  fi
done

say "configure (sm_$ARCH, $JOBS jobs)"
gen=(-G Ninja)
command -v ninja >/dev/null || gen=(-G "Unix Makefiles")
cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DNITRO_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
  -DNITRO_BUILD_TESTS=OFF -DNITRO_BUILD_EXAMPLES=ON -DNITRO_BUILD_BENCH=OFF -DNITRO_CUDA_GPU_TESTS=ON "${args[@]}" >"$BUILD/configure.log" 2>&1 \
  || { tail -40 "$BUILD/configure.log"; fail 4 "configure"; return 4; }
grep -E "nitro:" "$BUILD/configure.log"

say "build"
t0=$(date +%s)
cmake --build "$BUILD" --target test_gpu test_gpu_handle fashion_mlp_cuda bench_fused_mlp fashion_mlp_nvcc fashion_cnn_nvcc -j "$JOBS" >"$BUILD/build.log" 2>&1 \
  || { grep -E "error|Error" -A3 "$BUILD/build.log" | head -60; fail 5 "build"; return 5; }
echo "built in $(($(date +%s) - t0)) s"

say "GPU tests: the CUDA backend against the CPU backend"
timeout 180 "$BUILD/tests/gpu/test_gpu" --duration=false || fail 6 "GPU tests"

say "the handle on the GPU: nitro::device = nitro::cuda_device{} against the same runs on the CPU"
timeout 120 "$BUILD/tests/gpu/test_gpu_handle" --duration=false || fail 11 "GPU handle tests"

say "fashion_mlp: one epoch on the GPU, and the same run on the CPU backend"
timeout 180 "$BUILD/kernels/fashion_mlp_cuda" --epochs 1 --cpu-reference || fail 7 "fashion_mlp_cuda"

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [[ ${ngpu:-0} -ge 2 ]]; then
  say "n_devs: fashion_mlp data parallel over $ngpu GPUs (NCCL)"
  timeout 180 "$BUILD/kernels/fashion_mlp_cuda" --epochs 1 --n-devs "$ngpu" --batch $((128 * ngpu)) || fail 9 "fashion_mlp_cuda --n-devs"
else
  echo "n_devs: the multi-GPU epoch is SKIPPED: one GPU here (test_gpu checked NCCL on one device)"
fi

if command -v mpirun >/dev/null && grep -q NITRO_WITH_MPI "$BUILD/build.ninja" "$BUILD"/kernels/CMakeFiles/fashion_mlp_cuda.dir/flags.make 2>/dev/null; then
  say "MPI: the NCCL communicator bootstrapped through MPI (one rank per GPU, n_devs = 1)"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 180 mpirun -np "${ngpu:-1}" --oversubscribe \
    "$BUILD/kernels/fashion_mlp_cuda" --epochs 1 --batch $((128 * ${ngpu:-1})) || fail 10 "mpirun fashion_mlp_cuda"
else
  echo "MPI: SKIPPED (no mpirun here, or the build found no MPI); the bootstrap's CPU half is CI's mpi.nccl"
fi

say "the examples' command line on the GPU: run --set device=cuda"
for ex in fashion_mlp fashion_cnn; do
  timeout 120 python3 "$ROOT/tests/e2e/device_check.py" "$BUILD/device_check_$ex" "$BUILD/kernels/${ex}_nvcc" || fail 12 "$ex run --set device=cuda"
done

say "throughput: the examples through the handle on the GPU and the CPU, beside PyTorch (eager, torch.compile)"
PY=python3  # the Python that imports torch (the PATH's first, else Debian's)
for p in python3 /usr/bin/python3; do
  if "$p" -c "import torch" 2>/dev/null; then PY=$p; break; fi
done
timeout 420 "$PY" "$ROOT/bench/gpu_throughput.py" "$BUILD" || fail 13 "gpu_throughput"

say "throughput: fused MLP against cuBLASLt"
timeout 240 "$BUILD/kernels/bench_fused_mlp" || fail 8 "bench_fused_mlp"

say "done: $([[ $status -eq 0 ]] && echo "every step passed" || echo "status $status")"
return $status
}

run_check 2>&1 | tee "$LOG"
exit "${PIPESTATUS[0]}"
