// nitro/tensor/ops/elementwise_eigen.hpp — the element-wise functions on Eigen arrays: the CPU's
// vectorised forms of tensor/elementwise.hpp's per-element arithmetic.
//
//   nitro::detail::gelu_fn::f(x)        // x * Phi(x), coefficient-wise
//   nitro::detail::gelu_fn::df(x, y)    // its derivative from the input (and the output)
//
// The CPU backend's map kernels (tensor/cpu/elementwise.hpp) and the activations the CPU runs
// inside its own loops (tensor/ops/epilogue.hpp) call these; tests/unit/test_tensor.cpp holds them to
// the one-element definitions the CUDA kernels run.
#pragma once

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>  // erf for the exact GELU

#include <cmath>  // sqrt

namespace nitro::detail {

// A unary function: forward as an Eigen array expression, derivative dy/dx from (x, y).
#define NITRO_DETAIL_UNARY(name, forward_expr, derivative_expr)                              \
  struct name##_fn {                                                                         \
    template <class X> static auto f(X const& x) { return forward_expr; }                    \
    template <class X, class Y> static auto df(X const& x, Y const& y) {                     \
      (void)x; (void)y;                                                                      \
      return derivative_expr;                                                                \
    }                                                                                        \
  };

using std::sqrt;
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

}  // namespace nitro::detail
