// bench/gemm_peak.cpp — the machine's fp32 reference numbers for bench/run.sh.
//
//   gemm_peak [--size N] [--seconds S]
//
// Prints JSON lines, each measured with NITRO_NUM_THREADS threads (all of them busy at once):
//   handoff one parallel region in which every thread takes part (back to back, workers awake):
//           the price of splitting a product;
//   line    the time a cache line takes from one thread to another (half the round trip of an
//           atomic flag passed back and forth): what work pays that moves between cores
//           (bench/README.md, "Threads on cores that are far apart");
//   fma     the FMA ceiling: independent multiply-adds in registers, no memory — what no product
//           can beat — in the instruction set the products run with (NITRO_CPU_ISA caps it);
//   sgemm   a large square SGEMM (N x N x N, default 2048) through nitro::cpu::gemm and, when the
//           process can load it, through OpenBLAS's cblas_sgemm (dlopen'd: nothing to build
//           against; OPENBLAS_NUM_THREADS, OPENBLAS_CORETYPE apply as they are set);
//   shapes  every product of a training step of the MLP (784-256-256-10) and the wide MLP
//           (784-1024-1024-10) at batch 128 — forward W x, weight gradient g x^T, input gradient
//           W^T g — through both.
// Each number is the best of several timed runs of at least `seconds` / 10 each.
#include <nitro/tensor/cpu/gemm.hpp>
#include <nitro/tensor/cpu/thread_pool.hpp>

#include "best_gflops.hpp"

#include <dlfcn.h>  // dlopen: OpenBLAS when present

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>  // max
#include <atomic>     // fma threads
#include <chrono>     // timing
#include <cstdio>     // printf
#include <cstdlib>    // atoi
#include <string>     // arguments
#include <thread>     // fma threads
#include <vector>     // matrices

namespace {

using clock_type = std::chrono::steady_clock;

using bench::best_gflops;

// The FMA ceiling: 12 independent accumulators per thread (enough to cover the FMA latency).
// The FMA loop of each instruction set: 12 independent chains of multiply-adds in registers. Each
// is compiled for its own set (as the GEMM kernels are), so the ceiling is measured for the set
// the process's products run with, whatever this binary's -march.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) void fma_avx512(long iters, float* out) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(1.0f + float(i) * 1e-7f);
  const __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, c);
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  *out = _mm512_reduce_add_ps(s);
}
__attribute__((target("avx2,fma"))) void fma_avx2(long iters, float* out) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(1.0f + float(i) * 1e-7f);
  const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  float v[8];
  _mm256_storeu_ps(v, acc[0]);
  *out = v[0];
}
#endif
void fma_scalar(long iters, float* out) {
  float acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = 1.0f + float(i) * 1e-7f;
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = acc[i] * 0.9999999f + 1e-7f;
  *out = acc[0];
}

double fma_ceiling(int threads, double seconds) {
  const auto isa = nitro::cpu::gemm_isa();
  int lanes = 1;
  void (*body)(long, float*) = fma_scalar;
#if defined(__x86_64__)
  if (isa == nitro::cpu::cpu_isa::avx512) lanes = 16, body = fma_avx512;
  else if (isa == nitro::cpu::cpu_isa::avx2) lanes = 8, body = fma_avx2;
#endif
  const long iters = 20'000'000;
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    std::vector<float> sink(static_cast<std::size_t>(threads));
    std::atomic<int> ready{0};
    std::vector<std::thread> ts;
    auto t0 = clock_type::now();
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        ready.fetch_add(1);
        while (ready.load() < threads) {}
        body(iters, &sink[static_cast<std::size_t>(t)]);
      });
    for (auto& t : ts) t.join();
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    best = std::max(best, double(threads) * double(iters) * 12.0 * 2.0 * lanes / s / 1e9);
    if (s * 3 > seconds) break;
  }
  return best;
}

using cblas_sgemm_fn = void (*)(int, int, int, int, int, int, float, float const*, int, float const*, int, float, float*, int);

cblas_sgemm_fn load_openblas(std::string& where) {
  for (char const* name : {"libopenblas.so.0", "libopenblas.so", "libopenblasp-r0.3.21.so"}) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      if (auto f = reinterpret_cast<cblas_sgemm_fn>(dlsym(h, "cblas_sgemm"))) {
        where = name;
        return f;
      }
    }
  }
  return nullptr;
}

struct product {
  char const* name;
  bool ta, tb;
  int m, n, k;
};

}  // namespace

