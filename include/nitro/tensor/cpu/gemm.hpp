// nitro/tensor/cpu/gemm.hpp — the CPU backend's matrix product: C = alpha op(A) op(B) + beta C.
//
// Column-major, BLAS conventions. Every layer's product goes through here. The product is split
// across the backend's threads along the larger of C's two extents, and each part runs Eigen's
// GEBP kernel with packing buffers the thread keeps from call to call — so a training step's
// products allocate nothing once the first step has sized them (Eigen's own entry point
// allocates its packing buffers on every call).
#pragma once

#include "nitro/tensor/cpu/thread_pool.hpp"

#include <Eigen/Core>

#include <algorithm>  // max, min
#include <cstdint>    // int64_t
#include <cstdlib>    // aligned_alloc
#include <memory>     // unique_ptr

namespace nitro::cpu {

namespace detail {

// Packing buffers of one thread, grown to the largest product seen.
template <class T>
struct gemm_workspace {
  struct free_deleter { void operator()(T* p) const noexcept { std::free(p); } };
  std::unique_ptr<T, free_deleter> a, b;
  std::size_t size_a = 0, size_b = 0;
  static T* grow(std::unique_ptr<T, free_deleter>& p, std::size_t& have, std::size_t need) {
    if (need > have) {
      std::size_t bytes = ((need * sizeof(T) + 63) / 64 + 1) * 64;
      p.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
      if (!p) throw std::bad_alloc();
      have = bytes / sizeof(T);
    }
    return p.get();
  }
  static gemm_workspace& local() {
    thread_local gemm_workspace ws;
    return ws;
  }
};

// Eigen's blocking with buffers we own.
template <class T>
struct owned_blocking : Eigen::internal::level3_blocking<T, T> {
  owned_blocking(Eigen::Index rows, Eigen::Index cols, Eigen::Index depth) {
    this->m_mc = rows;
    this->m_nc = cols;
    this->m_kc = depth;
    Eigen::internal::computeProductBlockingSizes<T, T, 1, Eigen::Index>(this->m_kc, this->m_mc, this->m_nc, Eigen::Index(1));
    auto& ws = gemm_workspace<T>::local();
    this->m_blockA = gemm_workspace<T>::grow(ws.a, ws.size_a, static_cast<std::size_t>(this->m_mc * this->m_kc));
    this->m_blockB = gemm_workspace<T>::grow(ws.b, ws.size_b, static_cast<std::size_t>(this->m_kc * this->m_nc));
  }
};

// C[m, n] += alpha * op(A)[m, k] * op(B)[k, n], one thread, Eigen's kernel.
template <class T, int OrderA, int OrderB>
void gebp(std::int64_t m, std::int64_t n, std::int64_t k, T alpha, T const* a, std::int64_t lda, T const* b, std::int64_t ldb, T* c,
          std::int64_t ldc) {
  owned_blocking<T> blocking(m, n, k);
  Eigen::internal::general_matrix_matrix_product<Eigen::Index, T, OrderA, false, T, OrderB, false, Eigen::ColMajor, 1>::run(
      m, n, k, a, lda, b, ldb, c, 1, ldc, alpha, blocking, nullptr);
}

template <class T>
void gemm_serial(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, T const* a, std::int64_t lda, T const* b,
                 std::int64_t ldb, T* c, std::int64_t ldc) {
  constexpr int C = Eigen::ColMajor, R = Eigen::RowMajor;
  if (!ta && !tb) gebp<T, C, C>(m, n, k, alpha, a, lda, b, ldb, c, ldc);
  else if (ta && !tb) gebp<T, R, C>(m, n, k, alpha, a, lda, b, ldb, c, ldc);
  else if (!ta && tb) gebp<T, C, R>(m, n, k, alpha, a, lda, b, ldb, c, ldc);
  else gebp<T, R, R>(m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

}  // namespace detail

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, T const* a, std::int64_t lda,
          T const* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (beta != T(1)) {
    for (std::int64_t j = 0; j < n; ++j) {
      T* cj = c + j * ldc;
      if (beta == T(0)) std::fill_n(cj, m, T(0));
      else for (std::int64_t i = 0; i < m; ++i) cj[i] *= beta;
    }
  }
  if (k == 0 || alpha == T(0)) return;
  thread_pool& pool = thread_pool::instance();
  const double flops = 2.0 * double(m) * double(n) * double(k);
  const int parts = flops < 2e6 ? 1 : pool.size();
  if (parts == 1) {
    detail::gemm_serial(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, c, ldc);
    return;
  }
  // element (i, p) of op(A) and (p, j) of op(B), for slicing
  auto a_rows = [&](std::int64_t i) { return trans_a ? a + i * lda : a + i; };
  auto b_cols = [&](std::int64_t j) { return trans_b ? b + j : b + j * ldb; };
  if (n >= m) {  // split C's columns (and op(B)'s)
    const std::int64_t step = ((n + parts - 1) / parts + 7) / 8 * 8;
    pool.parallel_for(parts, [&](int p) {
      std::int64_t j0 = std::min<std::int64_t>(n, p * step), j1 = std::min<std::int64_t>(n, j0 + step);
      if (j1 > j0) detail::gemm_serial(trans_a, trans_b, m, j1 - j0, k, alpha, a, lda, b_cols(j0), ldb, c + j0 * ldc, ldc);
    });
  } else {       // split C's rows (and op(A)'s)
    const std::int64_t step = ((m + parts - 1) / parts + 15) / 16 * 16;
    pool.parallel_for(parts, [&](int p) {
      std::int64_t i0 = std::min<std::int64_t>(m, p * step), i1 = std::min<std::int64_t>(m, i0 + step);
      if (i1 > i0) detail::gemm_serial(trans_a, trans_b, i1 - i0, n, k, alpha, a_rows(i0), lda, b, ldb, c + i0, ldc);
    });
  }
}

}  // namespace nitro::cpu
