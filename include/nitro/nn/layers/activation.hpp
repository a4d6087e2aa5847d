// nitro/nn/layers/activation.hpp — activations as layers and as fused epilogues of dense/conv.
//
// `nitro::nn::relu` is a value usable two ways: as a layer in a chain, and as the activation a
// dense layer fuses into its product (dense<784, 256>(nitro::nn::relu)). Each activation knows its
// derivative either from its output (relu, tanh, sigmoid) or from its input (gelu), which decides
// what the fused layer keeps for the backward pass.
#pragma once

#include "nitro/nn/layer.hpp"
#include "nitro/tensor/detail/record.hpp"
#include "nitro/tensor/ops/elementwise.hpp"
#include "nitro/tensor/ops/softmax.hpp"

#include <string>   // describe
#include <utility>  // pair

namespace nitro::nn {

namespace detail {
template <class Derived>
struct activation : stateless {
  static constexpr bool keeps_channels = true;  // chain compares the channels across it
  template <class T>
  auto operator()(basic_tensor<T> const& x, tree<> const&, tree<> const& st) const {
    return std::pair{Derived::apply(x), st};
  }
};
}  // namespace detail

struct identity_t : detail::activation<identity_t> {
  static constexpr bool needs_preactivation = false;
  static constexpr bool is_identity = true;
  std::string describe() const { return "identity"; }
  static constexpr char const* name() noexcept { return "identity"; }
  template <class T> static basic_tensor<T> apply(basic_tensor<T> const& x) { return x; }
  template <class A> static void forward_inplace(A&&) {}
  // g *= f'(.) given output y (and pre-activation z when needs_preactivation)
  template <class G, class Y> static void backward_inplace(G&&, Y const&) {}
};
struct relu_t : detail::activation<relu_t> {
  static constexpr bool needs_preactivation = false;
  static constexpr bool is_identity = false;
  std::string describe() const { return "relu"; }
  static constexpr char const* name() noexcept { return "relu"; }
  template <class T> static basic_tensor<T> apply(basic_tensor<T> const& x) { return nitro::relu(x); }
  template <class A> static void forward_inplace(A&& a) { a = a.max(typename std::remove_cvref_t<A>::Scalar(0)); }
  template <class G, class Y> static void backward_inplace(G&& g, Y const& y) {
    using S = typename std::remove_cvref_t<G>::Scalar;
    g = (y > S(0)).select(g, S(0));
  }
};
struct tanh_t : detail::activation<tanh_t> {
  static constexpr bool needs_preactivation = false;
  static constexpr bool is_identity = false;
  std::string describe() const { return "tanh"; }
  static constexpr char const* name() noexcept { return "tanh"; }
  template <class T> static basic_tensor<T> apply(basic_tensor<T> const& x) { return nitro::tanh(x); }
  template <class A> static void forward_inplace(A&& a) { a = a.tanh(); }
  template <class G, class Y> static void backward_inplace(G&& g, Y const& y) {
    using S = typename std::remove_cvref_t<G>::Scalar;
    g *= S(1) - y.square();
  }
};
struct sigmoid_t : detail::activation<sigmoid_t> {
  static constexpr bool needs_preactivation = false;
  static constexpr bool is_identity = false;
  std::string describe() const { return "sigmoid"; }
  static constexpr char const* name() noexcept { return "sigmoid"; }
  template <class T> static basic_tensor<T> apply(basic_tensor<T> const& x) { return nitro::sigmoid(x); }
  template <class A> static void forward_inplace(A&& a) { a = a.logistic(); }
  template <class G, class Y> static void backward_inplace(G&& g, Y const& y) {
    using S = typename std::remove_cvref_t<G>::Scalar;
    g *= y * (S(1) - y);
  }
};
struct gelu_t : detail::activation<gelu_t> {
  static constexpr bool needs_preactivation = true;
  static constexpr bool is_identity = false;
  std::string describe() const { return "gelu"; }
  static constexpr char const* name() noexcept { return "gelu"; }
  template <class T> static basic_tensor<T> apply(basic_tensor<T> const& x) { return nitro::gelu(x); }
  template <class A> static void forward_inplace(A&& a) { a = nitro::detail::gelu_fn::f(a); }  // coefficient-wise: no aliasing
  // for gelu the second argument is the pre-activation z
  template <class G, class Z> static void backward_inplace(G&& g, Z const& z) { g *= nitro::detail::gelu_fn::df(z, z); }
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
concept fusable_activation = requires { A::needs_preactivation; A::is_identity; };

}  // namespace nitro::nn
