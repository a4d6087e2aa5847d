// nitro/tensor/cpu/elementwise.hpp — the CPU's element-wise kernels: maps and broadcast arithmetic.
//
//   cpu::map<float>(map_op::tanh, n, 0, 0, x, y);                        // y = tanh(x)
//   cpu::map_backward<float>(map_op::tanh, n, 0, 0, x, y, gy, gx);       // gx += gy tanh'(x)
//   cpu::binary<float>(binop::add, plan, a, b, y);
//   cpu::binary_backward<float>(binop::mul, plan, a, b, gy, ga, gb);     // ga, gb may be null
//
// Flat operands go through Eigen's vectorised arrays (tensor/ops/elementwise_eigen.hpp); broadcast
// ones walk the output once with both inputs' offsets. The per-element definitions are
// tensor/elementwise.hpp's, which the CUDA kernels run.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/tensor/elementwise.hpp"
#include "nitro/tensor/ops/elementwise_eigen.hpp"

#include <Eigen/Core>

#include <array>    // the odometer
#include <cstdint>  // int64_t

namespace nitro::cpu {

namespace detail {
template <class T> inline Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> flat(T* p, std::int64_t n) { return {p, n}; }
template <class T> inline Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> flat(T const* p, std::int64_t n) { return {p, n}; }

// The unary functions with their Eigen forms, by name.
template <class F>
bool with_unary(map_op op, F&& f) {
  using namespace nitro::detail;
  switch (op) {
    case map_op::exp: f(exp_fn{}); return true;
    case map_op::log: f(log_fn{}); return true;
    case map_op::sqrt: f(sqrt_fn{}); return true;
    case map_op::square: f(square_fn{}); return true;
    case map_op::abs: f(abs_fn{}); return true;
    case map_op::relu: f(relu_fn{}); return true;
    case map_op::sigmoid: f(sigmoid_fn{}); return true;
    case map_op::tanh: f(tanh_fn{}); return true;
    case map_op::softplus: f(softplus_fn{}); return true;
    case map_op::gelu: f(gelu_fn{}); return true;
    default: return false;
  }
}

// Visits every output position with the matching offsets into a and b.
template <class F>
void for_each_broadcast(broadcast_plan const& p, F&& f) {
  const int r = p.out.rank();
  if (r == 0) { f(0, 0, 0); return; }
  std::array<std::int64_t, shape::max_rank> idx{};
  const std::int64_t n = p.out.numel(), inner = p.out[0], sa0 = p.sa[0], sb0 = p.sb[0];
  std::int64_t ia = 0, ib = 0;
  for (std::int64_t o = 0; o < n; o += inner) {
    for (std::int64_t i = 0; i < inner; ++i) f(o + i, ia + i * sa0, ib + i * sb0);
    for (int d = 1; d < r; ++d) {  // odometer over the outer dimensions
      ++idx[d]; ia += p.sa[d]; ib += p.sb[d];
      if (idx[d] < p.out[d]) break;
      ia -= p.sa[d] * p.out[d]; ib -= p.sb[d] * p.out[d]; idx[d] = 0;
    }
  }
}
}  // namespace detail

template <class T>
void map(map_op op, std::int64_t n, T a, T b, T const* x, T* y) {
  auto X = detail::flat(x, n);
  auto Y = detail::flat(y, n);
  if (detail::with_unary(op, [&](auto fn) { Y = decltype(fn)::f(X); })) return;
  switch (op) {
    case map_op::affine: Y = X * a + b; return;
    case map_op::rdiv: Y = a / X; return;
    case map_op::pow: Y = X.pow(a); return;
    case map_op::clamp: Y = X.max(a).min(b); return;
    default: return;
  }
}

template <class T>
void map_backward(map_op op, std::int64_t n, T a, T b, T const* x, T const* y, T const* gy, T* gx) {
  auto X = detail::flat(x, n);
  auto Y = detail::flat(y, n);
  auto G = detail::flat(gy, n);
  auto GX = detail::flat(gx, n);
  if (detail::with_unary(op, [&](auto fn) { GX += G * decltype(fn)::df(X, Y); })) return;
  switch (op) {
    case map_op::affine: GX += G * a; return;
    case map_op::rdiv: GX -= G * Y.square() / a; return;
    case map_op::pow: GX += G * X.pow(a - T(1)) * a; return;
    case map_op::clamp: GX += G * ((X >= a) && (X <= b)).template cast<T>(); return;
    default: return;
  }
}

template <class T>
void binary(binop op, broadcast_plan const& p, T const* a, T const* b, T* y) {
  if (p.same && !is_comparison(op)) {  // the common case: no broadcasting, vectorised by Eigen
    const std::int64_t n = p.out.numel();
    auto A = detail::flat(a, n), B = detail::flat(b, n);
    auto Y = detail::flat(y, n);
    switch (op) {
      case binop::add: Y = A + B; return;
      case binop::sub: Y = A - B; return;
      case binop::mul: Y = A * B; return;
      case binop::div: Y = A / B; return;
      case binop::max: Y = A.max(B); return;
      case binop::min: Y = A.min(B); return;
      default: return;
    }
  }
  detail::for_each_broadcast(p, [&](std::int64_t o, std::int64_t ia, std::int64_t ib) { y[o] = elementwise::binary_value(op, a[ia], b[ib]); });
}

template <class T>
void binary_backward(binop op, broadcast_plan const& p, T const* a, T const* b, T const* gy, T* ga, T* gb) {
  if (is_comparison(op)) return;
  if (p.same) {
    const std::int64_t n = p.out.numel();
    auto G = detail::flat(gy, n);
    auto A = detail::flat(a, n), B = detail::flat(b, n);
    if (ga) {
      auto GA = detail::flat(ga, n);
      if (op == binop::add || op == binop::sub) GA += G;
      else if (op == binop::mul) GA += G * B;
      else if (op == binop::div) GA += G / B;
      else for (std::int64_t i = 0; i < n; ++i) ga[i] += gy[i] * elementwise::binary_da(op, a[i], b[i]);
    }
    if (gb) {
      auto GB = detail::flat(gb, n);
      if (op == binop::add) GB += G;
      else if (op == binop::sub) GB -= G;
      else if (op == binop::mul) GB += G * A;
      else if (op == binop::div) GB -= G * A / B.square();
      else for (std::int64_t i = 0; i < n; ++i) gb[i] += gy[i] * elementwise::binary_db(op, a[i], b[i]);
    }
    return;
  }
  detail::for_each_broadcast(p, [&](std::int64_t o, std::int64_t ia, std::int64_t ib) {
    if (ga) ga[ia] += gy[o] * elementwise::binary_da(op, a[ia], b[ib]);
    if (gb) gb[ib] += gy[o] * elementwise::binary_db(op, a[ia], b[ib]);
  });
}

#if NITRO_RUNTIME_EXTERN
// Compiled once, in nitro::runtime (src/runtime.cpp): the kernels table's virtuals reach every
// function for both types, so each translation unit would compile all of them.
#define NITRO_DETAIL_ELEMENTWISE(T)                                                                                     \
  extern template void map<T>(map_op, std::int64_t, T, T, T const*, T*);                                               \
  extern template void map_backward<T>(map_op, std::int64_t, T, T, T const*, T const*, T const*, T*);                  \
  extern template void binary<T>(binop, broadcast_plan const&, T const*, T const*, T*);                                \
  extern template void binary_backward<T>(binop, broadcast_plan const&, T const*, T const*, T const*, T*, T*);
NITRO_DETAIL_ELEMENTWISE(float)
NITRO_DETAIL_ELEMENTWISE(double)
#undef NITRO_DETAIL_ELEMENTWISE
#endif

}  // namespace nitro::cpu
