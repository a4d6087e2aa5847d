// nitro/nn/cuda/mlp_traits.hpp — which models the CUDA backend runs as a fused MLP, read off
// the model's type.
//
//   using M = decltype(FashionMLP<128>{}.build_model());   // chain(dense<784,128>(relu), dense<128,128>(relu), dense<128,10>())
//   nitro::cuda::dense_chain<M>::layers                    // 3: every layer a nitro::nn::dense
//   nitro::cuda::dense_chain<M>::fusable                   // true: width 128, one hidden activation
//   nitro::cuda::fused_mlp_config_t<M, tile::math::tf32>   // mlp_config<784, 128, 10, 1, relu, identity, tf32>
//
// A dense layer's extents are template arguments, so a GraphConst width reaches this trait as a
// constant and selects the kernel instantiation: the C++ compiler is the graph compiler. A chain of
// dense layers that does not fit the fused kernel (a width of 256, hidden layers of different
// widths) still runs on the device, one cuBLASLt product per layer; asking explicitly for the fused
// kernel (fused_mlp_config_t) of such a chain is a compile error naming the chain and the reason.
#pragma once

#include "nitro/core/meta.hpp"
#include "nitro/nn/layers/activation.hpp"
#include "nitro/nn/layers/chain.hpp"
#include "nitro/nn/layers/dense.hpp"
#include "nitro/tensor/cuda/mlp_tile.hpp"
#include "nitro/tensor/cuda/pointwise.hpp"
#include "nitro/tensor/cuda/tile.hpp"

#include <array>        // the layer table
#include <cstddef>      // size_t
#include <cstdint>      // int64_t
#include <tuple>        // the activation at a position
#include <type_traits>  // conditional

namespace nitro::cuda {

// ---- why a chain is not fused (these names appear in the diagnostic) -------------------------------
struct fusable_chain {};
template <class Layer> struct not_a_dense_layer {};
struct fewer_than_two_dense_layers {};
template <std::int64_t Width> struct width_not_a_multiple_of_16 {};
template <std::int64_t Width> struct width_outside_16_to_128 {};
template <std::int64_t Out> struct output_wider_than_128 {};
template <std::int64_t Width, std::int64_t Other> struct hidden_widths_differ {};
template <class Activation, class Other> struct hidden_activations_differ {};
struct more_than_10_hidden_layers {};

template <class Model, class Reason>
struct fused_mlp_unsupported {
  static_assert(always_false<Model, Reason>,
                "E-CUDA-101: the fused MLP kernel was requested for a model it cannot run (the model and the reason are "
                "the template arguments above). It takes a nitro::nn::chain of at least two nitro::nn::dense layers: "
                "in -> W -> ... -> W -> out, W a multiple of 16 between 16 and 128, one activation for the hidden layers, "
                "out at most 128. Fix: change the GraphConst width, or let nitro::cuda::dense_program pick its path "
                "(it runs any dense chain through cuBLASLt when the fused kernel does not apply).");
  static constexpr bool ok = false;
};

template <class A>
constexpr activation_kind activation_of() {
  if constexpr (std::is_same_v<A, nn::relu_t>) return activation_kind::relu;
  else if constexpr (std::is_same_v<A, nn::tanh_t>) return activation_kind::tanh;
  else if constexpr (std::is_same_v<A, nn::sigmoid_t>) return activation_kind::sigmoid;
  else if constexpr (std::is_same_v<A, nn::gelu_t>) return activation_kind::gelu;
  else return activation_kind::identity;
}

// One dense layer, as the device needs it.
struct dense_info {
  std::int64_t in = 0, out = 0;
  activation_kind act = activation_kind::identity;
  bool bias = true;
};

template <class L> struct dense_layer_of : std::false_type {};
template <std::int64_t I, std::int64_t O, class A, bool B>
struct dense_layer_of<nn::dense_layer<I, O, A, B>> : std::true_type {
  static constexpr dense_info info{I, O, activation_of<A>(), B};
  using activation = A;
};

// ---- the trait --------------------------------------------------------------------------------------
template <class Model>
struct dense_chain {
  static constexpr bool is_dense = false;  // not a dense chain: the device program does not take it
  static constexpr std::size_t layers = 0;
  static constexpr bool fusable = false;
  using reason = not_a_dense_layer<Model>;
};

// A single dense layer: runs through cuBLASLt; the fused kernel needs two layers or more.
template <std::int64_t I, std::int64_t O, class A, bool B>
struct dense_chain<nn::dense_layer<I, O, A, B>> {
  static constexpr bool is_dense = true;
  static constexpr std::size_t layers = 1;
  static constexpr std::array<dense_info, 1> info{dense_layer_of<nn::dense_layer<I, O, A, B>>::info};
  static constexpr bool single = true;
  static constexpr bool fusable = false;
  using reason = fewer_than_two_dense_layers;
};

namespace detail {
template <class... L>
struct first_non_dense { using type = void; };
template <class H, class... R>
struct first_non_dense<H, R...> {
  using type = std::conditional_t<dense_layer_of<H>::value, typename first_non_dense<R...>::type, H>;
};

template <class... L>
struct chain_reason {
  static constexpr std::size_t n = sizeof...(L);
  static constexpr std::array<dense_info, n> info{dense_layer_of<L>::info...};
  template <std::size_t I> using act_at = std::tuple_element_t<I, std::tuple<typename dense_layer_of<L>::activation...>>;

