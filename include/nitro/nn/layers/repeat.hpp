// nitro/nn/layers/repeat.hpp — one block applied N times, each copy with its own parameters.
//
//   nitro::nn::repeat<N>(block)   N copies of block in sequence; N a compile-time count, so a
//                                 GraphConst knob (`layers`) compiles one program per value
//
// The copies are named 0, 1, ..., N-1, as PyTorch names the entries of an nn.ModuleList, so a
// transformer's `blocks` member holding repeat<4>(block) has the leaves blocks.0.layer_1.weight ...
// blocks.3.layer_2.bias, and param_group sees each copy's path. Each copy draws its initial values
// from its own stream (the seed folded with its index), so the copies start different and adding a
// fifth does not change the first four.
// A block whose fixed feature extents or channel counts differ cannot follow itself: E-SHAPE-016.
#pragma once

#include "nitro/core/fixed_string.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/nn/layers/chain.hpp"

#include <cstddef>  // size_t
#include <cstdint>  // int64_t, uint64_t
#include <string>   // describe
#include <utility>  // index_sequence, pair

namespace nitro::nn {

template <std::int64_t N> struct repeated_times {};
template <class Block> struct repeated_block {};
template <std::int64_t N> struct block_features_in {};
template <std::int64_t N> struct block_features_out {};

template <class Times, class Block, class In, class Out>
struct repeat_shape_mismatch {
  static_assert(always_false<Times, Block, In, Out>,
                "E-SHAPE-016: nitro::nn::repeat<N>(block) feeds each copy of the block into the next, but the block "
                "produces a different number of features or channels than it takes (see repeated_block<block>, "
                "block_features_in<n> and block_features_out<m> above). Fix: make the block end in what it starts with, "
                "or put the layer that changes the extent after the repeat.");
  static constexpr bool ok = false;
};

namespace detail {
template <std::int64_t N, class B>
constexpr bool check_repeat() {
  if constexpr (N > 1 && B::in_features != dynamic && B::out_features != dynamic && B::in_features != B::out_features)
    return repeat_shape_mismatch<repeated_times<N>, repeated_block<B>, block_features_in<B::in_features>,
                                 block_features_out<B::out_features>>::ok;
  else if constexpr (N > 1 && in_channels_of<B>() != dynamic && out_channels_of<B>() != dynamic && in_channels_of<B>() != out_channels_of<B>())
    return repeat_shape_mismatch<repeated_times<N>, repeated_block<B>, block_features_in<in_channels_of<B>()>,
                                 block_features_out<out_channels_of<B>()>>::ok;
  else return true;
}
}  // namespace detail

template <std::int64_t N, class Block>
struct repeat_layer {
  static_assert(N > 0, "E-LAYER-020: nitro::nn::repeat<N>(block) needs at least one copy. Fix: N >= 1 (repeat<4>(block)).");
  static_assert(layer<Block>,
                "E-LAYER-018: the argument of nitro::nn::repeat<N>(block) is not a nitro layer. Fix: pass a layer, e.g. "
                "repeat<4>(residual(chain(layer_norm<256>(), dense<256, 256>(gelu)))).");
  static_assert(checks_evaluated<detail::check_repeat<N, Block>()>);  // E-SHAPE-016
  static constexpr std::size_t copies = N > 0 ? static_cast<std::size_t>(N) : 0;

  template <std::size_t... I>
  static auto param_tree(std::index_sequence<I...>) -> tree<entry<number_text<I>(), typename Block::param_spec>...>;
  template <std::size_t... I>
  static auto state_tree(std::index_sequence<I...>) -> tree<entry<number_text<I>(), typename Block::state_spec>...>;

  using param_spec = decltype(param_tree(std::make_index_sequence<copies>{}));
  using state_spec = decltype(state_tree(std::make_index_sequence<copies>{}));
  static constexpr std::int64_t in_features = Block::in_features != dynamic ? Block::in_features : Block::out_features;
  static constexpr std::int64_t out_features = Block::out_features != dynamic ? Block::out_features : Block::in_features;
  static constexpr bool keeps_channels = detail::keeps_channels<Block>();

  Block block;

  static constexpr std::size_t size() noexcept { return copies; }

  template <class Ps, class St>
  void init(Ps& ps, St& st, rng& g) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      const std::uint64_t base = g();
      (
          [&] {
            rng copy(fold(base, I + 1));
            block.init(get<number_text<I>()>(ps), get<number_text<I>()>(st), copy);
          }(),
          ...);
    }(std::make_index_sequence<copies>{});
  }

  template <class T>
  std::pair<basic_tensor<T>, params_t<state_spec, T>> operator()(basic_tensor<T> const& x, params_t<param_spec, T> const& ps,
                                                                   params_t<state_spec, T> const& st) const {
    params_t<state_spec, T> st_new;
    basic_tensor<T> h = x;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            constexpr auto name = number_text<I>();
            auto [y, s] = block(h, get<name>(ps), get<name>(st));
            h = y;
            get<name>(st_new) = s;
          }(),
          ...);
    }(std::make_index_sequence<copies>{});
    return {h, st_new};
  }

  std::string describe() const { return "repeat<" + std::to_string(N) + ">(" + block.describe() + ")"; }
};

template <std::int64_t N, class Block>
constexpr repeat_layer<N, Block> repeat(Block block) {
  return repeat_layer<N, Block>{block};
}

}  // namespace nitro::nn
