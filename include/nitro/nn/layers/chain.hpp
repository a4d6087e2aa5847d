// nitro/nn/layers/chain.hpp — layers applied in sequence; children are named layer_1, layer_2, ...
//
// Adjacent feature extents are compared by the compiler when both are fixed: chaining
// dense<784, 128> into dense<256, 10> does not compile, and the error names both layers. So are
// channel counts, across the layers that keep them: conv2d<1, 8, 3>, max_pool<2>, conv2d<16, 8, 3>
// does not compile (E-SHAPE-014), naming both convolutions and their positions.
#pragma once

#include "nitro/core/fixed_string.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/nn/layer.hpp"

#include <cstddef>  // size_t
#include <string>   // describe
#include <tuple>    // children
#include <utility>  // index_sequence, pair

namespace nitro::nn {

template <std::size_t Position> struct layer_position {};
template <class Producer, class Consumer> struct feeds_into {};

// The diagnostic for adjacent layers whose feature extents differ.
template <class Where, class Feeds>
struct chain_shape_mismatch {
  static_assert(always_false<Where, Feeds>,
                "E-SHAPE-013: in nitro::nn::chain, a layer produces a different number of features than the "
                "next layer takes (see feeds_into<producer, consumer> above). Fix: make the consumer's input "
                "extent equal the producer's output extent.");
  static constexpr bool ok = false;
};

// The diagnostic for a layer taking a different number of channels than the nearest earlier layer
// produces, the layers between keeping the channel count (pooling, activations, dropout).
template <class Position, class Layer> struct channels_from {};
template <class Position, class Layer> struct channels_into {};
template <class Producer, class Consumer>
struct chain_channel_mismatch {
  static_assert(always_false<Producer, Consumer>,
                "E-SHAPE-014: in nitro::nn::chain, a layer takes a different number of channels than the layer "
                "before it produces (see channels_from<position, producer> and channels_into<position, consumer> "
                "above; the layers between keep the channel count). Fix: make the consumer's input channels equal "
                "the producer's output channels.");
  static constexpr bool ok = false;
};

namespace detail {
template <class L> constexpr std::int64_t in_channels_of() {
  if constexpr (requires { L::in_channels; }) return L::in_channels;
  else return dynamic;
}
template <class L> constexpr std::int64_t out_channels_of() {
  if constexpr (requires { L::out_channels; }) return L::out_channels;
  else return dynamic;
}
template <class L> constexpr bool keeps_channels() {
  if constexpr (requires { L::keeps_channels; }) return L::keeps_channels;
  else return false;
}
// The first channel mismatch of a chain: {producer, consumer} indices, or {-1, -1}. A layer with
// out_channels sets the count; one that keeps_channels passes it on; any other (flatten, dense)
// forgets it.
struct channel_pair { int producer = -1, consumer = -1; };
template <class... L>
constexpr channel_pair first_channel_mismatch() {
  constexpr std::size_t n = sizeof...(L);
  const std::int64_t ins[n + 1] = {in_channels_of<L>()..., dynamic};
  const std::int64_t outs[n + 1] = {out_channels_of<L>()..., dynamic};
  const bool keeps[n + 1] = {keeps_channels<L>()..., false};
  std::int64_t channels = dynamic;
  int from = -1;
  for (std::size_t i = 0; i < n; ++i) {
    if (ins[i] != dynamic && channels != dynamic && ins[i] != channels) return {from, static_cast<int>(i)};
    if (outs[i] != dynamic) {
      channels = outs[i];
      from = static_cast<int>(i);
    } else if (!keeps[i]) {
      channels = dynamic;
      from = -1;
    }
  }
  return {};
}
template <class... L>
constexpr bool check_channels() {
  constexpr channel_pair m = first_channel_mismatch<L...>();
  if constexpr (m.consumer >= 0) {
    using Ls = std::tuple<L...>;
    return chain_channel_mismatch<channels_from<layer_position<m.producer + 1>, std::tuple_element_t<m.producer, Ls>>,
                                  channels_into<layer_position<m.consumer + 1>, std::tuple_element_t<m.consumer, Ls>>>::ok;
  } else {
    return true;
  }
}

template <std::size_t I, class A, class B>
constexpr bool check_adjacent() {
  if constexpr (A::out_features != dynamic && B::in_features != dynamic && A::out_features != B::in_features)
    return chain_shape_mismatch<layer_position<I + 1>, feeds_into<A, B>>::ok;
  else return true;
}
template <class... L, std::size_t... I>
constexpr bool check_chain(std::index_sequence<I...>) {
  using Ls = std::tuple<L...>;
  if constexpr (sizeof...(L) < 2) return true;
  else return (check_adjacent<I, std::tuple_element_t<I, Ls>, std::tuple_element_t<I + 1, Ls>>() && ...);
}
template <class... L>
constexpr std::int64_t first_in() {
  if constexpr (sizeof...(L) == 0) return dynamic;
  else return std::tuple_element_t<0, std::tuple<L...>>::in_features;
}
// out extent of the chain: the last fixed one, if no later layer changes features dynamically
template <class... L>
constexpr std::int64_t last_out() {
  if constexpr (sizeof...(L) == 0) return dynamic;
  else {
    std::int64_t r = dynamic;
    ((r = L::out_features != dynamic ? L::out_features : (L::in_features == dynamic ? r : dynamic)), ...);
    return r;
  }
}
}  // namespace detail

template <class... Layers>
struct chain_layer {
  static_assert((layer<Layers> && ...),
                "E-LAYER-009: an argument of nitro::nn::chain(...) is not a nitro layer. Fix: pass layers (nitro::nn::dense<In, Out>(), "
                "conv2d, pools, norms, dropout, a nested chain).");
  static_assert(checks_evaluated<detail::check_chain<Layers...>(std::make_index_sequence<(sizeof...(Layers) > 0 ? sizeof...(Layers) - 1 : 0)>{}),
                                 detail::check_channels<Layers...>()>);  // E-SHAPE-013, E-SHAPE-014

