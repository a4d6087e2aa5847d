// nitro/kernels/attention.cuh — causal multi-head self-attention on the GPU: the CUDA side of
// device_ops::causal_attention and causal_attention_backward.
//
//   nitro::cuda::causal_attention<float>(stream, heads, head_dim, seq, batch, qkv, out, lse);
//   nitro::cuda::causal_attention_backward<float>(stream, heads, head_dim, seq, batch, qkv, out, lse, gout, gqkv);
//
// The layout is the CPU's (tensor/cpu/attention.hpp): qkv [3 W, seq, batch] with W = heads *
// head_dim (queries, keys, values stacked), out [W, seq, batch], lse [heads, seq, batch]; scores
// q.k / sqrt(head_dim), query i seeing keys 0..i. One warp per query (forward, and the query's
// gradient) or per key (the key's and value's gradients): each lane holds head_dim / 32 of the
// row in registers, dot products are butterfly sums (every lane ends with the same bits), and
// the forward keeps a running maximum and sum (the online softmax), so the seq x seq scores are
// never stored. The backward rebuilds each probability from lse. Every gradient row is written by
// one warp summing in a fixed order: no atomics, the same bits on every run. head_dim is at most
// max_head_dim (256), as on the CPU.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/kernels/reduction.cuh"  // warp_sum
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/elementwise.hpp"

#include <cuda_runtime.h>

#include <cmath>    // INFINITY
#include <cstdint>  // int64_t
#include <string>   // messages

