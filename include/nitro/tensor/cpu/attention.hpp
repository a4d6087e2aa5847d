// nitro/tensor/cpu/attention.hpp — causal multi-head attention on the CPU, a tile of scores at a time.
//
//   cpu::causal_attention<float>(heads, head_dim, seq, batch, qkv, out, lse);
//   cpu::causal_attention_backward<float>(heads, head_dim, seq, batch, qkv, out, lse, gout, gqkv);
//
// Layout (column-major, features first, as every nitro activation): qkv is [3 W, seq, batch] with
// W = heads * head_dim, the queries in rows [0, W), the keys in [W, 2W), the values in [2W, 3W),
// head h owning rows h*head_dim .. of each; out is [W, seq, batch]; lse [heads, seq, batch] holds
// each query's log-sum-exp of its scaled scores, what the backward pass needs to rebuild any tile
// of probabilities. Scores are q.k / sqrt(head_dim), query i seeing keys 0..i.
//
// The T x T scores of a head are never stored: the forward walks the keys in tiles of `tile`
// keeping a running maximum and sum per query (the online softmax of FlashAttention); the backward
// rebuilds each tile of probabilities from lse. Scratch is a few tiles on the stack (head_dim at
// most max_head_dim), so a step allocates nothing. One task per (sample, head) on the process's
// thread pool: the tasks write disjoint rows, so they need no locks.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/tensor/cpu/thread_pool.hpp"

#include <Eigen/Core>

#include <algorithm>  // min
#include <cmath>      // sqrt, log
#include <cstdint>    // int64_t
#include <limits>     // infinity

