#!/usr/bin/env bash
# The two commands of the README.
#   ./nitro.sh train   install what is missing, build, train fashion_mlp on Fashion-MNIST (fashion_mlp run [ARGS])
#   ./nitro.sh test    install what is missing, build everything with g++ and run every test; then clang++ with
#                      ASan+UBSan: every test that runs code (unit, e2e, MPI, fuzz, README) again, and
#                      every header compiled on its own;
#                      then clang++ with TSan: the tests of the thread pool, the loader and the overlap
set -euo pipefail
cd "$(dirname "$0")"
jobs=$(nproc 2>/dev/null || echo 2)

configure() {  # configure <dir> [cmake args...]
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
}

case "${1:-}" in
  train)
    scripts/install-deps.sh
    configure build -DNITRO_BUILD_TESTS=OFF -DNITRO_BUILD_BENCH=OFF
    cmake --build build --target fashion_mlp -j "$jobs"
    shift
    # `./nitro.sh train [ARGS]` is `fashion_mlp run [ARGS]` (it ends by printing the test accuracy);
    # `./nitro.sh train COMMAND ...` runs another command of the trainer (variants, sweep, eval, ...)
    case "${1:-}" in
      run|sweep|variants|check|explain|diff|watch|ir|bundle|eval|report|new|--help|-h) exec ./build/examples/fashion_mlp "$@" ;;
      *) exec ./build/examples/fashion_mlp run "$@" ;;
    esac
    ;;
  test)
    scripts/install-deps.sh
    echo "== g++ build: every test"
    # bench/ is built by bench/run.sh (-march=native, its own folder), not here: CI time on 2 cores
    # the CUDA targets for sm_90 alone (H100/H200, the GPU machines this work is lent): one device
    # pass per .cu file instead of two, minutes of CI on 2 cores; -DCMAKE_CUDA_ARCHITECTURES="80;90"
    # (the default elsewhere) builds A100 code too
    configure build -DNITRO_BUILD_TESTS=ON -DNITRO_BUILD_EXAMPLES=ON -DNITRO_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90
    cmake --build build -j "$jobs"
    # every test but headers.*, which the clang++ stage runs (each header on its own, both modes:
    # clang++ parses them in 394 s on 2 cores where g++ takes 573)
    (cd build && ctest --output-on-failure -j "$jobs" -E '^headers\.')
    # The second compiler, with ASan + UBSan, over every test that runs code: the unit, e2e, MPI,
    # fuzz (libFuzzer), python-reader and README tests; and the headers' self-containment. Left
    # out: the other compile-only families (compile-fail, package, bench.time_trace) and the source
    # checks (house), which g++ ran above. -O1 -gline-tables-only and the test programs linked to
    # nitro::runtime keep the build near a quarter of an hour on 2 cores.
    echo "== clang++ ASan + UBSan: every unit, e2e, MPI, fuzz and README test; every header on its own"
    configure build-clang -DCMAKE_CXX_COMPILER=clang++ -DNITRO_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" -DNITRO_BUILD_BENCH=OFF -DNITRO_BUILD_EXAMPLES=ON \
      -DNITRO_CUDA=OFF -DNITRO_TEST_COMPILE_FAIL=OFF -DNITRO_TEST_HEADER_ONLY=OFF
    cmake --build build-clang -j "$jobs"
    (cd build-clang && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$jobs" \
      -E '^(package|bench|house)\.')
    # ThreadSanitizer over the rooms with threads of their own: the CPU backend's thread pool (and
    # the GEMM and convolution regions it runs), the background loader, the handle's training on both,
    # and the all-reduce overlap. setarch -R: TSan's fixed memory layout on kernels with more mmap
    # randomisation than clang 14 knows.
    echo "== clang++ TSan: thread pool, loader, backend regions, overlap"
    configure build-tsan -DCMAKE_CXX_COMPILER=clang++ -DNITRO_SANITIZE_THREAD=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNITRO_BUILD_BENCH=OFF \
      -DNITRO_BUILD_EXAMPLES=OFF -DNITRO_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DNITRO_TEST_COMPILE_FAIL=OFF
    cmake --build build-tsan -j "$jobs" --target test_cpu_backend test_io test_backend test_overlap test_train
    (cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" setarch "$(uname -m)" -R \
      ctest --output-on-failure -j "$jobs" -R '^unit\.test_(cpu_backend|io|backend|overlap|train)$')
    echo "== all tests passed"
    ;;
  *)
    sed -n '2,4p' "$0"
    exit 2
    ;;
esac
