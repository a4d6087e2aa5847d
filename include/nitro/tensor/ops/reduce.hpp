// nitro/tensor/ops/reduce.hpp — differentiable reductions: sum, mean, along one dimension or all,
// logsumexp and max over the first (feature) dimension, argmax.
//
// A reduction along dimension d keeps it with extent 1, so the result broadcasts back against its
// input. Reducing everything gives a scalar (rank 0, one element). Each runs on the step's kernels
// (device_ops::reduce; tensor/reduction.hpp names them).
#pragma once

#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/detail/record.hpp"
#include "nitro/tensor/ops/elementwise.hpp"  // mean: a sum, scaled
#include "nitro/tensor/reduction.hpp"

#include <cstdint>  // int64_t

namespace nitro {

namespace detail {
// y = op over r of x, y of shape `out`, recorded with its backward.
template <class T>
basic_tensor<T> reduce(reduce_op op, basic_tensor<T> const& x, reduction r, shape out) {
  const bool grad = op != reduce_op::argmax && needs_grad(x);
  basic_tensor<T> y = make_output<T>(out, grad);
  device_ops* ops = &active_ops();
  ops->reduce(op, r, x.data(), y.data());
  if (grad) {
    T const* xd = x.data();
    T const* yd = y.data();
    int xv = x.var(), yv = y.var();
    active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      ops->reduce_backward(op, r, xd, yd, gy, t.grad<T>(xv));
    });
  }
  return y;
}
// The shape of a reduction over the first dimension: [1, ...] (a scalar's is [1]).
inline shape first_reduced(shape s) {
  if (s.rank() == 0) s = shape{1};
  s[0] = 1;
  return s;
}
}  // namespace detail

// Sum of every element: a scalar.
template <class T>
basic_tensor<T> sum(basic_tensor<T> const& x) {
  return detail::reduce(reduce_op::sum, x, reduction{1, x.numel(), 1}, shape{});
}
template <class T>
basic_tensor<T> mean(basic_tensor<T> const& x) {
  return sum(x) * (T(1) / static_cast<T>(x.numel() == 0 ? 1 : x.numel()));
}

// Sum along dimension d (kept, with extent 1).
template <class T>
basic_tensor<T> sum(basic_tensor<T> const& x, int dim) {
  const int d = normalize_dim(x.shape(), dim, "sum(x, dim)");
  shape out = x.shape();
  out[d] = 1;
  return detail::reduce(reduce_op::sum, x, reduction_at(x.shape(), d), out);
}
template <class T>
basic_tensor<T> mean(basic_tensor<T> const& x, int dim) {
  const int d = normalize_dim(x.shape(), dim, "mean(x, dim)");
  return sum(x, d) * (T(1) / static_cast<T>(x.shape()[d] == 0 ? 1 : x.shape()[d]));
}

// log(sum(exp(x), dim 0)), stable; the gradient is softmax.
template <class T>
basic_tensor<T> logsumexp(basic_tensor<T> const& x) {
  return detail::reduce(reduce_op::logsumexp, x, columns_of(x.shape()), detail::first_reduced(x.shape()));
}

// Index of the largest value along dimension 0, per column, as values (0-based) of shape [1, ...].
// Not differentiable.
template <class T>
basic_tensor<T> argmax(basic_tensor<T> const& x) {
  return detail::reduce(reduce_op::argmax, x, columns_of(x.shape()), detail::first_reduced(x.shape()));
}

// Largest value along dimension 0, per column; the gradient goes to the (first) largest.
template <class T>
basic_tensor<T> max(basic_tensor<T> const& x) {
  return detail::reduce(reduce_op::max, x, columns_of(x.shape()), detail::first_reduced(x.shape()));
}

}  // namespace nitro
