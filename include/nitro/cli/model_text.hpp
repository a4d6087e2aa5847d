// nitro/cli/model_text.hpp — a model as `ir` and `check` print it: one row per layer (its
// description, features in and out, parameter shapes) and the kernels each layer runs.
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/cli/table.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/knobs/knob_value.hpp"
#include "nitro/nn/layers/chain.hpp"
#include "nitro/nn/layers/dense.hpp"
#include "nitro/nn/layers/model.hpp"
#include "nitro/nn/layers/repeat.hpp"

#include <cstdint>      // int64_t
#include <string>       // texts
#include <type_traits>  // traits
#include <utility>      // index_sequence
#include <vector>       // kernels

namespace nitro::cli {

namespace detail {

template <class L> struct is_chain : std::false_type {};
template <class... L> struct is_chain<nn::chain_layer<L...>> : std::true_type {};
template <class L> struct is_repeat : std::false_type {};
template <std::int64_t N, class B> struct is_repeat<nn::repeat_layer<N, B>> : std::true_type {};
template <class L> struct is_model : std::false_type {};
template <class M> struct is_model<nn::model_layer<M>> : std::true_type {};
template <class L> struct is_dense : std::false_type {};
template <std::int64_t I, std::int64_t O, class A, bool B> struct is_dense<nn::dense_layer<I, O, A, B>> : std::true_type {};

template <class Spec>
std::string spec_shapes(std::string const& prefix) {
  std::string s;
  for_each_leaf_type<Spec>([&](auto kp, auto leaf) {
    using Lf = typename decltype(leaf)::type;
    std::string dims;
    for (auto d : Lf::dims) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    s += (s.empty() ? "" : ", ") + prefix + std::string(decltype(kp)::view()) + " [" + dims + "]";
  });
  return s;
}

// The kernels a layer runs on the backend, as `ir` lists them: the CPU's, or with `on_cuda` the GPU's
// (kernels/ops.cuh: cuBLASLt products, whose own epilogue adds the bias and applies relu where the
// pre-activation need not be kept; any other activation is one kernel after the product). Dense
// layers are known here; any other layer may describe its own with
// `std::vector<std::string> kernels() const`.
template <class L>
std::vector<std::string> layer_kernels(L const& l, bool input_needs_grad, bool on_cuda = false) {
  if constexpr (requires { { l.kernels() } -> std::convertible_to<std::vector<std::string>>; }) {
    return l.kernels();
  } else if constexpr (is_dense<L>::value) {
    using Act = typename L::activation;
    constexpr auto I = L::in_features, O = L::out_features;
    const std::string o = std::to_string(O), i = std::to_string(I);
    std::vector<std::string> k;
    const std::string act = Act::is_identity ? std::string() : std::string(" + ") + Act::name();
    const bool bias = leaf_count<typename L::param_spec>() == 2;
    if (on_cuda) {
      // the tail after the product: bias and/or activation, in cuBLASLt's epilogue or one kernel
      const std::string tail = bias ? "bias" + act : std::string(Act::is_identity ? "" : Act::name());
      const bool in_epilogue = !Act::needs_preactivation && (Act::is_identity || Act::epilogue == epilogue_act::relu);
      k.push_back("forward   cuBLASLt gemm [" + o + " x " + i + "] . [" + i + " x B]" +
                  (tail.empty() ? std::string() : in_epilogue ? " + " + tail + " in cuBLASLt's epilogue (one launch)" : ", then " + tail + " (one kernel)"));
      if (!Act::is_identity || bias)
        k.push_back("backward  " + (Act::is_identity ? std::string() : std::string(Act::name()) + "' [" + o + " x B] (one kernel)" + (bias ? ", " : "")) +
                    (bias ? "bias gradient: row sums [" + o + " x B] -> [" + o + "] (one kernel)" : std::string()));
      k.push_back("backward  cuBLASLt gemm dW [" + o + " x B] . [B x " + i + "]");
      if (input_needs_grad) k.push_back("backward  cuBLASLt gemm dx [" + i + " x " + o + "] . [" + o + " x B]");
      return k;
    }
    k.push_back("forward   gemm<float> [" + o + " x " + i + "] . [" + i + " x B]" + (bias ? " + bias" : "") + act + " (one pass)");
    if (!Act::is_identity) k.push_back(std::string("backward  ") + Act::name() + "' elementwise [" + o + " x B]");
    if (bias) k.push_back("backward  bias gradient: row sums [" + o + " x B] -> [" + o + "]");
    k.push_back("backward  gemm<float> dW [" + o + " x B] . [B x " + i + "]");
    if (input_needs_grad) k.push_back("backward  gemm<float> dx [" + i + " x " + o + "] . [" + o + " x B]");
    return k;
  } else {
    return {};
  }
}

NITRO_RUNTIME_INLINE std::string features_text(std::int64_t f);

template <class L>
void describe_layers(table& t, L const& l, std::string const& name, bool input_needs_grad, std::vector<std::string>& kernels,
                     bool on_cuda = false) {
  if constexpr (is_chain<L>::value) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((describe_layers(t, l.template at<I>(), (name.empty() ? "" : name + ".") + std::string(layer_name<I + 1>().view()),
                        I > 0 || input_needs_grad, kernels, on_cuda)),
       ...);
    }(std::make_index_sequence<L::size()>{});
  } else if constexpr (is_model<L>::value) {  // one row per member, named as its leaves are
    bool first = true;
    for_each_field<typename L::model_type>([&](auto d) {
      using D = decltype(d);
      describe_layers(t, D::get(l.model), (name.empty() ? "" : name + ".") + std::string(D::name.view()), !first || input_needs_grad, kernels, on_cuda);
      first = false;
    });
  } else if constexpr (is_repeat<L>::value) {  // one row per copy, named 0, 1, ... as its leaves are
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((describe_layers(t, l.block, (name.empty() ? "" : name + ".") + std::string(number_text<I>().view()), I > 0 || input_needs_grad,
                        kernels, on_cuda)),
       ...);
    }(std::make_index_sequence<L::size()>{});
  } else {
    std::string params = spec_shapes<typename L::param_spec>(name.empty() ? "" : name + ".");
    t.row({name.empty() ? "model" : name, l.describe(), features_text(L::in_features) + " -> " + features_text(L::out_features),
           params.empty() ? "no parameters" : params});
    for (auto const& k : layer_kernels(l, input_needs_grad, on_cuda)) kernels.push_back((name.empty() ? "model" : name) + "  " + k);
  }
}

template <class T> std::string scalar_text(T const& v) {
  if constexpr (is_knob_type_v<T>) return knob_value::of(v).str();
  else return "-";
}

}  // namespace detail

}  // namespace nitro::cli

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::cli::detail {

NITRO_RUNTIME_INLINE std::string features_text(std::int64_t f) { return f == nn::dynamic ? std::string("dynamic") : std::to_string(f); }

}  // namespace nitro::cli::detail
#endif  // !NITRO_RUNTIME_EXTERN