namespace nitro::cpu {

inline constexpr std::int64_t attention_tile = 64;
inline constexpr std::int64_t max_head_dim = 256;

namespace detail {
template <class T> using tile_matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor, max_head_dim, attention_tile>;
template <class T> using score_tile = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor, attention_tile, attention_tile>;
template <class T> using tile_vector = Eigen::Matrix<T, 1, Eigen::Dynamic, Eigen::RowMajor, 1, attention_tile>;
template <class T> using cols = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>, 0, Eigen::OuterStride<>>;
template <class T> using cols_mut = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>, 0, Eigen::OuterStride<>>;

// Keys after the query are masked: in the tile of keys k0.. and queries q0.., key j is later than
// query i when k0 + j > q0 + i.
template <class S>
void mask_future(S& s, std::int64_t k0, std::int64_t q0, typename S::Scalar value) {
  for (std::int64_t i = 0; i < s.cols(); ++i)
    for (std::int64_t j = std::max<std::int64_t>(0, q0 + i - k0 + 1); j < s.rows(); ++j) s(j, i) = value;
}

// One (sample, head): q, k, v point at the head's first row of the sample's first column.
template <class T>
void attention_head(std::int64_t d, std::int64_t seq, std::int64_t ld, T const* q, T const* k, T const* v, T* o, std::int64_t ldo,
                    T* lse, std::int64_t ldl) {
  const T scale = T(1) / std::sqrt(T(d));
  const T minus_inf = -std::numeric_limits<T>::infinity();
  for (std::int64_t q0 = 0; q0 < seq; q0 += attention_tile) {
    const std::int64_t nq = std::min(attention_tile, seq - q0);
    cols<T> Q(q + q0 * ld, d, nq, Eigen::OuterStride<>(ld));
    tile_matrix<T> acc = tile_matrix<T>::Zero(d, nq);
    tile_vector<T> m = tile_vector<T>::Constant(nq, minus_inf), l = tile_vector<T>::Zero(nq);
    score_tile<T> s;
    for (std::int64_t k0 = 0; k0 < q0 + nq; k0 += attention_tile) {
      const std::int64_t nk = std::min(attention_tile, q0 + nq - k0);
      cols<T> K(k + k0 * ld, d, nk, Eigen::OuterStride<>(ld));
      cols<T> V(v + k0 * ld, d, nk, Eigen::OuterStride<>(ld));
      s.noalias() = scale * (K.transpose() * Q);  // [nk, nq]: s(j, i) = k_j . q_i
      if (k0 + nk > q0) mask_future(s, k0, q0, minus_inf);
      const tile_vector<T> m_new = m.cwiseMax(s.colwise().maxCoeff());
      const tile_vector<T> keep = (m - m_new).array().exp();  // exp(-inf) = 0 on the first tile
      s = (s.rowwise() - m_new).array().exp();
      l = l.cwiseProduct(keep) + s.colwise().sum();
      acc = acc * keep.asDiagonal();
      acc.noalias() += V * s;
      m = m_new;
    }
    cols_mut<T>(o + q0 * ldo, d, nq, Eigen::OuterStride<>(ldo)) = acc * l.cwiseInverse().asDiagonal();
    if (lse)
      for (std::int64_t i = 0; i < nq; ++i) lse[(q0 + i) * ldl] = m(i) + std::log(l(i));
  }
}

template <class T>
void attention_head_backward(std::int64_t d, std::int64_t seq, std::int64_t ld, T const* q, T const* k, T const* v, T const* o,
                             T const* go, std::int64_t ldo, T const* lse, std::int64_t ldl, T* gq, T* gk, T* gv) {
  const T scale = T(1) / std::sqrt(T(d));
  // delta_i = go_i . o_i: the softmax's backward needs each query's sum of dP * P
  for (std::int64_t k0 = 0; k0 < seq; k0 += attention_tile) {
    const std::int64_t nk = std::min(attention_tile, seq - k0);
    cols<T> K(k + k0 * ld, d, nk, Eigen::OuterStride<>(ld));
    cols<T> V(v + k0 * ld, d, nk, Eigen::OuterStride<>(ld));
    tile_matrix<T> dk = tile_matrix<T>::Zero(d, nk), dv = tile_matrix<T>::Zero(d, nk);
    score_tile<T> p, dp;
    // the queries that see these keys: from the tile holding key k0 on
    for (std::int64_t q0 = (k0 / attention_tile) * attention_tile; q0 < seq; q0 += attention_tile) {
      const std::int64_t nq = std::min(attention_tile, seq - q0);
      cols<T> Q(q + q0 * ld, d, nq, Eigen::OuterStride<>(ld));
      cols<T> O(o + q0 * ldo, d, nq, Eigen::OuterStride<>(ldo));
      cols<T> GO(go + q0 * ldo, d, nq, Eigen::OuterStride<>(ldo));
      tile_vector<T> lrow(nq), delta(nq);
      for (std::int64_t i = 0; i < nq; ++i) lrow(i) = lse[(q0 + i) * ldl];
      delta = GO.cwiseProduct(O).colwise().sum();
      p.noalias() = scale * (K.transpose() * Q);
      p = (p.rowwise() - lrow).array().exp();
      if (k0 + nk > q0) mask_future(p, k0, q0, T(0));
      dv.noalias() += GO * p.transpose();
      dp.noalias() = V.transpose() * GO;  // [nk, nq]
      dp = p.cwiseProduct(dp.rowwise() - delta) * scale;  // dS, with the score's scale folded in
      cols_mut<T>(gq + q0 * ld, d, nq, Eigen::OuterStride<>(ld)).noalias() += K * dp;
      dk.noalias() += Q * dp.transpose();
    }
    cols_mut<T>(gk + k0 * ld, d, nk, Eigen::OuterStride<>(ld)) += dk;
    cols_mut<T>(gv + k0 * ld, d, nk, Eigen::OuterStride<>(ld)) += dv;
  }
}
}  // namespace detail

// Forward over every (sample, head); lse may be null (no backward will follow).
template <class T>
void causal_attention(std::int64_t heads, std::int64_t d, std::int64_t seq, std::int64_t batch, T const* qkv, T* out, T* lse) {
  const std::int64_t w = heads * d, ld = 3 * w;
  thread_pool::instance().parallel_for(static_cast<int>(heads * batch), [&](int task) {
    const std::int64_t b = task / heads, h = task % heads;
    T const* base = qkv + b * seq * ld + h * d;
    detail::attention_head<T>(d, seq, ld, base, base + w, base + 2 * w, out + b * seq * w + h * d, w,
                              lse ? lse + b * seq * heads + h : nullptr, heads);
  });
}

// The backward: adds the gradient of qkv (for the loss whose gradient of out is gout) into gqkv.
template <class T>
void causal_attention_backward(std::int64_t heads, std::int64_t d, std::int64_t seq, std::int64_t batch, T const* qkv, T const* out,
                               T const* lse, T const* gout, T* gqkv) {
  const std::int64_t w = heads * d, ld = 3 * w;
  thread_pool::instance().parallel_for(static_cast<int>(heads * batch), [&](int task) {
    const std::int64_t b = task / heads, h = task % heads;
    const std::int64_t in = b * seq * ld + h * d, at = b * seq * w + h * d;
    detail::attention_head_backward<T>(d, seq, ld, qkv + in, qkv + in + w, qkv + in + 2 * w, out + at, gout + at, w,
                                       lse + b * seq * heads + h, heads, gqkv + in, gqkv + in + w, gqkv + in + 2 * w);
  });
}

#if NITRO_RUNTIME_EXTERN
// Compiled once, in nitro::runtime (src/runtime.cpp), as the kernels table reaches both types.
extern template void causal_attention<float>(std::int64_t, std::int64_t, std::int64_t, std::int64_t, float const*, float*, float*);
extern template void causal_attention<double>(std::int64_t, std::int64_t, std::int64_t, std::int64_t, double const*, double*, double*);
extern template void causal_attention_backward<float>(std::int64_t, std::int64_t, std::int64_t, std::int64_t, float const*, float const*,
                                                      float const*, float const*, float*);
extern template void causal_attention_backward<double>(std::int64_t, std::int64_t, std::int64_t, std::int64_t, double const*,
                                                       double const*, double const*, double const*, double*);
#endif

}  // namespace nitro::cpu
