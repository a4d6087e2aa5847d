#!/usr/bin/env bash
# The two commands of the README.
#   ./nitro.sh train   install what is missing, build, train fashion_mlp on Fashion-MNIST (fashion_mlp run [ARGS])
#   ./nitro.sh test    install what is missing, build everything with g++ and run every test; the unit tests again
#                      under ASan+UBSan; clang++ (ASan+UBSan): markers, binding and the libFuzzer runs
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
    # The sanitizers over every unit test, with g++ (the precompiled header keeps this build short).
    echo "== g++ ASan + UBSan build: unit tests"
    configure build-asan -DNITRO_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNITRO_BUILD_BENCH=OFF -DNITRO_BUILD_EXAMPLES=OFF \
      -DNITRO_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DNITRO_TEST_COMPILE_FAIL=OFF
    cmake --build build-asan -j "$jobs"
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$jobs" -L unit)
    # The second compiler: the markers and the binding (test_core, test_bind) and the libFuzzer runs of
    # the checkpoint reader and the command line (which instantiate the handle and nitro::main), under
    # clang's ASan + UBSan. (Every unit test under clang costs a quarter of an hour more on 2 cores.)
    echo "== clang++ ASan + UBSan: markers, binding, fuzzers"
    configure build-clang -DCMAKE_CXX_COMPILER=clang++ -DNITRO_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNITRO_BUILD_BENCH=OFF \
      -DNITRO_BUILD_EXAMPLES=OFF -DNITRO_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DNITRO_TEST_COMPILE_FAIL=OFF
    cmake --build build-clang -j "$jobs" --target test_core test_bind fuzz_safetensors fuzz_replay_safetensors fuzz_cli
    (cd build-clang && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$jobs" \
      -R '^(unit\.test_core|unit\.test_bind|fuzz\.)')
    echo "== all tests passed"
    ;;
  *)
    sed -n '2,4p' "$0"
    exit 2
    ;;
esac
