// nitro/nn/layers/chain.hpp — layers applied in sequence; children are named layer_1, layer_2, ...
//
// Adjacent feature extents are compared by the compiler when both are fixed: chaining
// dense<784, 128> into dense<256, 10> does not compile, and the error names both layers.
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

namespace detail {
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
  static_assert((layer<Layers> && ...), "nitro::nn::chain: every argument must be a nitro layer");
  static_assert(detail::check_chain<Layers...>(std::make_index_sequence<(sizeof...(Layers) > 0 ? sizeof...(Layers) - 1 : 0)>{}));

  template <std::size_t... I>
  static auto param_tree(std::index_sequence<I...>) -> tree<entry<layer_name<I + 1>(), typename Layers::param_spec>...>;
  template <std::size_t... I>
  static auto state_tree(std::index_sequence<I...>) -> tree<entry<layer_name<I + 1>(), typename Layers::state_spec>...>;

  using param_spec = decltype(param_tree(std::index_sequence_for<Layers...>{}));
  using state_spec = decltype(state_tree(std::index_sequence_for<Layers...>{}));
  static constexpr std::int64_t in_features = detail::first_in<Layers...>();
  static constexpr std::int64_t out_features = detail::last_out<Layers...>();

  std::tuple<Layers...> layers;

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
