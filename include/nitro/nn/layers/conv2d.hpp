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
// Forward, per sample: im2col into step-arena scratch [P, K*K*InC] (P = output pixels), one GEMM with
// the weight seen as [K*K*InC, OutC] accumulated onto the bias straight into the sample's [P, OutC]
// block of the WHCN output, then the activation in place. Backward, per sample: the activation's derivative,
// dW += col^T g (col recomputed, not kept), dcol = g W^T, col2im into dx. Samples run in fixed chunks
// on the CPU backend's threads; the weight and bias gradients are summed per chunk, then in chunk
// order. One coarse tape node; nothing allocated from the heap.
#pragma once

#include "nitro/core/meta.hpp"
#include "nitro/nn/init.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/nn/layers/activation.hpp"
#include "nitro/nn/layers/detail/spatial.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/detail/record.hpp"

#include <cstdint>  // int64_t
#include <cstring>  // memset
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
    const std::int64_t B = geo.b, P = geo.out_plane(), in_plane = geo.in_plane() * InC;
    basic_tensor<T> const& W = get<"weight">(ps);
    basic_tensor<T> bias;
    if constexpr (Bias) bias = get<"bias">(ps);
    const bool grad = [&] {
      if constexpr (Bias) return needs_grad(x, W, bias);
      else return needs_grad(x, W);
    }();

    basic_tensor<T> y = make_output<T>(shape{geo.ow, geo.oh, OutC, B}, grad);
    // z keeps the pre-activation only when the activation's derivative needs it (gelu)
    basic_tensor<T> z = Act::needs_preactivation && grad ? basic_tensor<T>::empty(y.shape()) : y;
    const nn::detail::chunking ch(B);
    basic_tensor<T> scratch;
    if constexpr (!direct) scratch = basic_tensor<T>::empty(shape{ch.count * P * kkc});
    T const* xd = x.data();
    T const* wd = W.data();
    T const* bd = Bias ? bias.data() : nullptr;
    T* yd = y.data();
    T* zd = z.data();
    T* sd = scratch.data();
    device_ops& ops = nitro::detail::active_ops();  // taken here: the chunks run on worker threads, outside the step's context
    nn::detail::run_chunks(ch, 2.0 * double(B) * double(P) * double(kkc) * double(OutC), [&](std::int64_t c) {
      T* col = direct ? nullptr : sd + c * P * kkc;
      for (std::int64_t b = ch.begin(c); b < ch.end(c); ++b) {
        T const* xb = xd + b * in_plane;
        if constexpr (direct) col = const_cast<T*>(xb);
        else nn::detail::im2col<K, Stride, Pad>(xb, geo, col);
        T* zb = zd + b * P * OutC;
        // the bias first, then the product accumulates onto it: one pass over the output saved
        if constexpr (Bias)
          for (std::int64_t o = 0; o < OutC; ++o) flat(zb + o * P, P) = bd[o];
        ops.gemm(false, false, P, OutC, kkc, T(1), col, P, wd, kkc, Bias ? T(1) : T(0), zb, P);
        if constexpr (!Act::is_identity) {
          T* yb = yd + b * P * OutC;
          if (zb != yb) flat(yb, P * OutC) = flat(static_cast<T const*>(zb), P * OutC);
          Act::forward_inplace(flat(yb, P * OutC));
        }
      }
    });

    if (grad) {
      int xv = x.var(), wv = W.var(), bv = Bias ? bias.var() : -1, yv = y.var();
      T const* ycd = yd;
      T const* zcd = zd;
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        const std::int64_t n_act = Act::is_identity ? 0 : ch.count * P * OutC;
        const std::int64_t n_col = !direct && (wv >= 0 || xv >= 0) ? ch.count * P * kkc : 0;
        const std::int64_t n_dw = wv >= 0 ? ch.count * kkc * OutC : 0, n_db = bv >= 0 ? ch.count * OutC : 0;
        T* work = t.memory().allocate_n<T>(static_cast<std::size_t>(n_act + n_col + n_dw + n_db + 1));
        T* act_s = work;
        T* col_s = act_s + n_act;
        T* dw_s = col_s + n_col;
        T* db_s = dw_s + n_dw;
        std::memset(dw_s, 0, sizeof(T) * static_cast<std::size_t>(n_dw + n_db));
        T* gx = xv >= 0 ? t.grad<T>(xv) : nullptr;  // before the threads: the tape is not thread-safe
        device_ops& ops = nitro::detail::active_ops();  // likewise: the workers have no step context
        const double flops = 2.0 * double(B) * double(P) * double(kkc) * double(OutC) * (double(wv >= 0) + double(xv >= 0));
        nn::detail::run_chunks(ch, flops, [&](std::int64_t c) {
          T* col = col_s + c * P * kkc;
          T* dw = dw_s + c * kkc * OutC;
          T* db = db_s + c * OutC;
          for (std::int64_t b = ch.begin(c); b < ch.end(c); ++b) {
            T const* g = gy + b * P * OutC;
            if constexpr (!Act::is_identity) {  // g = gy * act'(.), one output map at a time, summed for the bias
              T* s = act_s + c * P * OutC;
              for (std::int64_t o = 0; o < OutC; ++o) {
                const std::int64_t at = b * P * OutC + o * P;
                auto S = flat(s + o * P, P);
                S = flat(gy + at, P);
                if constexpr (Act::needs_preactivation) Act::backward_inplace(S, flat(zcd + at, P));
                else Act::backward_inplace(S, flat(ycd + at, P));
                if (bv >= 0) db[o] += S.sum();
              }
              g = s;
            } else if (bv >= 0) {
              for (std::int64_t o = 0; o < OutC; ++o) db[o] += flat(g + o * P, P).sum();
            }
            T const* xb = xd + b * in_plane;
            if (wv >= 0) {
              T const* cb = xb;
              if constexpr (!direct) { nn::detail::im2col<K, Stride, Pad>(xb, geo, col); cb = col; }
              ops.gemm(true, false, kkc, OutC, P, T(1), cb, P, g, P, T(1), dw, kkc);
            }
            if (gx) {
              if constexpr (direct) {  // col2im is the identity: accumulate straight into dx
                ops.gemm(false, true, P, kkc, OutC, T(1), g, P, wd, kkc, T(1), gx + b * in_plane, P);
              } else {
                ops.gemm(false, true, P, kkc, OutC, T(1), g, P, wd, kkc, T(0), col, P);
                nn::detail::col2im<K, Stride, Pad>(static_cast<T const*>(col), geo, gx + b * in_plane);
              }
            }
          }
        });
        if (wv >= 0) {
          auto G = flat(t.grad<T>(wv), kkc * OutC);
          for (std::int64_t c = 0; c < ch.count; ++c) G += flat(static_cast<T const*>(dw_s + c * kkc * OutC), kkc * OutC);
        }
        if (bv >= 0) {
          auto G = flat(t.grad<T>(bv), OutC);
          for (std::int64_t c = 0; c < ch.count; ++c) G += flat(static_cast<T const*>(db_s + c * OutC), OutC);
        }
      });
    }
    return {y, st};
  }

 private:
  // A 1x1 kernel with stride 1 and no padding: each image already is its im2col matrix.
  static constexpr bool direct = K == 1 && Stride == 1 && Pad == 0;
};

// conv2d<InC, OutC, K, Stride, Pad>(activation, options): the layer value. Bias = false drops the bias.
template <std::int64_t InC, std::int64_t OutC, std::int64_t K, std::int64_t Stride = 1, std::int64_t Pad = 0, bool Bias = true,
          class Act = identity_t>
constexpr conv2d_layer<InC, OutC, K, Stride, Pad, Act, Bias> conv2d(Act = {}, conv2d_options options = {}) {
  return conv2d_layer<InC, OutC, K, Stride, Pad, Act, Bias>{options};
}

}  // namespace nitro::nn
