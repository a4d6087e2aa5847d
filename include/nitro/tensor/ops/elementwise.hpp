// nitro/tensor/ops/elementwise.hpp — differentiable element-wise operations.
//
// Unary maps (exp, log, relu, gelu, ...), binary arithmetic with broadcasting, and arithmetic with
// scalars. Broadcasting aligns extents from the FIRST dimension (column-major, batch last, as in
// Julia): a bias [F] meets activations [F, B]; a per-sample weight [1, B] meets [F, B]; missing
// trailing extents count as 1. Gradients of a broadcast input are summed over the broadcast extents.
#pragma once

#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/detail/record.hpp"
#include "nitro/tensor/elementwise.hpp"

#include <cstdint>  // int64_t

namespace nitro {

namespace detail {

// y = op(x) on the step's kernels; the backward's kernels are the ones the step had.
template <class T>
basic_tensor<T> map(map_op op, basic_tensor<T> const& x, T a = T(0), T b = T(0)) {
  basic_tensor<T> y = make_output<T>(x.shape(), needs_grad(x));
  const std::int64_t n = x.numel();
  device_ops* ops = &active_ops();
  ops->map(op, n, a, b, x.data(), y.data());
  if (y.requires_grad()) {
    T const* xd = x.data();
    T const* yd = y.data();
    int xv = x.var(), yv = y.var();
    active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      ops->map_backward(op, n, a, b, xd, yd, gy, t.grad<T>(xv));
    });
  }
  return y;
}

template <class T>
basic_tensor<T> binary(binop op, basic_tensor<T> const& a, basic_tensor<T> const& b) {
  const bool grad = !is_comparison(op) && needs_grad(a, b);
  const broadcast_plan p = plan_broadcast(a.shape(), b.shape(), to_string(op));
  basic_tensor<T> y = make_output<T>(p.out, grad);
  device_ops* ops = &active_ops();
  ops->binary(op, p, a.data(), b.data(), y.data());
  if (grad) {
    T const* ad = a.data();
    T const* bd = b.data();
    int av = a.var(), bv = b.var(), yv = y.var();
    active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      ops->binary_backward(op, p, ad, bd, gy, av >= 0 ? t.grad<T>(av) : nullptr, bv >= 0 ? t.grad<T>(bv) : nullptr);
    });
  }
  return y;
}

template <class T>
basic_tensor<T> affine(basic_tensor<T> const& x, T alpha, T beta) { return map(map_op::affine, x, alpha, beta); }

}  // namespace detail

// ---- the public operations --------------------------------------------------------------------
template <class T> basic_tensor<T> exp(basic_tensor<T> const& x) { return detail::map(map_op::exp, x); }
template <class T> basic_tensor<T> log(basic_tensor<T> const& x) { return detail::map(map_op::log, x); }
template <class T> basic_tensor<T> sqrt(basic_tensor<T> const& x) { return detail::map(map_op::sqrt, x); }
template <class T> basic_tensor<T> square(basic_tensor<T> const& x) { return detail::map(map_op::square, x); }
template <class T> basic_tensor<T> abs(basic_tensor<T> const& x) { return detail::map(map_op::abs, x); }
template <class T> basic_tensor<T> relu(basic_tensor<T> const& x) { return detail::map(map_op::relu, x); }
template <class T> basic_tensor<T> sigmoid(basic_tensor<T> const& x) { return detail::map(map_op::sigmoid, x); }
template <class T> basic_tensor<T> tanh(basic_tensor<T> const& x) { return detail::map(map_op::tanh, x); }
template <class T> basic_tensor<T> softplus(basic_tensor<T> const& x) { return detail::map(map_op::softplus, x); }
template <class T> basic_tensor<T> gelu(basic_tensor<T> const& x) { return detail::map(map_op::gelu, x); }

template <class T> basic_tensor<T> operator-(basic_tensor<T> const& x) { return detail::affine(x, T(-1), T(0)); }
template <class T> basic_tensor<T> operator+(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary(binop::add, a, b); }
template <class T> basic_tensor<T> operator-(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary(binop::sub, a, b); }
template <class T> basic_tensor<T> operator*(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary(binop::mul, a, b); }
template <class T> basic_tensor<T> operator/(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary(binop::div, a, b); }
template <class T> basic_tensor<T> maximum(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary(binop::max, a, b); }
template <class T> basic_tensor<T> minimum(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary(binop::min, a, b); }

template <class T> basic_tensor<T> operator+(basic_tensor<T> const& x, std::type_identity_t<T> s) { return detail::affine(x, T(1), s); }
template <class T> basic_tensor<T> operator+(std::type_identity_t<T> s, basic_tensor<T> const& x) { return detail::affine(x, T(1), s); }
template <class T> basic_tensor<T> operator-(basic_tensor<T> const& x, std::type_identity_t<T> s) { return detail::affine(x, T(1), -s); }
template <class T> basic_tensor<T> operator-(std::type_identity_t<T> s, basic_tensor<T> const& x) { return detail::affine(x, T(-1), s); }
template <class T> basic_tensor<T> operator*(basic_tensor<T> const& x, std::type_identity_t<T> s) { return detail::affine(x, s, T(0)); }
template <class T> basic_tensor<T> operator*(std::type_identity_t<T> s, basic_tensor<T> const& x) { return detail::affine(x, s, T(0)); }
template <class T> basic_tensor<T> operator/(basic_tensor<T> const& x, std::type_identity_t<T> s) { return detail::affine(x, T(1) / s, T(0)); }
template <class T> basic_tensor<T> operator/(std::type_identity_t<T> s, basic_tensor<T> const& x) { return detail::map(map_op::rdiv, x, s); }

// x^p for a constant p
template <class T>
basic_tensor<T> pow(basic_tensor<T> const& x, std::type_identity_t<T> p) { return detail::map(map_op::pow, x, p); }

// Values clamped to [lo, hi]; the gradient passes where x is inside.
template <class T>
basic_tensor<T> clamp(basic_tensor<T> const& x, std::type_identity_t<T> lo, std::type_identity_t<T> hi) {
  return detail::map(map_op::clamp, x, lo, hi);
}

// ---- comparisons: 0/1 values, never differentiable ---------------------------------------------
template <class T> basic_tensor<T> operator==(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary(binop::eq, a, b); }
template <class T> basic_tensor<T> operator!=(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary(binop::ne, a, b); }
template <class T> basic_tensor<T> operator<(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary(binop::lt, a, b); }
template <class T> basic_tensor<T> operator>(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary(binop::gt, a, b); }

}  // namespace nitro