  static constexpr std::int64_t width = info[0].out;
  static constexpr std::size_t first_other_width = [] {
    for (std::size_t i = 1; i + 1 < n; ++i)
      if (info[i].in != width || info[i].out != width) return i;
    return std::size_t(0);
  }();
  static constexpr std::size_t first_other_act = [] {
    for (std::size_t i = 1; i + 1 < n; ++i)
      if (info[i].act != info[0].act) return i;
    return std::size_t(0);
  }();
  static constexpr std::int64_t other_width =
      first_other_width ? (info[first_other_width].in != width ? info[first_other_width].in : info[first_other_width].out) : width;

  static auto pick() {
    if constexpr (width % 16 != 0) return width_not_a_multiple_of_16<width>{};
    else if constexpr (width < 16 || width > 128) return width_outside_16_to_128<width>{};
    else if constexpr (first_other_width != 0) return hidden_widths_differ<width, other_width>{};
    else if constexpr (info[n - 1].in != width) return hidden_widths_differ<width, info[n - 1].in>{};
    else if constexpr (first_other_act != 0) return hidden_activations_differ<act_at<0>, act_at<first_other_act>>{};
    else if constexpr (info[n - 1].out > 128) return output_wider_than_128<info[n - 1].out>{};
    else if constexpr (n > max_mlp_layers) return more_than_10_hidden_layers{};
    else return fusable_chain{};
  }
  using type = decltype(pick());
};
}  // namespace detail

template <class... L>
struct dense_chain<nn::chain_layer<L...>> {
  static constexpr bool is_dense = sizeof...(L) >= 1 && (dense_layer_of<L>::value && ...);
  static constexpr std::size_t layers = is_dense ? sizeof...(L) : 0;
  static constexpr std::array<dense_info, sizeof...(L)> info{[] {
    if constexpr (dense_layer_of<L>::value) return dense_layer_of<L>::info;
    else return dense_info{};
  }()...};
  static constexpr bool single = false;

 private:
  static auto pick() {
    if constexpr (!is_dense) return not_a_dense_layer<typename detail::first_non_dense<L...>::type>{};
    else if constexpr (sizeof...(L) < 2) return fewer_than_two_dense_layers{};
    else return typename detail::chain_reason<L...>::type{};
  }

 public:
  using reason = decltype(pick());
  static constexpr bool fusable = std::is_same_v<reason, fusable_chain>;
};

// The fused kernel's configuration for a model; E-CUDA-101 when it does not apply.
template <class Model, tile::math Math>
struct fused_mlp {
  using chain = dense_chain<Model>;
  static constexpr bool check() {
    if constexpr (chain::fusable) return true;
    else return fused_mlp_unsupported<Model, typename chain::reason>::ok;
  }
  static_assert(checks_evaluated<check()>);
  static constexpr auto pick() {
    if constexpr (chain::fusable) {
      constexpr auto& i = chain::info;
      constexpr std::size_t n = chain::layers;
      return mlp_config<static_cast<int>(i[0].in), static_cast<int>(i[0].out), static_cast<int>(i[n - 1].out), static_cast<int>(n) - 2,
                        i[0].act, i[n - 1].act, Math>{};
    } else {
      return mlp_config<16, 16, 16, 0, activation_kind::identity, activation_kind::identity, Math>{};
    }
  }
  using config = decltype(pick());
};

template <class Model, tile::math Math = tile::math::tf32>
using fused_mlp_config_t = typename fused_mlp<Model, Math>::config;

// ---- models the device program runs: dense layers (fused or not) ------------------------------------
template <class Model, class Reason>
struct dense_program_needs_dense_layers {
  static_assert(always_false<Model, Reason>,
                "E-CUDA-102: nitro::cuda::dense_program runs models made of nitro::nn::dense layers (one dense layer, or a "
                "chain of them); the model above holds another layer (the reason names it). Fix: run this model on the CPU "
                "backend, or build it from dense layers.");
  static constexpr bool ok = false;
};

// true for a dense model; E-CUDA-102 naming the model and its first other layer otherwise
template <class Model>
constexpr bool require_dense_model() {
  if constexpr (dense_chain<Model>::is_dense) return true;
  else return dense_program_needs_dense_layers<Model, typename dense_chain<Model>::reason>::ok;
}

}  // namespace nitro::cuda
