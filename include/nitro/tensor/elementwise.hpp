// nitro/tensor/elementwise.hpp — the element-wise operations a backend computes, by name, and
// their arithmetic on one element.
//
//   ops.map(nitro::map_op::gelu, n, 0, 0, x, y);                     // y = gelu(x)
//   ops.binary(nitro::binop::mul, nitro::plan_broadcast(a, b, "mul"), pa, pb, py);
//
// The kernels table (device_ops.hpp) takes these names; tensor/ops/elementwise.hpp records them on
// the tape. Each element's value and derivative are written once here, NITRO_HD: the CUDA kernels
// run these functions, and the CPU's vectorised Eigen forms (tensor/ops/elementwise_eigen.hpp) are
// tested against them (tests/unit/test_tensor.cpp).
//
// Broadcasting aligns extents from the FIRST dimension (column-major, batch last, as in Julia): a
// bias [F] meets activations [F, B]; a per-sample weight [1, B] meets [F, B]; missing trailing
// extents count as 1.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/tensor/cuda/hd.hpp"
#include "nitro/tensor/shape.hpp"

#include <array>    // strides
#include <cmath>    // the element functions on the host
#include <cstdint>  // int64_t
#include <string>   // messages

namespace nitro {

// One input, with up to two constant parameters (a, b): y = f(x).
enum class map_op : unsigned char {
  exp, log, sqrt, square, abs, relu, sigmoid, tanh, softplus, gelu,  // parameters unused
  affine,                                                            // a x + b
  rdiv,                                                              // a / x
  pow,                                                               // x^a
  clamp,                                                             // min(max(x, a), b)
};
// Two inputs, broadcast: y = a op b. The comparisons give 0 or 1 and carry no gradient.
enum class binop : unsigned char { add, sub, mul, div, max, min, eq, ne, lt, gt };

constexpr char const* to_string(map_op op) noexcept {
  switch (op) {
    case map_op::exp: return "exp"; case map_op::log: return "log"; case map_op::sqrt: return "sqrt";
    case map_op::square: return "square"; case map_op::abs: return "abs"; case map_op::relu: return "relu";
    case map_op::sigmoid: return "sigmoid"; case map_op::tanh: return "tanh"; case map_op::softplus: return "softplus";
    case map_op::gelu: return "gelu"; case map_op::affine: return "affine"; case map_op::rdiv: return "rdiv";
    case map_op::pow: return "pow"; case map_op::clamp: return "clamp";
  }
  return "?";
}
constexpr char const* to_string(binop op) noexcept {
  switch (op) {
    case binop::add: return "add"; case binop::sub: return "sub"; case binop::mul: return "mul";
    case binop::div: return "div"; case binop::max: return "maximum"; case binop::min: return "minimum";
    case binop::eq: return "=="; case binop::ne: return "!="; case binop::lt: return "<"; case binop::gt: return ">";
  }
  return "?";
}
constexpr bool is_comparison(binop op) noexcept { return op == binop::eq || op == binop::ne || op == binop::lt || op == binop::gt; }

// ---- one element ----------------------------------------------------------------------------------
namespace elementwise {

// exp, log, erf... for float and double, spelled so nvcc's device pass finds its own.
template <class T> NITRO_HD_INLINE T exp_(T x) { using std::exp; return exp(x); }
template <class T> NITRO_HD_INLINE T log_(T x) { using std::log; return log(x); }
template <class T> NITRO_HD_INLINE T log1p_(T x) { using std::log1p; return log1p(x); }
template <class T> NITRO_HD_INLINE T sqrt_(T x) { using std::sqrt; return sqrt(x); }
template <class T> NITRO_HD_INLINE T abs_(T x) { using std::fabs; return fabs(x); }
template <class T> NITRO_HD_INLINE T tanh_(T x) { using std::tanh; return tanh(x); }
template <class T> NITRO_HD_INLINE T erf_(T x) { using std::erf; return erf(x); }
template <class T> NITRO_HD_INLINE T pow_(T x, T p) { using std::pow; return pow(x, p); }

template <class T>
NITRO_HD_INLINE T sigmoid(T x) {
  // the two-sided form: no overflow of exp for large |x|
  return x >= T(0) ? T(1) / (T(1) + exp_(-x)) : exp_(x) / (T(1) + exp_(x));
}

// y = f(x)
template <class T>
NITRO_HD_INLINE T map_value(map_op op, T a, T b, T x) {
  switch (op) {
    case map_op::exp: return exp_(x);
    case map_op::log: return log_(x);
    case map_op::sqrt: return sqrt_(x);
    case map_op::square: return x * x;
    case map_op::abs: return abs_(x);
    case map_op::relu: return x > T(0) ? x : T(0);
    case map_op::sigmoid: return sigmoid(x);
    case map_op::tanh: return tanh_(x);
    case map_op::softplus: return (x > T(0) ? x : T(0)) + log1p_(exp_(-abs_(x)));
    case map_op::gelu: return x * (T(1) + erf_(x * T(0.70710678118654752440))) * T(0.5);  // exact, as torch.nn.GELU()
    case map_op::affine: return a * x + b;
    case map_op::rdiv: return a / x;
    case map_op::pow: return pow_(x, a);
    case map_op::clamp: return x < a ? a : (x > b ? b : x);
  }
  return x;
}
// dy/dx, from x and the forward's y.
template <class T>
NITRO_HD_INLINE T map_derivative(map_op op, T a, T b, T x, T y) {
  switch (op) {
    case map_op::exp: return y;
    case map_op::log: return T(1) / x;
    case map_op::sqrt: return T(0.5) / y;
    case map_op::square: return T(2) * x;
    case map_op::abs: return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
    case map_op::relu: return x > T(0) ? T(1) : T(0);
    case map_op::sigmoid: return y * (T(1) - y);
    case map_op::tanh: return T(1) - y * y;
    case map_op::softplus: return sigmoid(x);
    case map_op::gelu:
      return (T(1) + erf_(x * T(0.70710678118654752440))) * T(0.5) + x * exp_(x * x * T(-0.5)) * T(0.39894228040143267794);
    case map_op::affine: return a;
    case map_op::rdiv: return -(y * y) / a;
    case map_op::pow: return pow_(x, a - T(1)) * a;
    case map_op::clamp: return x >= a && x <= b ? T(1) : T(0);
  }
  return T(0);
}

// y = a op b
template <class T>
NITRO_HD_INLINE T binary_value(binop op, T a, T b) {
  switch (op) {
    case binop::add: return a + b;
    case binop::sub: return a - b;
    case binop::mul: return a * b;
    case binop::div: return a / b;
    case binop::max: return a > b ? a : b;
    case binop::min: return a < b ? a : b;
    case binop::eq: return a == b ? T(1) : T(0);
    case binop::ne: return a != b ? T(1) : T(0);
    case binop::lt: return a < b ? T(1) : T(0);
    case binop::gt: return a > b ? T(1) : T(0);
  }
  return T(0);
}
// d(a op b)/da and d(a op b)/db (ties of max and min go to a)
template <class T>
NITRO_HD_INLINE T binary_da(binop op, T a, T b) {
  switch (op) {
    case binop::add: case binop::sub: return T(1);
    case binop::mul: return b;
    case binop::div: return T(1) / b;
    case binop::max: return a >= b ? T(1) : T(0);
    case binop::min: return a <= b ? T(1) : T(0);
    default: return T(0);
  }
}
template <class T>
NITRO_HD_INLINE T binary_db(binop op, T a, T b) {
  switch (op) {
    case binop::add: return T(1);
    case binop::sub: return T(-1);
    case binop::mul: return a;
    case binop::div: return -a / (b * b);
    case binop::max: return a >= b ? T(0) : T(1);
    case binop::min: return a <= b ? T(0) : T(1);
    default: return T(0);
  }
}

}  // namespace elementwise

// ---- broadcasting ---------------------------------------------------------------------------------
// The output's extents and each input's strides over them (0 where the input is broadcast).
// `same`: neither input broadcasts (the flat, vectorised case).
struct broadcast_plan {
  shape out;
  std::array<std::int64_t, shape::max_rank> sa{}, sb{};
  bool same = false;
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
  p.same = a == b;
  return p;
}

}  // namespace nitro
