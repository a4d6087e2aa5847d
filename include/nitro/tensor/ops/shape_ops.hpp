// nitro/tensor/ops/shape_ops.hpp — reshaping, flattening, slicing the batch, concatenating
// features: the operations that move or view data without arithmetic (the copies on the step's
// kernels, device_ops::copy).
#pragma once

#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/detail/record.hpp"

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
  const std::int64_t n = f * (end - begin);
  device_ops* ops = &detail::active_ops();
  ops->copy(n, 1, x.data() + begin * f, n, y.data(), n, false);
  if (y.requires_grad()) {
    int xv = x.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      ops->copy(n, 1, gy, n, t.grad<T>(xv) + begin * f, n, true);
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
  device_ops* ops = &detail::active_ops();
  ops->copy(fa, B, a.data(), fa, y.data(), fa + fb, false);
  ops->copy(fb, B, b.data(), fb, y.data() + fa, fa + fb, false);
  if (y.requires_grad()) {
    int av = a.var(), bv = b.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      if (av >= 0) ops->copy(fa, B, gy, fa + fb, t.grad<T>(av), fa, true);
      if (bv >= 0) ops->copy(fb, B, gy + fa, fa + fb, t.grad<T>(bv), fb, true);
    });
  }
  return y;
}

}  // namespace nitro
