// nitro/nn/layers/activation.hpp — activations as layers and as fused epilogues of dense/conv.
//
// `nitro::nn::relu` is a value usable two ways: as a layer in a chain, and as the activation a
// dense layer fuses into its product (dense<784, 256>(nitro::nn::relu)). Each activation knows its
// derivative either from its output (relu, tanh, sigmoid) or from its input (gelu), which decides
// what the fused layer keeps for the backward pass.
#pragma once

#include "nitro/nn/layer.hpp"
#include "nitro/tensor/detail/record.hpp"
#include "nitro/tensor/epilogue.hpp"
#include "nitro/tensor/ops/elementwise.hpp"
#include "nitro/tensor/ops/softmax.hpp"

#include <concepts>  // convertible_to
#include <string>   // describe
#include <utility>  // pair

namespace nitro::nn {

namespace detail {
// A fusable activation: which epilogue it is (tensor/epilogue.hpp), which the layers that fuse it
// (dense, conv2d) hand to the step's kernels.
template <class Derived, epilogue_act A>
struct activation : stateless {
  static constexpr epilogue_act epilogue = A;
  static constexpr bool needs_preactivation = nitro::needs_preactivation(A);
  static constexpr bool is_identity = A == epilogue_act::identity;
  static constexpr bool keeps_channels = true;  // chain compares the channels across it
  template <class T>
  auto operator()(basic_tensor<T> const& x, tree<> const&, tree<> const& st) const {
    return std::pair{Derived::apply(x), st};
  }
};
}  // namespace detail

struct identity_t : detail::activation<identity_t, epilogue_act::identity> {
  std::string describe() const { return "identity"; }
  static constexpr char const* name() noexcept { return "identity"; }
  template <class T> static basic_tensor<T> apply(basic_tensor<T> const& x) { return x; }
};
struct relu_t : detail::activation<relu_t, epilogue_act::relu> {
  std::string describe() const { return "relu"; }
  static constexpr char const* name() noexcept { return "relu"; }
  template <class T> static basic_tensor<T> apply(basic_tensor<T> const& x) { return nitro::relu(x); }
};
struct tanh_t : detail::activation<tanh_t, epilogue_act::tanh> {
  std::string describe() const { return "tanh"; }
  static constexpr char const* name() noexcept { return "tanh"; }
  template <class T> static basic_tensor<T> apply(basic_tensor<T> const& x) { return nitro::tanh(x); }
};
struct sigmoid_t : detail::activation<sigmoid_t, epilogue_act::sigmoid> {
  std::string describe() const { return "sigmoid"; }
  static constexpr char const* name() noexcept { return "sigmoid"; }
  template <class T> static basic_tensor<T> apply(basic_tensor<T> const& x) { return nitro::sigmoid(x); }
};
struct gelu_t : detail::activation<gelu_t, epilogue_act::gelu> {
  std::string describe() const { return "gelu"; }
  static constexpr char const* name() noexcept { return "gelu"; }
  template <class T> static basic_tensor<T> apply(basic_tensor<T> const& x) { return nitro::gelu(x); }
};
struct softmax_t : stateless {
  std::string describe() const { return "softmax"; }
  template <class T>
  auto operator()(basic_tensor<T> const& x, tree<> const&, tree<> const& st) const {
    return std::pair{nitro::softmax(x), st};
  }
};

inline constexpr identity_t identity{};
inline constexpr relu_t relu{};
inline constexpr tanh_t tanh{};
inline constexpr sigmoid_t sigmoid{};
inline constexpr gelu_t gelu{};
inline constexpr softmax_t softmax{};

template <class A>
concept fusable_activation = requires {
  { A::epilogue } -> std::convertible_to<epilogue_act>;
};

}  // namespace nitro::nn
