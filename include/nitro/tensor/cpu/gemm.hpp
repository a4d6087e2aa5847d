// nitro/tensor/cpu/gemm.hpp — the CPU backend's matrix product: C = alpha op(A) op(B) + beta C.
//
// Column-major, BLAS conventions; every layer's product goes through here. Training products are
// small and skinny — one extent is the batch (128), another a layer width — so a general BLAS,
// tuned for big squares, spends much of their time packing and handing work between threads. On a
// CPU with AVX-512 this file has its own kernel, shaped for them:
//   - a 32x8 block of C lives in 16 registers; each step of k loads two vectors of op(A) (32
//     rows) and broadcasts eight values of op(B);
//   - op(A) is read where it lies when it is column-major (A, not A^T) and its columns are not a
//     multiple of 4 KiB apart (such strides fold a panel onto a few cache sets); otherwise each
//     task packs its own rows into 32-row panels (A^T through 16x16 register transposes);
//   - op(B) is read where it lies on the same condition, else packed once per call into 8-column
//     panels that every task shares;
//   - C is split into tasks of whole 32-row panels (and 8-column panels when there are few rows),
//     several per thread, taken from a shared counter: a thread that starts late takes fewer, and
//     no thread ever waits for another's share of C. Products under ~2 MFLOP stay on the caller.
// Nothing is allocated per call: the packing buffers belong to the calling thread (with one slot
// per pool thread for the rows each task packs), grow to the largest product seen, and are sized
// before any task runs — so which thread takes which task never decides when memory is allocated. Double precision, and builds without AVX-512, run Eigen's GEBP kernel with buffers owned
// the same way. With beta = 0, C is written without being read (NaN in C does not propagate).
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/tensor/cpu/thread_pool.hpp"

#include <Eigen/Core>

#if defined(__AVX512F__)
#include <immintrin.h>
#define NITRO_DETAIL_GEMM_AVX512 1
#else
#define NITRO_DETAIL_GEMM_AVX512 0
#endif

#include <algorithm>    // fill_n, min, max
#include <cstddef>      // size_t
#include <cstdint>      // int64_t
#include <cstdlib>      // aligned_alloc, free
#include <memory>       // unique_ptr
#include <new>          // bad_alloc
#include <type_traits>  // is_same_v

namespace nitro::cpu {

// Which kernel the float products use: "avx512" (nitro's own) or "eigen". Linked to nitro::runtime
// (NITRO_RUNTIME_LIB), the products are compiled there, so the runtime's own flags decide and say.
#if NITRO_RUNTIME_EXTERN
char const* gemm_kernel_name() noexcept;  // src/runtime.cpp
#else
NITRO_RUNTIME_INLINE char const* gemm_kernel_name() noexcept { return NITRO_DETAIL_GEMM_AVX512 ? "avx512" : "eigen"; }
#endif

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

// ---- Eigen's GEBP with our buffers (double; float without AVX-512) --------------------------------
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

#if NITRO_DETAIL_GEMM_AVX512

#define NITRO_DETAIL_INLINE inline __attribute__((always_inline))
#define NITRO_DETAIL_LAMBDA_INLINE __attribute__((always_inline))

inline constexpr std::int64_t gemm_mr = 32;   // rows of a register block of C: two vectors
inline constexpr std::int64_t gemm_nr = 8;    // columns of a register block of C
inline constexpr std::int64_t gemm_kc = 256;  // steps of k between visits to C (A panel 32 KiB, B panel 8 KiB)

// Is a stride of `ld` floats one that folds a panel onto a few cache sets?
constexpr bool aliasing_stride(std::int64_t ld) noexcept { return (ld * 4) % 4096 == 0; }

// ---- the kernel: C[0:16 MV, 0:NR] (+)= alpha op(A) op(B) over k steps ------------------------------
// A: 16 MV rows a step, step p at a + p lda (the last vector of rows under `mask`: rows past m
// are neither read nor written). B: element (p, j) at b[p rsb + j csb] (csb = 1 when UnitCs).
template <int MV, int NR, bool UnitCs>
NITRO_DETAIL_INLINE void kernel(std::int64_t k, float const* a, std::int64_t lda, float const* b, std::int64_t rsb, std::int64_t csb,
                                float* c, std::int64_t ldc, float alpha, __mmask16 mask, bool load_c) {
  __m512 acc[MV][NR];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j)
#pragma GCC unroll 2
    for (int v = 0; v < MV; ++v) acc[v][j] = _mm512_setzero_ps();
  const std::int64_t cs = UnitCs ? 1 : csb;
  auto step = [&](float const* ap, float const* bp) NITRO_DETAIL_LAMBDA_INLINE {
    __m512 av[MV];
#pragma GCC unroll 2
    for (int v = 0; v < MV; ++v) av[v] = v == MV - 1 ? _mm512_maskz_loadu_ps(mask, ap + 16 * v) : _mm512_loadu_ps(ap + 16 * v);
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const __m512 bj = _mm512_set1_ps(bp[j * cs]);
#pragma GCC unroll 2
      for (int v = 0; v < MV; ++v) acc[v][j] = _mm512_fmadd_ps(av[v], bj, acc[v][j]);
    }
  };
  std::int64_t p = 0;
  for (; p + 4 <= k; p += 4) {
    _mm_prefetch(reinterpret_cast<char const*>(a + 8 * lda), _MM_HINT_T0);
    step(a, b);
    step(a + lda, b + rsb);
    step(a + 2 * lda, b + 2 * rsb);
    step(a + 3 * lda, b + 3 * rsb);
    a += 4 * lda;
    b += 4 * rsb;
  }
  for (; p < k; ++p, a += lda, b += rsb) step(a, b);
  const __m512 al = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) {
    float* cj = c + j * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < MV; ++v) {
      __m512 r = alpha == 1.0f ? acc[v][j] : _mm512_mul_ps(acc[v][j], al);
      if (v == MV - 1) {
        if (load_c) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask, cj + 16 * v));
        _mm512_mask_storeu_ps(cj + 16 * v, mask, r);
      } else {
        if (load_c) r = _mm512_add_ps(r, _mm512_loadu_ps(cj + 16 * v));
        _mm512_storeu_ps(cj + 16 * v, r);
      }
    }
  }
}

