// nitro/tensor/ops/attention.hpp — causal multi-head self-attention as one differentiable op.
//
//   basic_tensor<T> a = nitro::causal_attention(qkv, heads);   // qkv [3 W, T, B] -> a [W, T, B]
//
// qkv stacks the queries, keys and values (rows [0, W), [W, 2W), [2W, 3W)), W = heads * head_dim;
// token t of sample b attends to tokens 0..t of b with weights softmax(q.k / sqrt(head_dim)). The
// backend's kernels compute it (device_ops::causal_attention: on the CPU in tiles, never the T x T
// scores); the op keeps each query's log-sum-exp in the step's arena for its backward. Inside a
// decode_scope (tensor/decode.hpp) it decodes instead: the new tokens attend to the cached ones.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/decode.hpp"
#include "nitro/tensor/detail/record.hpp"

#include <cmath>    // exp, sqrt
#include <cstdint>  // int64_t
#include <string>   // messages
#include <vector>   // decoding scores

namespace nitro {

namespace detail {
// Inside a decode_scope: the new tokens' keys and values join the slot's, and each new token
// attends to every cached one and to the new ones up to itself. One sequence; no gradient.
template <class T>
basic_tensor<T> decode_attention(basic_tensor<T> const& qkv, std::int64_t heads, decode_cache& cache) {
  const std::int64_t w = qkv.size(0) / 3, d = w / heads, seq = qkv.size(1);
  if (qkv.rank() == 3 && qkv.size(2) != 1)
    throw error("E-SHAPE-017", "causal_attention while decoding takes one sequence, got a batch of " + std::to_string(qkv.size(2)),
                "decode one sequence at a time");
  const std::int64_t past = cache.length(), total = past + seq;
  decode_cache::slot s = cache.next_slot(w, total);
  double* keys = s.keys->data();
  double* values = s.values->data();
  T const* in = qkv.data();
  for (std::int64_t t = 0; t < seq; ++t)
    for (std::int64_t r = 0; r < w; ++r) {
      keys[r + w * (past + t)] = static_cast<double>(in[w + r + 3 * w * t]);
      values[r + w * (past + t)] = static_cast<double>(in[2 * w + r + 3 * w * t]);
    }
  shape out_shape = qkv.shape();
  out_shape[0] = w;
  basic_tensor<T> out = basic_tensor<T>::empty(out_shape);
  thread_local std::vector<double> score;
  score.resize(static_cast<std::size_t>(total));
  const double scale = 1.0 / std::sqrt(double(d));
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t t = 0; t < seq; ++t) {
      T const* q = in + h * d + 3 * w * t;
      const std::int64_t seen = past + t + 1;
      double m = -1e300, sum = 0;
      for (std::int64_t j = 0; j < seen; ++j) {
        double z = 0;
        for (std::int64_t e = 0; e < d; ++e) z += double(q[e]) * keys[h * d + e + w * j];
        score[std::size_t(j)] = z * scale;
        m = z * scale > m ? z * scale : m;
      }
      for (std::int64_t j = 0; j < seen; ++j) sum += (score[std::size_t(j)] = std::exp(score[std::size_t(j)] - m));
      T* o = out.data() + h * d + w * t;
      for (std::int64_t e = 0; e < d; ++e) {
        double acc = 0;
        for (std::int64_t j = 0; j < seen; ++j) acc += score[std::size_t(j)] * values[h * d + e + w * j];
        o[e] = static_cast<T>(acc / sum);
      }
    }
  return out;
}
}  // namespace detail

template <class T>
basic_tensor<T> causal_attention(basic_tensor<T> const& qkv, std::int64_t heads) {
  using namespace nitro::detail;
  const std::int64_t rows = qkv.rank() == 0 ? 1 : qkv.size(0);
  if (qkv.rank() < 2 || qkv.rank() > 3 || heads < 1 || rows % (3 * heads) != 0)
    throw error("E-SHAPE-017",
                "causal_attention(qkv, " + std::to_string(heads) + " heads) takes qkv [3 * heads * head_dim, seq, batch], got shape " +
                    qkv.shape().to_string(),
                "stack the queries, keys and values of every head along the first extent (a dense<W, 3 W> over [W, seq, batch])");
  const std::int64_t w = rows / 3, d = w / heads;
  const std::int64_t seq = qkv.size(1), batch = qkv.rank() == 3 ? qkv.size(2) : 1;
  if (d > cpu::max_head_dim)
    throw error("E-SHAPE-017",
                "causal_attention: head_dim " + std::to_string(d) + " is above the " + std::to_string(cpu::max_head_dim) +
                    " the kernels hold in a tile",
                "use more heads (head_dim = width / heads)");
  if (decode_cache* cache = current_decode()) return detail::decode_attention(qkv, heads, *cache);
  const bool grad = needs_grad(qkv);
  basic_tensor<T> out = make_output<T>(qkv.rank() == 3 ? shape{w, seq, batch} : shape{w, seq}, grad);
  T* lse = grad ? active_tape().memory().template allocate_n<T>(static_cast<std::size_t>(heads * seq * batch)) : nullptr;
  active_ops().causal_attention(heads, d, seq, batch, qkv.data(), out.data(), lse);
  if (grad) {
    T const* in = qkv.data();
    T const* o = out.data();
    int iv = qkv.var(), ov = out.var();
    active_tape().record([=](tape& t) {
      T const* go = t.grad_if_any<T>(ov);
      if (!go) return;
      active_ops().causal_attention_backward(heads, d, seq, batch, in, o, lse, go, t.grad<T>(iv));
    });
  }
  return out;
}

}  // namespace nitro