namespace nitro::cuda {

namespace detail {

constexpr int attention_lanes = 32, attention_per_lane = 8;  // head_dim <= 32 * 8
constexpr int attention_warps = 4;                             // warps (rows) per block

// Lane `lane`'s share of a head_dim row: elements lane, lane + 32, ...
template <class T>
__device__ inline void load_row(T (&r)[attention_per_lane], T const* p, std::int64_t d, int lane, T scale) {
#pragma unroll
  for (int u = 0; u < attention_per_lane; ++u) {
    const std::int64_t t = lane + std::int64_t(u) * attention_lanes;
    r[u] = t < d ? p[t] * scale : T(0);
  }
}
template <class T>
__device__ inline T dot_row(T const (&r)[attention_per_lane], T const* p, std::int64_t d, int lane) {
  T s = T(0);
#pragma unroll
  for (int u = 0; u < attention_per_lane; ++u) {
    const std::int64_t t = lane + std::int64_t(u) * attention_lanes;
    if (t < d) s += r[u] * p[t];
  }
  return warp_sum(s);
}
template <class T>
__device__ inline void add_row(T* p, T const (&r)[attention_per_lane], std::int64_t d, int lane) {
#pragma unroll
  for (int u = 0; u < attention_per_lane; ++u) {
    const std::int64_t t = lane + std::int64_t(u) * attention_lanes;
    if (t < d) p[t] += r[u];
  }
}

// Which (sample, head, position) this warp owns; false past the last.
struct attention_row {
  std::int64_t b, h, i;
};
__device__ inline bool row_of(std::int64_t heads, std::int64_t seq, std::int64_t batch, attention_row& r) {
  const std::int64_t warp = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / attention_lanes;
  if (warp >= heads * seq * batch) return false;
  r.i = warp % seq;
  r.h = (warp / seq) % heads;
  r.b = warp / (seq * heads);
  return true;
}

// What every kernel derives from its row: the lane, the widths, the scale, and the sample's first
// column of qkv at this head's rows.
template <class T>
struct attention_frame {
  int lane;
  std::int64_t w, ld;
  T scale;
  T const* col;
  __device__ attention_frame(std::int64_t heads, std::int64_t d, std::int64_t seq, attention_row const& r, T const* qkv)
      : lane(static_cast<int>(threadIdx.x % attention_lanes)),
        w(heads * d),
        ld(3 * heads * d),
        scale(T(1) / elementwise::sqrt_(T(d))),
        col(qkv + r.b * seq * 3 * heads * d + r.h * d) {}
};

template <class T>
__global__ void attention_forward_kernel(std::int64_t heads, std::int64_t d, std::int64_t seq, std::int64_t batch, T const* qkv, T* out,
                                         T* lse) {
  attention_row r;
  if (!row_of(heads, seq, batch, r)) return;  // the whole warp: rows are per warp
  const auto [lane, w, ld, scale, col] = attention_frame<T>(heads, d, seq, r, qkv);
  T q[attention_per_lane], acc[attention_per_lane] = {};
  load_row(q, col + r.i * ld, d, lane, scale);
  T m = T(-INFINITY), l = T(0);
  for (std::int64_t j = 0; j <= r.i; ++j) {
    T const* key = col + j * ld + w;
    const T s = dot_row(q, key, d, lane);
    const T m_new = s > m ? s : m;
    const T keep = elementwise::exp_(m - m_new), p = elementwise::exp_(s - m_new);  // exp(-inf) = 0 at j = 0
    l = l * keep + p;
    T const* value = key + w;
#pragma unroll
    for (int u = 0; u < attention_per_lane; ++u) {
      const std::int64_t t = lane + std::int64_t(u) * attention_lanes;
      acc[u] = acc[u] * keep + (t < d ? p * value[t] : T(0));
    }
    m = m_new;
  }
  T* o = out + (r.b * seq + r.i) * w + r.h * d;
#pragma unroll
  for (int u = 0; u < attention_per_lane; ++u) {
    const std::int64_t t = lane + std::int64_t(u) * attention_lanes;
    if (t < d) o[t] = acc[u] / l;
  }
  if (lse && lane == 0) lse[(r.b * seq + r.i) * heads + r.h] = m + elementwise::log_(l);
}

// The query's gradient: dq_i = scale sum_{j <= i} p_ij (go_i . v_j - go_i . o_i) k_j.
template <class T>
__global__ void attention_query_grad_kernel(std::int64_t heads, std::int64_t d, std::int64_t seq, std::int64_t batch, T const* qkv,
                                            T const* out, T const* lse, T const* gout, T* gqkv) {
  attention_row r;
  if (!row_of(heads, seq, batch, r)) return;
  const auto [lane, w, ld, scale, col] = attention_frame<T>(heads, d, seq, r, qkv);
  const std::int64_t at = (r.b * seq + r.i) * w + r.h * d;
  T q[attention_per_lane], go[attention_per_lane], dq[attention_per_lane] = {};
  load_row(q, col + r.i * ld, d, lane, scale);
  load_row(go, gout + at, d, lane, T(1));
  const T delta = dot_row(go, out + at, d, lane);
  const T lrow = lse[(r.b * seq + r.i) * heads + r.h];
  for (std::int64_t j = 0; j <= r.i; ++j) {
    T const* key = col + j * ld + w;
    const T p = elementwise::exp_(dot_row(q, key, d, lane) - lrow);
    const T ds = p * (dot_row(go, key + w, d, lane) - delta) * scale;
#pragma unroll
    for (int u = 0; u < attention_per_lane; ++u) {
      const std::int64_t t = lane + std::int64_t(u) * attention_lanes;
      if (t < d) dq[u] += ds * key[t];
    }
  }
  add_row(gqkv + r.b * seq * ld + r.i * ld + r.h * d, dq, d, lane);
}

// The key's and value's gradients: dv_j = sum_{i >= j} p_ij go_i, dk_j = scale sum_{i >= j} ds_ij q_i.
template <class T>
__global__ void attention_key_grad_kernel(std::int64_t heads, std::int64_t d, std::int64_t seq, std::int64_t batch, T const* qkv,
                                          T const* out, T const* lse, T const* gout, T* gqkv) {
  attention_row r;
  if (!row_of(heads, seq, batch, r)) return;
  const auto [lane, w, ld, scale, col] = attention_frame<T>(heads, d, seq, r, qkv);
  const std::int64_t j = r.i;
  T k[attention_per_lane], v[attention_per_lane], dk[attention_per_lane] = {}, dv[attention_per_lane] = {};
  load_row(k, col + j * ld + w, d, lane, scale);  // scale folded into the key: s = q . (scale k)
  load_row(v, col + j * ld + 2 * w, d, lane, T(1));
  for (std::int64_t i = j; i < seq; ++i) {
    T const* query = col + i * ld;
    const std::int64_t at = (r.b * seq + i) * w + r.h * d;
    const T p = elementwise::exp_(dot_row(k, query, d, lane) - lse[(r.b * seq + i) * heads + r.h]);
    T go_row[attention_per_lane];
    load_row(go_row, gout + at, d, lane, T(1));
    const T delta = dot_row(go_row, out + at, d, lane);  // go_i . o_i, summed as the query kernel sums it
    T gv = T(0);
#pragma unroll
    for (int u = 0; u < attention_per_lane; ++u) gv += go_row[u] * v[u];
    const T ds = p * (warp_sum(gv) - delta) * scale;
#pragma unroll
    for (int u = 0; u < attention_per_lane; ++u) {
      const std::int64_t t = lane + std::int64_t(u) * attention_lanes;
      if (t < d) {
        dv[u] += p * go_row[u];
        dk[u] += ds * query[t];
      }
    }
  }
  T* g = gqkv + r.b * seq * ld + j * ld + r.h * d;
  add_row(g + w, dk, d, lane);
  add_row(g + 2 * w, dv, d, lane);
}

inline unsigned attention_blocks(std::int64_t rows) noexcept {
  return static_cast<unsigned>((rows + attention_warps - 1) / attention_warps);
}

inline void check_head_dim(std::int64_t d) {
  if (d > attention_lanes * attention_per_lane)
    throw error("E-SHAPE-017", "causal_attention: head_dim " + std::to_string(d) + " is above the 256 the kernels hold in registers",
                "use more heads (head_dim = width / heads)");
}

}  // namespace detail

template <class T>
void causal_attention(cudaStream_t s, std::int64_t heads, std::int64_t d, std::int64_t seq, std::int64_t batch, T const* qkv, T* out,
                      T* lse) {
  const std::int64_t rows = heads * seq * batch;
  if (rows <= 0 || d <= 0) return;
  detail::check_head_dim(d);
  detail::attention_forward_kernel<T><<<detail::attention_blocks(rows), detail::attention_warps * detail::attention_lanes, 0, s>>>(
      heads, d, seq, batch, qkv, out, lse);
  check_launch("nitro::cuda::causal_attention");
}

template <class T>
void causal_attention_backward(cudaStream_t s, std::int64_t heads, std::int64_t d, std::int64_t seq, std::int64_t batch, T const* qkv,
                               T const* out, T const* lse, T const* gout, T* gqkv) {
  const std::int64_t rows = heads * seq * batch;
  if (rows <= 0 || d <= 0) return;
  detail::check_head_dim(d);
  const unsigned blocks = detail::attention_blocks(rows), threads = detail::attention_warps * detail::attention_lanes;
  detail::attention_query_grad_kernel<T><<<blocks, threads, 0, s>>>(heads, d, seq, batch, qkv, out, lse, gout, gqkv);
  check_launch("nitro::cuda::causal_attention_backward (queries)");
  detail::attention_key_grad_kernel<T><<<blocks, threads, 0, s>>>(heads, d, seq, batch, qkv, out, lse, gout, gqkv);
  check_launch("nitro::cuda::causal_attention_backward (keys, values)");
}

}  // namespace nitro::cuda
