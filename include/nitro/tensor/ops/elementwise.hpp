// nitro/tensor/ops/elementwise.hpp — differentiable element-wise operations.
//
// Unary maps (exp, log, relu, gelu, ...), binary arithmetic with broadcasting, and arithmetic with
// scalars. Broadcasting aligns extents from the FIRST dimension (column-major, batch last, as in
// Julia): a bias [F] meets activations [F, B]; a per-sample weight [1, B] meets [F, B]; missing
// trailing extents count as 1. Gradients of a broadcast input are summed over the broadcast extents.
#pragma once

#include "nitro/tensor/detail/record.hpp"

#include <unsupported/Eigen/SpecialFunctions>  // erf for the exact GELU

#include <array>    // strides
#include <cmath>    // scalar math
#include <cstdint>  // int64_t

namespace nitro {

namespace detail {

// A unary op: forward as an Eigen array expression, derivative dy/dx from (x, y).
#define NITRO_DETAIL_UNARY(name, forward_expr, derivative_expr)                              \
  struct name##_fn {                                                                         \
    template <class X> static auto f(X const& x) { return forward_expr; }                    \
    template <class X, class Y> static auto df(X const& x, Y const& y) {                     \
      (void)x; (void)y;                                                                      \
      return derivative_expr;                                                                \
    }                                                                                        \
  };

using std::sqrt;
NITRO_DETAIL_UNARY(neg, -x, x * 0 - 1)
NITRO_DETAIL_UNARY(exp, x.exp(), y)
NITRO_DETAIL_UNARY(log, x.log(), x.inverse())
NITRO_DETAIL_UNARY(sqrt, x.sqrt(), y.inverse() * typename X::Scalar(0.5))
NITRO_DETAIL_UNARY(square, x.square(), x * typename X::Scalar(2))
NITRO_DETAIL_UNARY(abs, x.abs(), x.sign())
NITRO_DETAIL_UNARY(relu, x.max(typename X::Scalar(0)), (x > typename X::Scalar(0)).template cast<typename X::Scalar>())
NITRO_DETAIL_UNARY(sigmoid, x.logistic(), y * (typename X::Scalar(1) - y))
NITRO_DETAIL_UNARY(tanh, x.tanh(), typename X::Scalar(1) - y.square())
NITRO_DETAIL_UNARY(softplus, (x.max(typename X::Scalar(0)) + (-(x.abs())).exp().log1p()), x.logistic())
// exact GELU, x * Phi(x), as torch.nn.GELU()
NITRO_DETAIL_UNARY(gelu,
                   x * (typename X::Scalar(1) + (x * typename X::Scalar(0.70710678118654752440)).erf()) * typename X::Scalar(0.5),
                   (typename X::Scalar(1) + (x * typename X::Scalar(0.70710678118654752440)).erf()) * typename X::Scalar(0.5) +
                       x * (x.square() * typename X::Scalar(-0.5)).exp() * typename X::Scalar(0.39894228040143267794))
#undef NITRO_DETAIL_UNARY

template <class Fn, class T>
basic_tensor<T> unary(basic_tensor<T> const& x) {
  basic_tensor<T> y = make_output<T>(x.shape(), needs_grad(x));
  const std::int64_t n = x.numel();
  flat(y.data(), n) = Fn::f(flat(x.data(), n));
  if (y.requires_grad()) {
    T const* xd = x.data();
    T const* yd = y.data();
    int xv = x.var(), yv = y.var();
    active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      flat(t.grad<T>(xv), n) += flat(gy, n) * Fn::df(flat(xd, n), flat(yd, n));
    });
  }
  return y;
}

// ---- broadcasting -----------------------------------------------------------------------------
struct broadcast_plan {
  shape out;
  std::array<std::int64_t, shape::max_rank> sa{}, sb{};  // strides (0 where broadcast)
};

inline broadcast_plan plan_broadcast(shape const& a, shape const& b, char const* op) {
  broadcast_plan p;
  int r = a.rank() > b.rank() ? a.rank() : b.rank();
  std::array<std::int64_t, shape::max_rank> ext{};
  std::int64_t stride_a = 1, stride_b = 1;
  for (int d = 0; d < r; ++d) {
    std::int64_t ea = d < a.rank() ? a[d] : 1, eb = d < b.rank() ? b[d] : 1;
    if (ea != eb && ea != 1 && eb != 1)
      throw error("E-SHAPE-006",
                  std::string(op) + ": shapes " + a.to_string() + " and " + b.to_string() + " do not broadcast (dimension " +
                      std::to_string(d + 1) + ": " + std::to_string(ea) + " vs " + std::to_string(eb) + ")",
                  "extents must match or be 1; nitro aligns extents from the first dimension (batch last)");
    ext[d] = ea > eb ? ea : eb;
    p.sa[d] = ea == 1 ? 0 : stride_a;
    p.sb[d] = eb == 1 ? 0 : stride_b;
    stride_a *= ea;
    stride_b *= eb;
  }
  p.out = shape::from(ext.begin(), ext.begin() + r);
  return p;
}

