// nitro/tensor/cpu/gemm.hpp — the CPU backend's matrix product: C = alpha op(A) op(B) + beta C.
//
// Column-major, BLAS conventions; every layer's product goes through here. Training products are
// small and skinny — one extent is the batch (128), another a layer width — so a general BLAS,
// tuned for big squares, spends much of their time packing and handing work between threads. This
// file has its own float kernels, shaped for them, one per instruction set, and picks one when the
// process first multiplies (CPUID): AVX-512, else AVX2+FMA, else Eigen's GEBP compiled for the
// build's own target (NEON on Arm). Every kernel is compiled whatever the build's -march (each under
// its own target region, cpu/gemm_blocked.inc), so a binary's products run at the best of whichever
// x86-64 CPU runs it; NITRO_CPU_ISA=avx2 (or generic) caps the choice, and gemm_kernel_name() says
// which kernel runs (show() and the run's manifest print it).
//   - an mr x nr block of C lives in registers (AVX-512: 32x8 in 16 of its 32 registers; AVX2:
//     16x6 in 12 of 16); each step of k loads two vectors of op(A) and broadcasts nr values of op(B);
//   - op(A) is read where it lies when it is column-major (A, not A^T) and its columns are not a
//     multiple of 4 KiB apart (such strides fold a panel onto a few cache sets); otherwise each
//     task packs its own rows into mr-row panels (A^T through register transposes);
//   - op(B) is read where it lies on the same condition, else packed once per call into nr-column
//     panels that every task shares;
//   - C is split into tasks of whole row panels (and column panels when there are few rows),
//     several per thread, taken from a shared counter: a thread that starts late takes fewer, and
//     no thread ever waits for another's share of C. Products under ~2 MFLOP stay on the caller.
// Nothing is allocated per call: the packing buffers belong to the calling thread (with one slot
// per pool thread for the rows each task packs), grow to the largest product seen, and are sized
// before any task runs — so which thread takes which task never decides when memory is allocated.
// Double precision runs Eigen's GEBP kernel with buffers owned the same way. With beta = 0, C is
// written without being read (NaN in C does not propagate).
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/runtime.hpp"
#include "nitro/tensor/cpu/thread_pool.hpp"

#include <Eigen/Core>

// The kernels need x86-64 and a compiler that compiles a function for a target of its own (nvcc
// hands the regions' pragmas to its host compiler; its own front end would only warn that it does
// not know them).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define NITRO_DETAIL_GEMM_X86 1
#else
#define NITRO_DETAIL_GEMM_X86 0
#endif

#include <algorithm>    // fill_n, min, max
#include <cstddef>      // size_t
#include <cstdint>      // int64_t
#include <cstdlib>      // aligned_alloc, free, getenv
#include <memory>       // unique_ptr
#include <new>          // bad_alloc
#include <string>       // the error's sentence
#include <type_traits>  // is_same_v

