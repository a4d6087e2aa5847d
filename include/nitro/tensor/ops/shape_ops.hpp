// nitro/tensor/ops/shape_ops.hpp — reshaping, flattening, slicing the batch, concatenating
// features: the operations that move or view data without arithmetic.
#pragma once

#include "nitro/tensor/detail/record.hpp"

#include <cstring>  // memcpy

namespace nitro {

// [d0, ..., dn-1, B] -> [d0*...*dn-1, B], sharing memory and gradient.
template <class T>
basic_tensor<T> flatten(basic_tensor<T> const& x) {
  if (x.rank() <= 2) return x;
  return x.reshape(shape{x.features(), x.batch()});
}

template <class T>
basic_tensor<T> reshape(basic_tensor<T> const& x, shape s) { return x.reshape(s); }

// Samples [begin, end) of the batch: a copy (so the gradient lands back in the right columns).
template <class T>
basic_tensor<T> slice_batch(basic_tensor<T> const& x, std::int64_t begin, std::int64_t end) {
  if (begin < 0 || end > x.batch() || begin > end)
    throw error("E-SHAPE-010", "slice_batch: [" + std::to_string(begin) + ", " + std::to_string(end) + ") is outside a batch of " + std::to_string(x.batch()),
                "pass 0 <= begin <= end <= batch");
  const std::int64_t f = x.rank() <= 1 ? 1 : x.features();
  basic_tensor<T> y = detail::make_output<T>(x.shape().with_last(end - begin), detail::needs_grad(x));
  std::memcpy(y.data(), x.data() + begin * f, sizeof(T) * static_cast<std::size_t>(f * (end - begin)));
  if (y.requires_grad()) {
    int xv = x.var(), yv = y.var();
    const std::int64_t n = f * (end - begin);
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      detail::flat(t.grad<T>(xv) + begin * f, n) += detail::flat(gy, n);
    });
  }
  return y;
}

// Stack two [Fa, B] and [Fb, B] tensors into [Fa + Fb, B].
template <class T>
basic_tensor<T> concat_features(basic_tensor<T> const& a, basic_tensor<T> const& b) {
  if (a.batch() != b.batch())
    throw error("E-SHAPE-011", "concat_features: batches of " + std::to_string(a.batch()) + " and " + std::to_string(b.batch()) + " differ",
                "concatenate tensors with the same last extent");
  const std::int64_t fa = a.features(), fb = b.features(), B = a.batch();
  basic_tensor<T> y = detail::make_output<T>(shape{fa + fb, B}, detail::needs_grad(a, b));
  detail::mat_map<T>(y.data(), fa + fb, B).topRows(fa) = detail::cmat_map<T>(a.data(), fa, B);
  detail::mat_map<T>(y.data(), fa + fb, B).bottomRows(fb) = detail::cmat_map<T>(b.data(), fb, B);
  if (y.requires_grad()) {
    int av = a.var(), bv = b.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      auto G = detail::cmat_map<T>(gy, fa + fb, B);
      if (av >= 0) detail::mat_map<T>(t.grad<T>(av), fa, B) += G.topRows(fa);
      if (bv >= 0) detail::mat_map<T>(t.grad<T>(bv), fb, B) += G.bottomRows(fb);
    });
  }
  return y;
}

}  // namespace nitro
