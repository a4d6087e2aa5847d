// bench/best_gflops.hpp — the timing both product benchmarks use (gemm_peak, gemm_libraries).
//
//   double g = bench::best_gflops([&] { product(); }, 2.0 * m * n * k, 0.05);
//
// One warm call (buffers sized, pages touched, workers awake), then the best of 5 rounds, each at
// least `round` seconds long: the best, because on a shared machine every disturbance only slows.
#pragma once

#include <algorithm>  // max
#include <chrono>     // steady_clock

namespace bench {

template <class F>
double best_gflops(F&& f, double flops, double round) {
  f();
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    int reps = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double s = 0;
    do {
      f();
      ++reps;
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (s < round);
    best = std::max(best, flops * reps / s / 1e9);
  }
  return best;
}

}  // namespace bench