  template <std::size_t... I>
  static auto param_tree(std::index_sequence<I...>) -> tree<entry<layer_name<I + 1>(), typename Layers::param_spec>...>;
  template <std::size_t... I>
  static auto state_tree(std::index_sequence<I...>) -> tree<entry<layer_name<I + 1>(), typename Layers::state_spec>...>;

  using param_spec = decltype(param_tree(std::index_sequence_for<Layers...>{}));
  using state_spec = decltype(state_tree(std::index_sequence_for<Layers...>{}));
  static constexpr std::int64_t in_features = detail::first_in<Layers...>();
  static constexpr std::int64_t out_features = detail::last_out<Layers...>();

  // Each layer built with {} (its options' defaults); the tuple's own default constructor value-initialises
  // them, and g++ 12 then left an initializer option zeroed (kind 0: zeros) instead of its default.
  std::tuple<Layers...> layers{Layers{}...};

  template <std::size_t I> constexpr auto const& at() const noexcept { return std::get<I>(layers); }
  static constexpr std::size_t size() noexcept { return sizeof...(Layers); }

  template <class Ps, class St>
  void init(Ps& ps, St& st, rng& g) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      // each child draws from its own stream, so adding a layer does not change the others' weights
      std::uint64_t base = g();
      (
          [&] {
            rng child(fold(base, I + 1));
            std::get<I>(layers).init(get<layer_name<I + 1>()>(ps), get<layer_name<I + 1>()>(st), child);
          }(),
          ...);
    }(std::index_sequence_for<Layers...>{});
  }

  template <class T>
  std::pair<basic_tensor<T>, params_t<state_spec, T>> operator()(basic_tensor<T> const& x, params_t<param_spec, T> const& ps,
                                                                   params_t<state_spec, T> const& st) const {
    params_t<state_spec, T> st_new;
    basic_tensor<T> h = x;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            constexpr auto name = layer_name<I + 1>();
            auto [y, s] = std::get<I>(layers)(h, get<name>(ps), get<name>(st));
            h = y;
            get<name>(st_new) = s;
          }(),
          ...);
    }(std::index_sequence_for<Layers...>{});
    return {h, st_new};
  }

  std::string describe() const {
    std::string s = "chain(";
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((s += (I ? ", " : "") + std::get<I>(layers).describe()), ...);
    }(std::index_sequence_for<Layers...>{});
    return s + ")";
  }
};

template <class... Layers>
constexpr chain_layer<Layers...> chain(Layers... layers) {
  return chain_layer<Layers...>{std::tuple<Layers...>{layers...}};
}

}  // namespace nitro::nn