// Visits every output position with the matching offsets into a and b.
template <class F>
inline void for_each_broadcast(broadcast_plan const& p, F&& f) {
  int r = p.out.rank();
  if (r == 0) { f(0, 0, 0); return; }
  std::array<std::int64_t, shape::max_rank> idx{};
  std::int64_t n = p.out.numel(), ia = 0, ib = 0;
  std::int64_t inner = p.out[0], sa0 = p.sa[0], sb0 = p.sb[0];
  for (std::int64_t o = 0; o < n; o += inner) {
    for (std::int64_t i = 0; i < inner; ++i) f(o + i, ia + i * sa0, ib + i * sb0);
    for (int d = 1; d < r; ++d) {  // odometer over the outer dimensions
      ++idx[d]; ia += p.sa[d]; ib += p.sb[d];
      if (idx[d] < p.out[d]) break;
      ia -= p.sa[d] * p.out[d]; ib -= p.sb[d] * p.out[d]; idx[d] = 0;
    }
  }
}

enum class binop { add, sub, mul, div, max, min };

template <binop Op, class T>
constexpr T apply(T a, T b) noexcept {
  if constexpr (Op == binop::add) return a + b;
  else if constexpr (Op == binop::sub) return a - b;
  else if constexpr (Op == binop::mul) return a * b;
  else if constexpr (Op == binop::div) return a / b;
  else if constexpr (Op == binop::max) return a > b ? a : b;
  else return a < b ? a : b;
}
// d(op)/da and d(op)/db at (a, b)
template <binop Op, class T>
constexpr T dda(T a, T b) noexcept {
  if constexpr (Op == binop::add || Op == binop::sub) return T(1);
  else if constexpr (Op == binop::mul) return b;
  else if constexpr (Op == binop::div) return T(1) / b;
  else if constexpr (Op == binop::max) return a >= b ? T(1) : T(0);
  else return a <= b ? T(1) : T(0);
}
template <binop Op, class T>
constexpr T ddb(T a, T b) noexcept {
  if constexpr (Op == binop::add) return T(1);
  else if constexpr (Op == binop::sub) return T(-1);
  else if constexpr (Op == binop::mul) return a;
  else if constexpr (Op == binop::div) return -a / (b * b);
  else if constexpr (Op == binop::max) return a >= b ? T(0) : T(1);
  else return a <= b ? T(0) : T(1);
}
constexpr char const* binop_name(binop op) noexcept {
  switch (op) {
    case binop::add: return "add"; case binop::sub: return "sub"; case binop::mul: return "mul";
    case binop::div: return "div"; case binop::max: return "maximum"; case binop::min: return "minimum";
  }
  return "?";
}

