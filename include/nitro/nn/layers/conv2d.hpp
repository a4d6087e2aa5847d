// nitro/nn/layers/conv2d.hpp — 2-D convolution on WHCN images, with its activation fused.
//
//   nitro::nn::conv2d<1, 32, 3, 1, 1>(nitro::nn::relu)     [28, 28, 1, B] -> relu(conv) [28, 28, 32, B]
//
// Template arguments: input channels, output channels, kernel size K (square), stride, zero padding
// on every side, and Bias. Parameters: weight param<K, K, InC, OutC> — [kx, ky, cin, cout],
// column-major, the same bytes as PyTorch's [cout, cin, kh, kw] — and bias param<OutC>. As in
// PyTorch it is a cross-correlation, and the initialisers default to PyTorch's (fan_in = K*K*InC).
// The output's width and height come from the input at run time: (in + 2 Pad - K) / Stride + 1.
//
// One coarse tape node on the step's kernels (device_ops::conv2d and its backward, with scratch
// from the step's arena; nothing from the heap): on the CPU (tensor/cpu/conv.hpp) im2col and one
// product per sample onto the bias, the activation in place, samples in fixed chunks on the thread
// pool; on a GPU (kernels/conv.cuh) the batch's im2col, cuBLASLt products and one bias-and-
// activation kernel.
#pragma once

#include "nitro/core/meta.hpp"
#include "nitro/nn/init.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/nn/layers/activation.hpp"
#include "nitro/nn/layers/detail/spatial.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/convolution.hpp"
#include "nitro/tensor/detail/record.hpp"

#include <cstdint>  // int64_t
#include <string>   // describe
#include <utility>  // pair

namespace nitro::nn {

struct conv2d_options {
  init::initializer weight = init::torch_default;
  init::initializer bias = init::torch_default;
};

template <class Layer, class Activation> struct activation_arg {};

// The diagnostic for an activation a convolution (or dense layer) cannot fuse.
template <class Layer, class Arg>
struct activation_not_fusable {
  static_assert(always_false<Layer, Arg>,
                "E-LAYER-007: this activation cannot be fused into the layer (see activation_arg<layer, activation> "
                "above). Fix: pass one of nitro::nn::identity, relu, tanh, sigmoid, gelu, or put the activation in the "
                "chain as a layer of its own after this one.");
  static constexpr bool ok = false;
};

template <class Layer, std::int64_t InC, std::int64_t OutC, std::int64_t K, std::int64_t Stride, std::int64_t Pad>
struct conv2d_arguments_invalid {
  static_assert(always_false<Layer>,
                "E-LAYER-008: nitro::nn::conv2d<InC, OutC, K, Stride, Pad>: the channel counts, kernel size and stride "
                "must be positive and the padding must not be negative. Fix: e.g. conv2d<1, 32, 3, 1, 1>.");
  static constexpr bool ok = false;
};

template <std::int64_t InC, std::int64_t OutC, std::int64_t K, std::int64_t Stride = 1, std::int64_t Pad = 0, class Act = identity_t,
          bool Bias = true>
struct conv2d_layer {
  static_assert(checks_evaluated<detail::require<conv2d_arguments_invalid<conv2d_layer, InC, OutC, K, Stride, Pad>,
                                                 (InC > 0 && OutC > 0 && K > 0 && Stride > 0 && Pad >= 0)>(),
                                 detail::require<activation_not_fusable<conv2d_layer, activation_arg<conv2d_layer, Act>>, fusable_activation<Act>>()>);

  static constexpr std::int64_t kkc = K * K * InC;  // rows of the weight seen as a matrix
  using param_spec = std::conditional_t<Bias, tree<entry<"weight", param<K, K, InC, OutC>>, entry<"bias", param<OutC>>>,
                                        tree<entry<"weight", param<K, K, InC, OutC>>>>;
  using state_spec = tree<>;
  // Features (every extent but the batch) depend on the image size: known only at run time.
  static constexpr std::int64_t in_features = dynamic;
  static constexpr std::int64_t out_features = dynamic;
  static constexpr std::int64_t in_channels = InC;
  static constexpr std::int64_t out_channels = OutC;
  using activation = Act;

