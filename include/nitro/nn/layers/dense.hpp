// nitro/nn/layers/dense.hpp — the fully connected layer, with its activation fused.
//
//   nitro::nn::dense<784, 256>(nitro::nn::relu)     y = relu(W x + b), W: [256, 784], b: [256]
//                                                   x [784, B] -> y [256, B]; x [784, T, B] -> y [256, T, B]
//
// Extents are template arguments, so a width that comes from a GraphConst gives each width its
// own specialised layer. Forward is one product with its bias and activation fused
// (device_ops::gemm_epilogue); backward is the epilogue's backward (the activation's derivative and
// the bias's gradient, device_ops::epilogue_backward) and up to two products (dW, and dx only when x
// needs a gradient) — one coarse tape node, every kernel from the step's backend.
#pragma once

#include "nitro/nn/init.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/nn/layers/activation.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/detail/record.hpp"

#include <cstdint>  // int64_t
#include <string>   // describe
#include <utility>  // pair

namespace nitro::nn {

struct dense_options {
  init::initializer weight = init::torch_default;
  init::initializer bias = init::torch_default;
};

template <std::int64_t In, std::int64_t Out, class Act = identity_t, bool Bias = true>
struct dense_layer {
  static_assert(In > 0 && Out > 0, "E-LAYER-010: nitro::nn::dense<In, Out> needs positive extents. Fix: dense<784, 128>().");
  static_assert(fusable_activation<Act>, "E-LAYER-011: nitro::nn::dense fuses its activation into the GEMM, and this one is not fusable. Fix: one of nitro::nn::identity, relu, tanh, sigmoid, gelu.");

  using param_spec = std::conditional_t<Bias, tree<entry<"weight", param<Out, In>>, entry<"bias", param<Out>>>,
                                        tree<entry<"weight", param<Out, In>>>>;
  using state_spec = tree<>;
  static constexpr std::int64_t in_features = In;
  static constexpr std::int64_t out_features = Out;
  using activation = Act;

  dense_options options{};

  template <class Ps, class St>
  void init(Ps& ps, St&, rng& g) const {
    options.weight(get<"weight">(ps), In, Out, g);
    if constexpr (Bias) options.bias(get<"bias">(ps), In, Out, g);
  }

  std::string describe() const {
    std::string s = "dense<" + std::to_string(In) + ", " + std::to_string(Out);
    if constexpr (!Act::is_identity) s += std::string(", ") + Act::name();
    if constexpr (!Bias) s += ", no bias";
    return s + ">";
  }

  template <class T>
  std::pair<basic_tensor<T>, params_t<state_spec, T>> operator()(basic_tensor<T> const& x, params_t<param_spec, T> const& ps,
                                                                   params_t<state_spec, T> const& st) const {
    using namespace nitro::detail;
    // x [In, B]; or [In, T, B] and the like (tokens of a sequence, one token too): every column
    // through the same product, the output [Out, T, B]. An image batch [28, 28, 1, B] is [784, B].
    const bool columns = x.rank() > 2 && x.size(0) == In;
    check_features(In, x.rank() <= 1 ? x.numel() : columns ? In : x.features(), [&] { return describe(); }, x.shape());
    const std::int64_t B = x.rank() <= 1 ? 1 : columns ? x.numel() / In : x.batch();
    shape ys{Out, B};
    if (columns) {
      ys = x.shape();
      ys[0] = Out;
    }
    basic_tensor<T> const& W = get<"weight">(ps);
    basic_tensor<T> b;
    if constexpr (Bias) b = get<"bias">(ps);
    const bool grad = [&] {
      if constexpr (Bias) return needs_grad(x, W, b);
      else return needs_grad(x, W);
    }();

    basic_tensor<T> y = make_output<T>(ys, grad);
    // z keeps the pre-activation only when the activation's derivative needs it (gelu)
    basic_tensor<T> z = Act::needs_preactivation && grad ? basic_tensor<T>::empty(ys) : y;
    T const* bd = nullptr;
    if constexpr (Bias) bd = b.data();
    nitro::detail::active_ops().gemm_epilogue(false, false, Out, B, In, W.data(), Out, x.data(), In, bd, Act::epilogue,
                                              z.data() != y.data() ? z.data() : nullptr, y.data(), Out);

    if (grad) {
      T const* xd = x.data(); T const* wd = W.data(); T const* yd = y.data(); T const* zd = z.data();
      int xv = x.var(), wv = W.var(), bv = Bias ? b.var() : -1, yv = y.var();
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        device_ops& ops = nitro::detail::active_ops();
        T const* g = gy;
        T* db = bv >= 0 ? t.grad<T>(bv) : nullptr;
        if (!Act::is_identity || db) {  // g = gy * act'(.) in a scratch buffer, its row sums into the bias's gradient
          T* s = Act::is_identity ? const_cast<T*>(gy) : t.memory().allocate_n<T>(static_cast<std::size_t>(Out * B));
          ops.epilogue_backward(Act::epilogue, Out, B, gy, Act::needs_preactivation ? zd : yd, s, db);
          g = s;
        }
        if (wv >= 0) ops.gemm(false, true, Out, In, B, T(1), g, Out, xd, In, T(1), t.grad<T>(wv), Out);
        if (xv >= 0) ops.gemm(true, false, In, B, Out, T(1), wd, Out, g, Out, T(1), t.grad<T>(xv), In);
      });
    }
    return {y, st};
  }
};

// dense<In, Out>(activation, options): the layer value. Bias = false drops the bias.
template <std::int64_t In, std::int64_t Out, bool Bias = true, class Act = identity_t>
constexpr dense_layer<In, Out, Act, Bias> dense(Act = {}, dense_options options = {}) {
  return dense_layer<In, Out, Act, Bias>{options};
}

}  // namespace nitro::nn