int main(int argc, char** argv) {
  int size = 2048;
  double seconds = 2.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string f = argv[i];
    if (f == "--size") size = std::atoi(argv[i + 1]);
    else if (f == "--seconds") seconds = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "gemm_peak: unknown flag %s (use --size N, --seconds S)\n", f.c_str());
      return 2;
    }
  }
  const int threads = nitro::cpu::thread_pool::instance().size();
  std::string blas_where;
  cblas_sgemm_fn blas = load_openblas(blas_where);
  char const* coretype = std::getenv("OPENBLAS_CORETYPE");

  std::printf("{\"what\": \"fma\", \"threads\": %d, \"gflops\": %.1f, \"kernel\": \"%s\"}\n", threads, fma_ceiling(threads, seconds),
              nitro::cpu::gemm_kernel_name());
  std::fflush(stdout);

  if (threads > 1) {  // the hand-off: a region whose tasks wait for one another, so every thread takes part
    auto& pool = nitro::cpu::thread_pool::instance();
    std::atomic<int> arrived{0};
    auto region = [&] {
      arrived.store(0);
      pool.parallel_for(threads, [&](int) {
        arrived.fetch_add(1);
        while (arrived.load() < threads) nitro::cpu::detail::cpu_relax();
      });
    };
    for (int i = 0; i < 1000; ++i) region();
    double best = 1e9;
    for (int r = 0; r < 5; ++r) {
      const auto t0 = clock_type::now();
      for (int i = 0; i < 2000; ++i) region();
      best = std::min(best, std::chrono::duration<double>(clock_type::now() - t0).count() / 2000);
    }
    std::printf("{\"what\": \"handoff\", \"threads\": %d, \"us\": %.2f}\n", threads, best * 1e6);

    // a cache line between two threads: the caller writes 2i+1, a worker answers 2i+2
    alignas(64) std::atomic<long> flag{0};
    constexpr long trips = 100000;
    double trip = 1e9;
    for (int r = 0; r < 3; ++r) {
      flag.store(0);
      const auto t0 = clock_type::now();
      pool.parallel_for(2, [&](int task) {
        if (task == 0)
          for (long i = 0; i < trips; ++i) {
            flag.store(2 * i + 1, std::memory_order_release);
            while (flag.load(std::memory_order_acquire) != 2 * i + 2) nitro::cpu::detail::cpu_relax();
          }
        else
          for (long i = 0; i < trips; ++i) {
            while (flag.load(std::memory_order_acquire) != 2 * i + 1) nitro::cpu::detail::cpu_relax();
            flag.store(2 * i + 2, std::memory_order_release);
          }
      });
      trip = std::min(trip, std::chrono::duration<double>(clock_type::now() - t0).count() / trips);
    }
    std::printf("{\"what\": \"line\", \"threads\": %d, \"ns\": %.0f}\n", threads, trip / 2 * 1e9);
  }
  const double round = seconds / 10;
  auto measure = [&](product const& p) {
    std::vector<float> a(std::size_t(p.m) * p.k, 0.5f), b(std::size_t(p.k) * p.n, 0.25f), c(std::size_t(p.m) * p.n, 0.0f);
    const int lda = p.ta ? p.k : p.m, ldb = p.tb ? p.n : p.k;
    const double flops = 2.0 * p.m * p.n * p.k;
    const float beta = 0.0f;
    const double mine = best_gflops([&] {
      nitro::cpu::gemm<float>(p.ta, p.tb, p.m, p.n, p.k, 1.0f, a.data(), lda, b.data(), ldb, beta, c.data(), p.m);
    }, flops, round);
    double theirs = 0;
    if (blas)
      theirs = best_gflops([&] {
        blas(102 /* col-major */, p.ta ? 112 : 111, p.tb ? 112 : 111, p.m, p.n, p.k, 1.0f, a.data(), lda, b.data(), ldb, beta, c.data(), p.m);
      }, flops, round);
    std::printf(
        "{\"what\": \"%s\", \"threads\": %d, \"op\": \"%c%c\", \"m\": %d, \"n\": %d, \"k\": %d, \"nitro_gflops\": %.1f, "
        "\"openblas_gflops\": %.1f, \"openblas\": \"%s\", \"openblas_coretype\": \"%s\", \"kernel\": \"%s\"}\n",
        p.name, threads, p.ta ? 'T' : 'N', p.tb ? 'T' : 'N', p.m, p.n, p.k, mine, theirs, blas ? blas_where.c_str() : "not found",
        coretype ? coretype : "", nitro::cpu::gemm_kernel_name());
    std::fflush(stdout);
  };

  measure({"sgemm", false, false, size, size, size});
  const product shapes[] = {
      {"mlp fwd 1", false, false, 256, 128, 784},   {"mlp fwd 2", false, false, 256, 128, 256},  {"mlp fwd 3", false, false, 10, 128, 256},
      {"mlp dW 1", false, true, 256, 784, 128},     {"mlp dW 2", false, true, 256, 256, 128},    {"mlp dW 3", false, true, 10, 256, 128},
      {"mlp dx 2", true, false, 256, 128, 256},     {"mlp dx 3", true, false, 256, 128, 10},
      {"wide fwd 1", false, false, 1024, 128, 784}, {"wide fwd 2", false, false, 1024, 128, 1024}, {"wide fwd 3", false, false, 10, 128, 1024},
      {"wide dW 1", false, true, 1024, 784, 128},   {"wide dW 2", false, true, 1024, 1024, 128},  {"wide dW 3", false, true, 10, 1024, 128},
      {"wide dx 2", true, false, 1024, 128, 1024},  {"wide dx 3", true, false, 1024, 128, 10},
  };
  for (auto const& p : shapes) measure(p);
  return 0;
}
