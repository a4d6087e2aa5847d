// nitro/tensor/ops/softmax.hpp — softmax and log-softmax over the first (feature) dimension, on the
// step's kernels (device_ops::softmax).
#pragma once

#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/detail/record.hpp"
#include "nitro/tensor/reduction.hpp"

namespace nitro {

namespace detail {
template <class T>
basic_tensor<T> softmax_of(bool log, basic_tensor<T> const& x) {
  const reduction r = columns_of(x.shape());
  basic_tensor<T> y = make_output<T>(x.shape(), needs_grad(x));
  device_ops* ops = &active_ops();
  ops->softmax(log, r.extent, r.outer, x.data(), y.data());
  if (y.requires_grad()) {
    T const* yd = y.data();
    int xv = x.var(), yv = y.var();
    active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      ops->softmax_backward(log, r.extent, r.outer, yd, gy, t.grad<T>(xv));
    });
  }
  return y;
}
}  // namespace detail

template <class T> basic_tensor<T> softmax(basic_tensor<T> const& x) { return detail::softmax_of(false, x); }
template <class T> basic_tensor<T> log_softmax(basic_tensor<T> const& x) { return detail::softmax_of(true, x); }

}  // namespace nitro
