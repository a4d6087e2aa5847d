// nitro/nn/layers/residual.hpp — a residual connection: y = x + f(x).
//
//   nitro::nn::residual(f)   f any layer (a chain, a dense, a norm followed by a dense, ...) whose
//                            output has its input's shape
//
// The body keeps its parameter names: residual(chain(layer_norm<256>(), dense<256, 256>())) has
// the leaves layer_1.weight, layer_1.bias, layer_2.weight, layer_2.bias, as the chain alone has, so
// wrapping a body in a skip connection changes no checkpoint name and no param_group path.
// A body whose fixed feature extents differ (dense<256, 128>) does not compile (E-SHAPE-015), nor
// one whose fixed channel counts differ (conv2d<8, 16, 3, 1, 1>); any other shape change is found
// at run time (E-LAYER-019: a convolution without padding shrinks the image), before the sum.
// The sum is the tensor library's add, one tape node; the gradient of x is the sum of the skip's
// and the body's.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/nn/layers/chain.hpp"
#include "nitro/tensor/ops/elementwise.hpp"

#include <cstdint>  // int64_t
#include <string>   // describe
#include <utility>  // pair

namespace nitro::nn {

template <class Body> struct residual_body {};
template <std::int64_t N> struct features_in {};
template <std::int64_t N> struct features_out {};
template <std::int64_t N> struct channels_in {};
template <std::int64_t N> struct channels_out {};

// The diagnostics for a body that changes what the skip connection adds it to.
template <class Body, class In, class Out>
struct residual_shape_mismatch {
  static_assert(always_false<Body, In, Out>,
                "E-SHAPE-015: the body of nitro::nn::residual(f) produces a different number of features than it takes "
                "(see residual_body<f>, features_in<n> and features_out<m> above), so x + f(x) has no meaning. Fix: make "
                "f end in as many features as it starts with (dense<256, 256>, or chain(dense<256, 1024>, dense<1024, 256>)).");
  static constexpr bool ok = false;
};
template <class Body, class In, class Out>
struct residual_channel_mismatch {
  static_assert(always_false<Body, In, Out>,
                "E-SHAPE-015: the body of nitro::nn::residual(f) produces a different number of channels than it takes "
                "(see residual_body<f>, channels_in<n> and channels_out<m> above), so x + f(x) has no meaning. Fix: make "
                "f's last convolution produce as many channels as its first takes.");
  static constexpr bool ok = false;
};

namespace detail {
template <class F>
constexpr bool check_residual() {
  if constexpr (F::in_features != dynamic && F::out_features != dynamic && F::in_features != F::out_features)
    return residual_shape_mismatch<residual_body<F>, features_in<F::in_features>, features_out<F::out_features>>::ok;
  else if constexpr (in_channels_of<F>() != dynamic && out_channels_of<F>() != dynamic && in_channels_of<F>() != out_channels_of<F>())
    return residual_channel_mismatch<residual_body<F>, channels_in<in_channels_of<F>()>, channels_out<out_channels_of<F>()>>::ok;
  else return true;
}
}  // namespace detail

template <class Body>
struct residual_layer {
  static_assert(layer<Body>,
                "E-LAYER-018: the argument of nitro::nn::residual(f) is not a nitro layer. Fix: pass a layer, e.g. "
                "residual(chain(layer_norm<256>(), dense<256, 256>(gelu))).");
  static_assert(checks_evaluated<detail::check_residual<Body>()>);  // E-SHAPE-015

  using param_spec = typename Body::param_spec;
  using state_spec = typename Body::state_spec;
  static constexpr std::int64_t in_features = Body::in_features != dynamic ? Body::in_features : Body::out_features;
  static constexpr std::int64_t out_features = in_features;
  // channels pass through unchanged (the check above), so a chain compares them across the block
  static constexpr bool keeps_channels = true;

  Body body;

  template <class Ps, class St>
  void init(Ps& ps, St& st, rng& g) const {
    body.init(ps, st, g);
  }

  template <class T>
  std::pair<basic_tensor<T>, params_t<state_spec, T>> operator()(basic_tensor<T> const& x, params_t<param_spec, T> const& ps,
                                                                   params_t<state_spec, T> const& st) const {
    auto [fx, st_new] = body(x, ps, st);
    // the sum would broadcast a [F, 1] body output over the batch: a shape change is the user's
    // mistake, named before it becomes a silent broadcast
    if (fx.shape() != x.shape())
      throw error("E-LAYER-019",
                  describe() + ": the body turned an input of shape " + x.shape().to_string() + " into " + fx.shape().to_string() +
                      ", so x + f(x) has no meaning",
                  "make the body keep its input's shape (pad convolutions: conv2d<C, C, 3, 1, 1>; end in as many features as it starts with)");
    return {x + fx, st_new};
  }

  std::string describe() const { return "residual(" + body.describe() + ")"; }
};

template <class Body>
constexpr residual_layer<Body> residual(Body body) {
  return residual_layer<Body>{body};
}

}  // namespace nitro::nn