// The kernel for rows [0, mr) (mr <= 32) and columns [0, nr) (nr <= 8).
template <bool UnitCs>
inline void kernel_block(std::int64_t mr, std::int64_t nr, std::int64_t k, float const* a, std::int64_t lda, float const* b, std::int64_t rsb,
                         std::int64_t csb, float* c, std::int64_t ldc, float alpha, bool load_c) {
  const std::int64_t rem = mr > 16 ? mr - 16 : mr;
  const __mmask16 mask = static_cast<__mmask16>(rem >= 16 ? 0xFFFFu : (1u << rem) - 1u);
  auto go = [&]<int MV>() NITRO_DETAIL_LAMBDA_INLINE {
    switch (nr) {
      case 8: kernel<MV, 8, UnitCs>(k, a, lda, b, rsb, csb, c, ldc, alpha, mask, load_c); break;
      case 7: kernel<MV, 7, UnitCs>(k, a, lda, b, rsb, csb, c, ldc, alpha, mask, load_c); break;
      case 6: kernel<MV, 6, UnitCs>(k, a, lda, b, rsb, csb, c, ldc, alpha, mask, load_c); break;
      case 5: kernel<MV, 5, UnitCs>(k, a, lda, b, rsb, csb, c, ldc, alpha, mask, load_c); break;
      case 4: kernel<MV, 4, UnitCs>(k, a, lda, b, rsb, csb, c, ldc, alpha, mask, load_c); break;
      case 3: kernel<MV, 3, UnitCs>(k, a, lda, b, rsb, csb, c, ldc, alpha, mask, load_c); break;
      case 2: kernel<MV, 2, UnitCs>(k, a, lda, b, rsb, csb, c, ldc, alpha, mask, load_c); break;
      default: kernel<MV, 1, UnitCs>(k, a, lda, b, rsb, csb, c, ldc, alpha, mask, load_c); break;
    }
  };
  if (mr > 16) go.template operator()<2>();
  else go.template operator()<1>();
}