  conv2d_options options{};

  template <class Ps, class St>
  void init(Ps& ps, St&, rng& g) const {
    options.weight(get<"weight">(ps), kkc, K * K * OutC, g);
    if constexpr (Bias) options.bias(get<"bias">(ps), kkc, K * K * OutC, g);
  }

  std::string describe() const {
    std::string s = "conv2d<" + std::to_string(InC) + ", " + std::to_string(OutC) + ", " + std::to_string(K);
    if (Stride != 1) s += ", stride " + std::to_string(Stride);
    if (Pad != 0) s += ", pad " + std::to_string(Pad);
    if constexpr (!Act::is_identity) s += std::string(", ") + Act::name();
    if constexpr (!Bias) s += ", no bias";
    return s + ">";
  }

  template <class T>
  std::pair<basic_tensor<T>, params_t<state_spec, T>> operator()(basic_tensor<T> const& x, params_t<param_spec, T> const& ps,
                                                                   params_t<state_spec, T> const& st) const {
    using namespace nitro::detail;
    const nn::detail::image_geometry geo = nn::detail::check_image(x.shape(), InC, K, Stride, Pad, [&] { return describe(); });
    const conv_window p{K, Stride, Pad, geo.w, geo.h, InC, geo.ow, geo.oh, OutC, geo.b};
    basic_tensor<T> const& W = get<"weight">(ps);
    basic_tensor<T> bias;
    if constexpr (Bias) bias = get<"bias">(ps);
    const bool grad = [&] {
      if constexpr (Bias) return needs_grad(x, W, bias);
      else return needs_grad(x, W);
    }();

    basic_tensor<T> y = make_output<T>(shape{geo.ow, geo.oh, OutC, geo.b}, grad);
    // z keeps the pre-activation only when the activation's derivative needs it (gelu)
    basic_tensor<T> z = Act::needs_preactivation && grad ? basic_tensor<T>::empty(y.shape()) : y;
    device_ops& ops = active_ops();
    const std::int64_t n_scratch = ops.conv2d_scratch(p, false);
    basic_tensor<T> scratch = n_scratch > 0 ? basic_tensor<T>::empty(shape{n_scratch}) : basic_tensor<T>{};
    T const* bd = Bias ? bias.data() : nullptr;
    ops.conv2d(p, x.data(), W.data(), bd, Act::epilogue, z.data() == y.data() ? nullptr : z.data(), y.data(), scratch.data());

    if (grad) {
      int xv = x.var(), wv = W.var(), bv = Bias ? bias.var() : -1, yv = y.var();
      T const* xd = x.data();
      T const* wd = W.data();
      T const* yzd = Act::needs_preactivation ? z.data() : y.data();
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        device_ops& ops = active_ops();
        T* work = t.memory().allocate_n<T>(static_cast<std::size_t>(ops.conv2d_scratch(p, true) + 1));
        ops.conv2d_backward(p, Act::epilogue, xd, wd, yzd, gy, xv >= 0 ? t.grad<T>(xv) : nullptr, wv >= 0 ? t.grad<T>(wv) : nullptr,
                            bv >= 0 ? t.grad<T>(bv) : nullptr, work);
      });
    }
    return {y, st};
  }
};

// conv2d<InC, OutC, K, Stride, Pad>(activation, options): the layer value. Bias = false drops the bias.
template <std::int64_t InC, std::int64_t OutC, std::int64_t K, std::int64_t Stride = 1, std::int64_t Pad = 0, bool Bias = true,
          class Act = identity_t>
constexpr conv2d_layer<InC, OutC, K, Stride, Pad, Act, Bias> conv2d(Act = {}, conv2d_options options = {}) {
  return conv2d_layer<InC, OutC, K, Stride, Pad, Act, Bias>{options};
}

}  // namespace nitro::nn