namespace nitro::cpu {

// The instruction sets the float products have kernels for, best last.
enum class cpu_isa : int { generic = 0, avx2 = 1, avx512 = 2 };

constexpr char const* to_string(cpu_isa i) noexcept {
  return i == cpu_isa::avx512 ? "avx512" : i == cpu_isa::avx2 ? "avx2" : "generic";
}

// Can this CPU (and its OS, which must save the wider registers) run `i`'s kernel?
inline bool cpu_supports(cpu_isa i) noexcept {
#if NITRO_DETAIL_GEMM_X86
  __builtin_cpu_init();
  switch (i) {
    case cpu_isa::avx512: return __builtin_cpu_supports("avx512f");
    case cpu_isa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case cpu_isa::generic: return true;
  }
  return false;
#else
  return i == cpu_isa::generic;
#endif
}

// The best instruction set this CPU has a kernel for.
inline cpu_isa best_cpu_isa() noexcept {
  return cpu_supports(cpu_isa::avx512) ? cpu_isa::avx512 : cpu_supports(cpu_isa::avx2) ? cpu_isa::avx2 : cpu_isa::generic;
}

// The instruction set `setting` (NITRO_CPU_ISA's value; null or empty: the best) asks for, checked
// against this CPU: E-CPU-002 for a name that is none, or a set the CPU lacks.
inline cpu_isa cpu_isa_from(char const* setting) {
  if (!setting || !*setting) return best_cpu_isa();
  const std::string s = setting;
  for (cpu_isa i : {cpu_isa::avx512, cpu_isa::avx2, cpu_isa::generic}) {
    if (s != to_string(i)) continue;
    if (cpu_supports(i)) return i;
    throw error("E-CPU-002", "NITRO_CPU_ISA='" + s + "' asks for kernels this CPU cannot run (its best is " + to_string(best_cpu_isa()) + ")",
                std::string("set NITRO_CPU_ISA to ") + to_string(best_cpu_isa()) + " or a lesser set (avx2, generic), or unset it to use the best");
  }
  throw error("E-CPU-002", "NITRO_CPU_ISA='" + s + "' is not an instruction set nitro has kernels for",
              "set NITRO_CPU_ISA to avx512, avx2 or generic, or unset it to use the best this CPU has");
}

// The instruction set the float products run with in this process: NITRO_CPU_ISA, read once, else
// the best this CPU has.
inline cpu_isa gemm_isa() {
  static const cpu_isa chosen = cpu_isa_from(std::getenv("NITRO_CPU_ISA"));
  return chosen;
}

// Which kernel the float products use: "avx512", "avx2" (nitro's own) or "generic" (Eigen's).
inline char const* gemm_kernel_name() { return to_string(gemm_isa()); }

namespace detail {

// A buffer of one thread, grown to the largest need seen and then kept.
template <class T>
struct grow_buffer {
  struct free_deleter { void operator()(T* p) const noexcept { std::free(p); } };
  std::unique_ptr<T, free_deleter> data;
  std::size_t size = 0;
  T* get(std::size_t need) {
    if (need > size) {
      const std::size_t bytes = ((need * sizeof(T) + 63) / 64 + 1) * 64;
      data.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
      if (!data) throw std::bad_alloc();
      size = bytes / sizeof(T);
    }
    return data.get();
  }
};

template <class T>
struct gemm_workspace {
  grow_buffer<T> a, b;
  static gemm_workspace& local() {
    thread_local gemm_workspace ws;
    return ws;
  }
};

template <class T>
void scale_c(std::int64_t m, std::int64_t n, T beta, T* c, std::int64_t ldc) {
  for (std::int64_t j = 0; j < n; ++j) {
    T* cj = c + j * ldc;
    if (beta == T(0)) std::fill_n(cj, m, T(0));
    else for (std::int64_t i = 0; i < m; ++i) cj[i] *= beta;
  }
}

// ---- Eigen's GEBP with our buffers (double; float on a CPU without AVX2) ----------------------------
template <class T>
struct owned_blocking : Eigen::internal::level3_blocking<T, T> {
  owned_blocking(Eigen::Index rows, Eigen::Index cols, Eigen::Index depth) {
    this->m_mc = rows;
    this->m_nc = cols;
    this->m_kc = depth;
    Eigen::internal::computeProductBlockingSizes<T, T, 1, Eigen::Index>(this->m_kc, this->m_mc, this->m_nc, Eigen::Index(1));
    auto& ws = gemm_workspace<T>::local();
    this->m_blockA = ws.a.get(static_cast<std::size_t>(this->m_mc * this->m_kc));
    this->m_blockB = ws.b.get(static_cast<std::size_t>(this->m_kc * this->m_nc));
  }
};

template <class T, int OrderA, int OrderB>
void gebp(std::int64_t m, std::int64_t n, std::int64_t k, T alpha, T const* a, std::int64_t lda, T const* b, std::int64_t ldb, T* c,
          std::int64_t ldc) {
  owned_blocking<T> blocking(m, n, k);
  Eigen::internal::general_matrix_matrix_product<Eigen::Index, T, OrderA, false, T, OrderB, false, Eigen::ColMajor, 1>::run(
      m, n, k, a, lda, b, ldb, c, 1, ldc, alpha, blocking, nullptr);
}

// C += alpha op(A) op(B) on the calling thread (C already scaled by beta).
template <class T>
void gemm_eigen(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, T const* a, std::int64_t lda, T const* b,
                std::int64_t ldb, T* c, std::int64_t ldc) {
  constexpr int C = Eigen::ColMajor, R = Eigen::RowMajor;
  if (!ta && !tb) gebp<T, C, C>(m, n, k, alpha, a, lda, b, ldb, c, ldc);
  else if (ta && !tb) gebp<T, R, C>(m, n, k, alpha, a, lda, b, ldb, c, ldc);
  else if (!ta && tb) gebp<T, C, R>(m, n, k, alpha, a, lda, b, ldb, c, ldc);
  else gebp<T, R, R>(m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

// Splits C into parts along its longer side, one Eigen product each.
template <class T>
void gemm_eigen_parallel(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, T const* a, std::int64_t lda,
                         T const* b, std::int64_t ldb, T* c, std::int64_t ldc) {
  thread_pool& pool = thread_pool::instance();
  const int parts = 2.0 * double(m) * double(n) * double(k) < 4e6 ? 1 : pool.size();
  if (parts == 1) return gemm_eigen(ta, tb, m, n, k, alpha, a, lda, b, ldb, c, ldc);
  if (n >= m) {
    const std::int64_t step = ((n + parts - 1) / parts + 7) / 8 * 8;
    pool.parallel_for(parts, [&](int p) {
      const std::int64_t j0 = std::min<std::int64_t>(n, p * step), j1 = std::min<std::int64_t>(n, j0 + step);
      if (j1 > j0) gemm_eigen(ta, tb, m, j1 - j0, k, alpha, a, lda, tb ? b + j0 : b + j0 * ldb, ldb, c + j0 * ldc, ldc);
    });
  } else {
    const std::int64_t step = ((m + parts - 1) / parts + 15) / 16 * 16;
    pool.parallel_for(parts, [&](int p) {
      const std::int64_t i0 = std::min<std::int64_t>(m, p * step), i1 = std::min<std::int64_t>(m, i0 + step);
      if (i1 > i0) gemm_eigen(ta, tb, i1 - i0, n, k, alpha, ta ? a + i0 * lda : a + i0, lda, b, ldb, c + i0, ldc);
    });
  }
}

#if NITRO_DETAIL_GEMM_X86

#if defined(__CUDACC__)
#pragma nv_diag_suppress 1675  // unrecognized GCC pragma: target, push_options, unroll are g++'s
#endif

#define NITRO_DETAIL_INLINE inline __attribute__((always_inline))

// Is a stride of `ld` floats one that folds a panel onto a few cache sets?
constexpr bool aliasing_stride(std::int64_t ld) noexcept { return (ld * 4) % 4096 == 0; }

// ---- AVX-512 ---------------------------------------------------------------------------------------
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
// g++ 12 takes the undefined pass-through operand of avx512fintrin.h's unpack and shuffle
// intrinsics for a read of an uninitialised value when AVX-512 is not the build's own target
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace avx512 {

struct isa {
  using vec = __m512;
  using mask = __mmask16;
  static constexpr int width = 16;
  static constexpr std::int64_t mr = 32, nr = 8;
  static constexpr bool masked_free = true;
  static constexpr int unroll = 4;
  static NITRO_DETAIL_INLINE vec zero() { return _mm512_setzero_ps(); }
  static NITRO_DETAIL_INLINE vec load(float const* p) { return _mm512_loadu_ps(p); }
  static NITRO_DETAIL_INLINE vec maskload(mask m, float const* p) { return _mm512_maskz_loadu_ps(m, p); }
  static NITRO_DETAIL_INLINE void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static NITRO_DETAIL_INLINE void maskstore(float* p, mask m, vec v) { _mm512_mask_storeu_ps(p, m, v); }
  static NITRO_DETAIL_INLINE vec set1(float x) { return _mm512_set1_ps(x); }
  static NITRO_DETAIL_INLINE vec fmadd(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  static NITRO_DETAIL_INLINE vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  static NITRO_DETAIL_INLINE vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  static NITRO_DETAIL_INLINE mask tail_mask(std::int64_t rem) { return static_cast<mask>(rem >= 16 ? 0xFFFFu : (1u << rem) - 1u); }
};

// 8x8 transpose in registers: r[i] (row i) becomes column i.
NITRO_DETAIL_INLINE void transpose(__m256 (&r)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// 16x16 transpose in registers: r[i] (row i) becomes column i.
NITRO_DETAIL_INLINE void transpose(__m512 (&r)[16]) {
  __m512 t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
  }
}

// op(B)[p, j0 + j] for p < k, j < nr (<= 8), as k rows of nr floats.
inline void pack_b(bool tb, float const* b, std::int64_t ldb, std::int64_t k, std::int64_t j0, std::int64_t nr, float* out) {
  if (tb) {  // B^T: element (p, j) at b[j + p ldb], rows already contiguous
    for (std::int64_t p = 0; p < k; ++p) {
      float const* src = b + j0 + p * ldb;
      for (std::int64_t j = 0; j < nr; ++j) out[p * nr + j] = src[j];
    }
    return;
  }
  // B: nr columns, interleaved — 8x8 transposes
  float const* col[8];
  for (std::int64_t j = 0; j < nr; ++j) col[j] = b + (j0 + j) * ldb;
  std::int64_t p = 0;
  if (nr == 8) {
    for (; p + 8 <= k; p += 8) {
      __m256 r[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(col[j] + p);
      transpose(r);
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) _mm256_storeu_ps(out + (p + q) * 8, r[q]);
    }
  }
  for (; p < k; ++p)
    for (std::int64_t j = 0; j < nr; ++j) out[p * nr + j] = col[j][p];
}

#include "nitro/tensor/cpu/gemm_blocked.inc"

}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

// ---- AVX2 + FMA ------------------------------------------------------------------------------------
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace avx2 {

struct isa {
  using vec = __m256;
  using mask = __m256i;  // a lane is a row when its word is all ones
  static constexpr int width = 8;
  static constexpr std::int64_t mr = 16, nr = 6;  // 12 accumulators, 2 of op(A), 1 broadcast: 15 of 16 registers
  static constexpr bool masked_free = false;
  static constexpr int unroll = 1;
  static NITRO_DETAIL_INLINE vec zero() { return _mm256_setzero_ps(); }
  static NITRO_DETAIL_INLINE vec load(float const* p) { return _mm256_loadu_ps(p); }
  static NITRO_DETAIL_INLINE vec maskload(mask m, float const* p) { return _mm256_maskload_ps(p, m); }
  static NITRO_DETAIL_INLINE void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static NITRO_DETAIL_INLINE void maskstore(float* p, mask m, vec v) { _mm256_maskstore_ps(p, m, v); }
  static NITRO_DETAIL_INLINE vec set1(float x) { return _mm256_set1_ps(x); }
  static NITRO_DETAIL_INLINE vec fmadd(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static NITRO_DETAIL_INLINE vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  static NITRO_DETAIL_INLINE vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  static NITRO_DETAIL_INLINE mask tail_mask(std::int64_t rem) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rem)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
};

// 8x8 transpose in registers: r[i] (row i) becomes column i.
NITRO_DETAIL_INLINE void transpose(__m256 (&r)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// op(B)[p, j0 + j] for p < k, j < nr (<= 6), as k rows of nr floats.
inline void pack_b(bool tb, float const* b, std::int64_t ldb, std::int64_t k, std::int64_t j0, std::int64_t nr, float* out) {
  if (tb) {  // B^T: element (p, j) at b[j + p ldb], rows already contiguous
    for (std::int64_t p = 0; p < k; ++p)
      for (std::int64_t j = 0; j < nr; ++j) out[p * nr + j] = b[j0 + j + p * ldb];
    return;
  }
  float const* col[6];
  for (std::int64_t j = 0; j < nr; ++j) col[j] = b + (j0 + j) * ldb;
  for (std::int64_t p = 0; p < k; ++p)
    for (std::int64_t j = 0; j < nr; ++j) out[p * nr + j] = col[j][p];
}

#include "nitro/tensor/cpu/gemm_blocked.inc"

}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#undef NITRO_DETAIL_INLINE

#if defined(__CUDACC__)
#pragma nv_diag_default 1675
#endif

#endif  // NITRO_DETAIL_GEMM_X86

// C (+)= alpha op(A) op(B) in float with `isa`'s kernel (load_c: add to C, else overwrite it), on
// `pool`'s threads when given and the product is worth sharing. The caller checks that this CPU
// runs `isa` (cpu_supports).
inline void gemm_float(cpu_isa isa, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, float const* a,
                       std::int64_t lda, float const* b, std::int64_t ldb, float* c, std::int64_t ldc, bool load_c, thread_pool* pool) {
#if NITRO_DETAIL_GEMM_X86
  if (isa == cpu_isa::avx512) return avx512::gemm_blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, c, ldc, load_c, pool);
  if (isa == cpu_isa::avx2) return avx2::gemm_blocked(ta, tb, m, n, k, alpha, a, lda, b, ldb, c, ldc, load_c, pool);
#endif
  if (!load_c) scale_c(m, n, 0.0f, c, ldc);
  if (pool) gemm_eigen_parallel(ta, tb, m, n, k, alpha, a, lda, b, ldb, c, ldc);
  else gemm_eigen(ta, tb, m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

}  // namespace detail

// C = alpha op(A) op(B) + beta C, column-major; op(X) = X^T when trans_x. With beta == 0, C is
// written without being read. Runs on the backend's threads when the product is worth sharing.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, T const* a, std::int64_t lda,
          T const* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == T(0)) {
    if (beta != T(1)) detail::scale_c(m, n, beta, c, ldc);
    return;
  }
  if (beta != T(0) && beta != T(1)) detail::scale_c(m, n, beta, c, ldc);
  if constexpr (std::is_same_v<T, float>) {
    detail::gemm_float(gemm_isa(), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc, beta != T(0), &thread_pool::instance());
  } else {
    if (beta == T(0)) detail::scale_c(m, n, T(0), c, ldc);
    detail::gemm_eigen_parallel(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc);
  }
}

#if NITRO_RUNTIME_EXTERN
// Compiled once, in nitro::runtime (src/runtime.cpp), not in every translation unit that multiplies:
// the kernels are a fifth of a small trainer's compile time (bench/README.md, compile cost).
extern template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, float const*, std::int64_t,
                                 float const*, std::int64_t, float, float*, std::int64_t);
extern template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, double const*, std::int64_t,
                                  double const*, std::int64_t, double, double*, std::int64_t);
#endif

}  // namespace nitro::cpu

#undef NITRO_DETAIL_GEMM_X86