// ---- packing ---------------------------------------------------------------------------------------
// 16x16 transpose in registers: r[i] (row i) becomes column i.
NITRO_DETAIL_INLINE void transpose16(__m512 (&r)[16]) {
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

// op(A)[i0 + i, p0 + p] for i < mr (<= 32), p < kc, as kc columns of 32 floats. Rows past mr are
// left as they are: the kernel masks them.
inline void pack_a(bool ta, float const* a, std::int64_t lda, std::int64_t i0, std::int64_t mr, std::int64_t p0, std::int64_t kc, float* out) {
  if (!ta) {  // A: 32 contiguous rows a step
    float const* src = a + i0 + p0 * lda;
    if (mr == 32) {
      for (std::int64_t p = 0; p < kc; ++p) {
        _mm512_store_ps(out + p * 32, _mm512_loadu_ps(src + p * lda));
        _mm512_store_ps(out + p * 32 + 16, _mm512_loadu_ps(src + p * lda + 16));
      }
    } else {
      for (std::int64_t p = 0; p < kc; ++p)
        for (std::int64_t i = 0; i < mr; ++i) out[p * 32 + i] = src[p * lda + i];
    }
    return;
  }
  // A^T: row i of op(A) is contiguous along p — 16x16 transposes
  for (std::int64_t h = 0; h < mr; h += 16) {
    const std::int64_t rows = std::min<std::int64_t>(16, mr - h);
    float const* src = a + (i0 + h) * lda + p0;
    std::int64_t p = 0;
    if (rows == 16) {
      for (; p + 16 <= kc; p += 16) {
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lda + p);
        transpose16(r);
#pragma GCC unroll 16
        for (int q = 0; q < 16; ++q) _mm512_store_ps(out + (p + q) * 32 + h, r[q]);
      }
    }
    for (; p < kc; ++p)
      for (std::int64_t i = 0; i < rows; ++i) out[p * 32 + h + i] = src[i * lda + p];
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
  float const* col[gemm_nr];
  for (std::int64_t j = 0; j < nr; ++j) col[j] = b + (j0 + j) * ldb;
  std::int64_t p = 0;
  if (nr == 8) {
    for (; p + 8 <= k; p += 8) {
      __m256 r[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(col[j] + p);
      const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float* o = out + p * 8;
      _mm256_storeu_ps(o + 0, _mm256_permute2f128_ps(s0, s4, 0x20));
      _mm256_storeu_ps(o + 8, _mm256_permute2f128_ps(s1, s5, 0x20));
      _mm256_storeu_ps(o + 16, _mm256_permute2f128_ps(s2, s6, 0x20));
      _mm256_storeu_ps(o + 24, _mm256_permute2f128_ps(s3, s7, 0x20));
      _mm256_storeu_ps(o + 32, _mm256_permute2f128_ps(s0, s4, 0x31));
      _mm256_storeu_ps(o + 40, _mm256_permute2f128_ps(s1, s5, 0x31));
      _mm256_storeu_ps(o + 48, _mm256_permute2f128_ps(s2, s6, 0x31));
      _mm256_storeu_ps(o + 56, _mm256_permute2f128_ps(s3, s7, 0x31));
    }
  }
  for (; p < k; ++p)
    for (std::int64_t j = 0; j < nr; ++j) out[p * nr + j] = col[j][p];
}

// ---- one product, cut into tasks ------------------------------------------------------------------
struct gemm_plan {
  bool ta, tb;
  std::int64_t m, n, k;
  float alpha;
  float const* a;
  std::int64_t lda;
  float const* b;
  std::int64_t ldb;
  float* c;
  std::int64_t ldc;
  bool load_c;
  bool direct_a, direct_b;
  float const* packed_b;        // 8-column panels of op(B), all of k (when !direct_b)
  float* packed_a;              // one slot of a_slot floats per thread (when !direct_a)
  std::int64_t a_slot;
  int slots;                    // 1: the calling thread alone; else the pool's size
  std::int64_t row_panels_per_task, col_panels_per_task, row_tasks, col_tasks;

  // C[i0:i1, j0:j1]: blocks of k; this task's rows of op(A) packed when needed; then every
  // (column panel, row panel) pair, the column panel kept in L1 while the row panels stream.
  void run_task(std::int64_t t) const {
    const std::int64_t i0 = (t % row_tasks) * row_panels_per_task * gemm_mr, i1 = std::min(m, i0 + row_panels_per_task * gemm_mr);
    const std::int64_t j0 = (t / row_tasks) * col_panels_per_task * gemm_nr, j1 = std::min(n, j0 + col_panels_per_task * gemm_nr);
    if (i0 >= i1 || j0 >= j1) return;
    float* pa = direct_a ? nullptr : packed_a + a_slot * (slots > 1 ? thread_pool::thread_index() : 0);
    for (std::int64_t p0 = 0; p0 < k; p0 += gemm_kc) {
      const std::int64_t kc = std::min(gemm_kc, k - p0);
      const bool acc = load_c || p0 > 0;
      if (!direct_a)
        for (std::int64_t i = i0; i < i1; i += gemm_mr) pack_a(ta, a, lda, i, std::min(gemm_mr, i1 - i), p0, kc, pa + (i - i0) * kc);
      for (std::int64_t j = j0; j < j1; j += gemm_nr) {
        const std::int64_t nr = std::min(gemm_nr, j1 - j);
        for (std::int64_t i = i0; i < i1; i += gemm_mr) {
          const std::int64_t mr = std::min(gemm_mr, i1 - i);
          float const* ap = direct_a ? a + i + p0 * lda : pa + (i - i0) * kc;
          const std::int64_t la = direct_a ? lda : 32;
          float* cp = c + i + j * ldc;
          if (!direct_b) kernel_block<true>(mr, nr, kc, ap, la, packed_b + j * k + p0 * nr, nr, 1, cp, ldc, alpha, acc);
          else if (tb) kernel_block<true>(mr, nr, kc, ap, la, b + j + p0 * ldb, ldb, 1, cp, ldc, alpha, acc);
          else kernel_block<false>(mr, nr, kc, ap, la, b + p0 + j * ldb, 1, ldb, cp, ldc, alpha, acc);
        }
      }
    }
  }
};

// C (+)= alpha op(A) op(B) (load_c: add to C, else overwrite it), on `pool`'s threads when given
// and the product is worth sharing. The result does not depend on the pool: every element of C is
// summed in the same order whichever task computes it.
inline void gemm_avx512(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, float const* a, std::int64_t lda,
                        float const* b, std::int64_t ldb, float* c, std::int64_t ldc, bool load_c, thread_pool* pool) {
  const double flops = 2.0 * double(m) * double(n) * double(k);
  const int threads = !pool || flops < 2e6 || thread_pool::inside() ? 1 : pool->size();
  gemm_plan plan{ta, tb, m, n, k, alpha, a, lda, b, ldb, c, ldc, load_c, !ta && !aliasing_stride(lda), !aliasing_stride(ldb), nullptr,
                 nullptr, 0, 1, 0, 0, 0, 0};
  const std::int64_t row_panels = (m + gemm_mr - 1) / gemm_mr, col_panels = (n + gemm_nr - 1) / gemm_nr;
  // tasks: whole 32-row panels, at most 12 (a 384-row block of op(A) stays in L2), about four a
  // thread so a thread that starts late costs little; columns are split only when rows run short
  const std::int64_t want = threads == 1 ? 1 : 4 * threads;
  plan.row_panels_per_task = std::min<std::int64_t>(12, std::max<std::int64_t>(1, (row_panels + want - 1) / want));
  plan.row_tasks = (row_panels + plan.row_panels_per_task - 1) / plan.row_panels_per_task;
  const std::int64_t col_split = plan.row_tasks >= want ? 1 : std::min(col_panels, (want + plan.row_tasks - 1) / plan.row_tasks);
  plan.col_panels_per_task = (col_panels + col_split - 1) / col_split;
  plan.col_tasks = (col_panels + plan.col_panels_per_task - 1) / plan.col_panels_per_task;
  if (!plan.direct_b) {
    float* pb = gemm_workspace<float>::local().b.get(static_cast<std::size_t>(k * col_panels * gemm_nr));
    auto pack = [&](std::int64_t jp) { pack_b(tb, b, ldb, k, jp * gemm_nr, std::min(gemm_nr, n - jp * gemm_nr), pb + jp * gemm_nr * k); };
    if (threads > 1 && k * n >= 32768) pool->parallel_for(static_cast<int>(col_panels), [&](int jp) { pack(jp); });
    else for (std::int64_t jp = 0; jp < col_panels; ++jp) pack(jp);
    plan.packed_b = pb;
  }
  if (!plan.direct_a) {
    // every thread's packing slot comes from the caller's buffer, sized here, before any task
    // runs: which thread takes which task varies, but the memory the product needs does not, so
    // it is all allocated the first time the product runs (no allocation in a later step)
    plan.a_slot = std::min(k, gemm_kc) * plan.row_panels_per_task * gemm_mr;
    plan.slots = threads == 1 ? 1 : pool->size();
    plan.packed_a = gemm_workspace<float>::local().a.get(static_cast<std::size_t>(plan.a_slot * plan.slots));
  }
  const std::int64_t tasks = plan.row_tasks * plan.col_tasks;
  if (threads == 1 || tasks == 1) {
    for (std::int64_t t = 0; t < tasks; ++t) plan.run_task(t);
  } else {
    pool->parallel_for(static_cast<int>(tasks), [&](int t) { plan.run_task(t); });
  }
}

#undef NITRO_DETAIL_INLINE
#undef NITRO_DETAIL_LAMBDA_INLINE

#endif  // NITRO_DETAIL_GEMM_AVX512

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
#if NITRO_DETAIL_GEMM_AVX512
  if constexpr (std::is_same_v<T, float>) {
    detail::gemm_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc, beta != T(0), &thread_pool::instance());
    return;
  }
#endif
  if (beta == T(0)) detail::scale_c(m, n, T(0), c, ldc);
  detail::gemm_eigen_parallel(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc);
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

#undef NITRO_DETAIL_GEMM_AVX512