template <binop Op, class T>
basic_tensor<T> binary(basic_tensor<T> const& a, basic_tensor<T> const& b) {
  const bool grad = needs_grad(a, b);
  if (a.shape() == b.shape()) {  // the common case: no broadcasting, vectorised by Eigen
    basic_tensor<T> y = make_output<T>(a.shape(), grad);
    const std::int64_t n = a.numel();
    auto A = flat(a.data(), n), B = flat(b.data(), n);
    auto Y = flat(y.data(), n);
    if constexpr (Op == binop::add) Y = A + B;
    else if constexpr (Op == binop::sub) Y = A - B;
    else if constexpr (Op == binop::mul) Y = A * B;
    else if constexpr (Op == binop::div) Y = A / B;
    else if constexpr (Op == binop::max) Y = A.max(B);
    else Y = A.min(B);
    if (grad) {
      T const* ad = a.data(); T const* bd = b.data();
      int av = a.var(), bv = b.var(), yv = y.var();
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        auto G = flat(gy, n);
        auto A = flat(ad, n), B = flat(bd, n);
        if (av >= 0) {
          auto GA = flat(t.grad<T>(av), n);
          if constexpr (Op == binop::add || Op == binop::sub) GA += G;
          else if constexpr (Op == binop::mul) GA += G * B;
          else if constexpr (Op == binop::div) GA += G / B;
          else for (std::int64_t i = 0; i < n; ++i) GA[i] += gy[i] * dda<Op>(ad[i], bd[i]);
        }
        if (bv >= 0) {
          auto GB = flat(t.grad<T>(bv), n);
          if constexpr (Op == binop::add) GB += G;
          else if constexpr (Op == binop::sub) GB -= G;
          else if constexpr (Op == binop::mul) GB += G * A;
          else if constexpr (Op == binop::div) GB -= G * A / B.square();
          else for (std::int64_t i = 0; i < n; ++i) GB[i] += gy[i] * ddb<Op>(ad[i], bd[i]);
        }
      });
    }
    return y;
  }
  broadcast_plan p = plan_broadcast(a.shape(), b.shape(), binop_name(Op));
  basic_tensor<T> y = make_output<T>(p.out, grad);
  T const* ad = a.data(); T const* bd = b.data(); T* yd = y.data();
  for_each_broadcast(p, [&](std::int64_t o, std::int64_t ia, std::int64_t ib) { yd[o] = apply<Op>(ad[ia], bd[ib]); });
  if (grad) {
    int av = a.var(), bv = b.var(), yv = y.var();
    active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      T* ga = av >= 0 ? t.grad<T>(av) : nullptr;
      T* gb = bv >= 0 ? t.grad<T>(bv) : nullptr;
      for_each_broadcast(p, [&](std::int64_t o, std::int64_t ia, std::int64_t ib) {
        if (ga) ga[ia] += gy[o] * dda<Op>(ad[ia], bd[ib]);
        if (gb) gb[ib] += gy[o] * ddb<Op>(ad[ia], bd[ib]);
      });
    });
  }
  return y;
}

// y = alpha * x + beta, and y = alpha / x: the scalar forms of arithmetic.
template <class T>
basic_tensor<T> affine(basic_tensor<T> const& x, T alpha, T beta) {
  basic_tensor<T> y = make_output<T>(x.shape(), needs_grad(x));
  const std::int64_t n = x.numel();
  flat(y.data(), n) = flat(x.data(), n) * alpha + beta;
  if (y.requires_grad()) {
    int xv = x.var(), yv = y.var();
    active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      flat(t.grad<T>(xv), n) += flat(gy, n) * alpha;
    });
  }
  return y;
}
template <class T>
basic_tensor<T> scalar_div(T alpha, basic_tensor<T> const& x) {
  basic_tensor<T> y = make_output<T>(x.shape(), needs_grad(x));
  const std::int64_t n = x.numel();
  flat(y.data(), n) = alpha / flat(x.data(), n);
  if (y.requires_grad()) {
    int xv = x.var(), yv = y.var();
    T const* yd = y.data();
    active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      flat(t.grad<T>(xv), n) -= flat(gy, n) * flat(yd, n).square() / alpha;
    });
  }
  return y;
}

}  // namespace detail

// ---- the public operations --------------------------------------------------------------------
template <class T> basic_tensor<T> exp(basic_tensor<T> const& x) { return detail::unary<detail::exp_fn>(x); }
template <class T> basic_tensor<T> log(basic_tensor<T> const& x) { return detail::unary<detail::log_fn>(x); }
template <class T> basic_tensor<T> sqrt(basic_tensor<T> const& x) { return detail::unary<detail::sqrt_fn>(x); }
template <class T> basic_tensor<T> square(basic_tensor<T> const& x) { return detail::unary<detail::square_fn>(x); }
template <class T> basic_tensor<T> abs(basic_tensor<T> const& x) { return detail::unary<detail::abs_fn>(x); }
template <class T> basic_tensor<T> relu(basic_tensor<T> const& x) { return detail::unary<detail::relu_fn>(x); }
template <class T> basic_tensor<T> sigmoid(basic_tensor<T> const& x) { return detail::unary<detail::sigmoid_fn>(x); }
template <class T> basic_tensor<T> tanh(basic_tensor<T> const& x) { return detail::unary<detail::tanh_fn>(x); }
template <class T> basic_tensor<T> softplus(basic_tensor<T> const& x) { return detail::unary<detail::softplus_fn>(x); }
template <class T> basic_tensor<T> gelu(basic_tensor<T> const& x) { return detail::unary<detail::gelu_fn>(x); }

