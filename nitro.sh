#!/usr/bin/env bash
# The two commands of the README.
#   ./nitro.sh train   install what is missing, build, train fashion_mlp on Fashion-MNIST (fashion_mlp run [ARGS])
#   ./nitro.sh test    install what is missing, build everything with g++ and run every test, then the unit tests
#                      and fuzzers with clang++ under ASan+UBSan
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
      run|sweep|variants|check|explain|diff|watch|ir|bundle|eval|new|--help|-h) exec ./build/examples/fashion_mlp "$@" ;;
      *) exec ./build/examples/fashion_mlp run "$@" ;;
    esac
    ;;
  test)
    scripts/install-deps.sh
    echo "== g++ build: every test"
    configure build
    cmake --build build -j "$jobs"
    (cd build && ctest --output-on-failure -j "$jobs")
    # One clang++ build carries the second compiler and the sanitizers (CI time: one build, not two):
    # every unit test under ASan + UBSan, and the fuzzers.
    echo "== clang++ ASan + UBSan build: unit tests and fuzzers"
    configure build-clang -DCMAKE_CXX_COMPILER=clang++ -DNITRO_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DNITRO_BUILD_BENCH=OFF -DNITRO_BUILD_EXAMPLES=OFF -DNITRO_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DNITRO_TEST_COMPILE_FAIL=OFF
    cmake --build build-clang -j "$jobs"
    (cd build-clang && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$jobs" -L 'unit|fuzz')
    echo "== all tests passed"
    ;;
  *)
    sed -n '2,4p' "$0"
    exit 2
    ;;
esac
