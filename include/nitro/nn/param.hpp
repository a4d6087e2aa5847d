// nitro/nn/param.hpp — how a layer declares its parameters and state: shapes the compiler knows.
//
//   using param_spec = tree<entry<"weight", param<Out, In>>, entry<"bias", param<Out>>>;
//
// A spec is a tree of `param<Dims...>` (trained) or `buffer<Dims...>` (state, e.g. running
// statistics) leaves. `params_t<Spec, T>` is the tree of tensors a layer receives: the same
// names, each leaf a basic_tensor<T> viewing its slice of a flat buffer.
#pragma once

#include "nitro/core/tree.hpp"
#include "nitro/tensor/shape.hpp"
#include "nitro/tensor/tensor.hpp"

#include <array>    // extents
#include <cstdint>  // int64_t

namespace nitro::nn {

template <std::int64_t... Dims>
struct param {
  static_assert(sizeof...(Dims) >= 1 && ((Dims > 0) && ...), "E-LAYER-016: nitro::nn::param<Dims...> needs at least one extent, each positive. Fix: param<128, 784>.");
  static constexpr std::array<std::int64_t, sizeof...(Dims)> dims{Dims...};
  static constexpr std::int64_t numel = (Dims * ...);
  static constexpr int rank = sizeof...(Dims);
  static constexpr bool trainable = true;
  static nitro::shape shape() { return nitro::shape{Dims...}; }
};
template <std::int64_t... Dims>
struct buffer {
  static constexpr std::array<std::int64_t, sizeof...(Dims)> dims{Dims...};
  static constexpr std::int64_t numel = (Dims * ...);
  static constexpr int rank = sizeof...(Dims);
  static constexpr bool trainable = false;
  static nitro::shape shape() { return nitro::shape{Dims...}; }
};

template <class T> struct is_spec_leaf : std::false_type {};
template <std::int64_t... D> struct is_spec_leaf<param<D...>> : std::true_type {};
template <std::int64_t... D> struct is_spec_leaf<buffer<D...>> : std::true_type {};

namespace detail {
template <class Spec, class T> struct instantiate { using type = basic_tensor<T>; };
template <class T, class... E> struct instantiate<tree<E...>, T> {
  using type = tree<entry<E::name, typename instantiate<typename E::type, T>::type>...>;
};
}  // namespace detail

// The tensors for a spec: same structure, leaves basic_tensor<T>.
template <class Spec, class T = float>
using params_t = typename detail::instantiate<Spec, T>::type;

// Total element count of a spec (compile time).
template <class Spec>
constexpr std::int64_t spec_numel() noexcept {
  std::int64_t n = 0;
  for_each_leaf_type<Spec>([&](auto, auto leaf) { n += decltype(leaf)::type::numel; });
  return n;
}

}  // namespace nitro::nn