template <class T> basic_tensor<T> operator-(basic_tensor<T> const& x) { return detail::affine(x, T(-1), T(0)); }
template <class T> basic_tensor<T> operator+(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary<detail::binop::add>(a, b); }
template <class T> basic_tensor<T> operator-(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary<detail::binop::sub>(a, b); }
template <class T> basic_tensor<T> operator*(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary<detail::binop::mul>(a, b); }
template <class T> basic_tensor<T> operator/(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary<detail::binop::div>(a, b); }
template <class T> basic_tensor<T> maximum(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary<detail::binop::max>(a, b); }
template <class T> basic_tensor<T> minimum(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::binary<detail::binop::min>(a, b); }

template <class T> basic_tensor<T> operator+(basic_tensor<T> const& x, std::type_identity_t<T> s) { return detail::affine(x, T(1), s); }
template <class T> basic_tensor<T> operator+(std::type_identity_t<T> s, basic_tensor<T> const& x) { return detail::affine(x, T(1), s); }
template <class T> basic_tensor<T> operator-(basic_tensor<T> const& x, std::type_identity_t<T> s) { return detail::affine(x, T(1), -s); }
template <class T> basic_tensor<T> operator-(std::type_identity_t<T> s, basic_tensor<T> const& x) { return detail::affine(x, T(-1), s); }
template <class T> basic_tensor<T> operator*(basic_tensor<T> const& x, std::type_identity_t<T> s) { return detail::affine(x, s, T(0)); }
template <class T> basic_tensor<T> operator*(std::type_identity_t<T> s, basic_tensor<T> const& x) { return detail::affine(x, s, T(0)); }
template <class T> basic_tensor<T> operator/(basic_tensor<T> const& x, std::type_identity_t<T> s) { return detail::affine(x, T(1) / s, T(0)); }
template <class T> basic_tensor<T> operator/(std::type_identity_t<T> s, basic_tensor<T> const& x) { return detail::scalar_div(s, x); }

// x^p for a constant p
template <class T>
basic_tensor<T> pow(basic_tensor<T> const& x, std::type_identity_t<T> p) {
  basic_tensor<T> y = detail::make_output<T>(x.shape(), detail::needs_grad(x));
  const std::int64_t n = x.numel();
  detail::flat(y.data(), n) = detail::flat(x.data(), n).pow(p);
  if (y.requires_grad()) {
    T const* xd = x.data();
    int xv = x.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      detail::flat(t.grad<T>(xv), n) += detail::flat(gy, n) * detail::flat(xd, n).pow(p - T(1)) * p;
    });
  }
  return y;
}

// Values clamped to [lo, hi]; the gradient passes where x is inside.
template <class T>
basic_tensor<T> clamp(basic_tensor<T> const& x, std::type_identity_t<T> lo, std::type_identity_t<T> hi) {
  basic_tensor<T> y = detail::make_output<T>(x.shape(), detail::needs_grad(x));
  const std::int64_t n = x.numel();
  detail::flat(y.data(), n) = detail::flat(x.data(), n).max(lo).min(hi);
  if (y.requires_grad()) {
    T const* xd = x.data();
    int xv = x.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      auto X = detail::flat(xd, n);
      detail::flat(t.grad<T>(xv), n) += detail::flat(gy, n) * ((X >= lo) && (X <= hi)).template cast<T>();
    });
  }
  return y;
}

// ---- comparisons: 0/1 values, never differentiable ---------------------------------------------
namespace detail {
template <class T, class Cmp>
basic_tensor<T> compare(basic_tensor<T> const& a, basic_tensor<T> const& b, Cmp cmp, char const* name) {
  broadcast_plan p = plan_broadcast(a.shape(), b.shape(), name);
  basic_tensor<T> y = basic_tensor<T>::empty(p.out);
  T const* ad = a.data(); T const* bd = b.data(); T* yd = y.data();
  for_each_broadcast(p, [&](std::int64_t o, std::int64_t ia, std::int64_t ib) { yd[o] = cmp(ad[ia], bd[ib]) ? T(1) : T(0); });
  return y;
}
}  // namespace detail
template <class T> basic_tensor<T> operator==(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::compare(a, b, [](T x, T y) { return x == y; }, "=="); }
template <class T> basic_tensor<T> operator!=(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::compare(a, b, [](T x, T y) { return x != y; }, "!="); }
template <class T> basic_tensor<T> operator<(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::compare(a, b, [](T x, T y) { return x < y; }, "<"); }
template <class T> basic_tensor<T> operator>(basic_tensor<T> const& a, basic_tensor<T> const& b) { return detail::compare(a, b, [](T x, T y) { return x > y; }, ">"); }

}  // namespace nitro
