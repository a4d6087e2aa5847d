// nitro/nn/layer.hpp — what a layer is.
//
// A layer is a small value (its options) plus types the compiler reads:
//   param_spec, state_spec      trees of param<...>/buffer<...> leaves: names and static shapes
//   in_features, out_features   feature extents when fixed (nitro::nn::dynamic otherwise), so that
//                               a chain of mismatched layers is a compile error
//   init(ps, st, rng)           fills its parameters and state (trees of tensors of any scalar type)
//   operator()(x, ps, st)       -> std::pair{y, st_new}: the Lux calling convention. Layers read the
//                               mode (training or not) from the step context.
//   describe()                  one line for `ir` and `show`
// Layers live in nn/layers/, one header each.
#pragma once

#include "nitro/core/rng.hpp"
#include "nitro/core/tree.hpp"
#include "nitro/nn/param.hpp"
#include "nitro/tensor/tensor.hpp"

#include <cstdint>  // int64_t
#include <string>   // describe
#include <utility>  // pair

namespace nitro::nn {

inline constexpr std::int64_t dynamic = -1;

// Base for layers without parameters or state; derive and override what differs.
struct stateless {
  using param_spec = tree<>;
  using state_spec = tree<>;
  static constexpr std::int64_t in_features = dynamic;
  static constexpr std::int64_t out_features = dynamic;
  template <class Ps, class St>
  void init(Ps&, St&, rng&) const {}
};

template <class L>
concept layer = requires {
  typename L::param_spec;
  typename L::state_spec;
  { L::in_features } -> std::convertible_to<std::int64_t>;
  { L::out_features } -> std::convertible_to<std::int64_t>;
} && requires(L const& l) {
  { l.describe() } -> std::convertible_to<std::string>;
};

template <class L, class T = float> using layer_params = params_t<typename L::param_spec, T>;
template <class L, class T = float> using layer_state = params_t<typename L::state_spec, T>;

// Is the current step in training mode (dropout active, batch statistics used and updated)?
inline bool training_mode() noexcept {
  step_context* c = current_context();
  return c && c->training;
}

// A feature-count mismatch found at run time (when at least one side is dynamic).
// `layer` is called only to build the message, so a correct step builds no string.
template <class Describe>
inline void check_features(std::int64_t expected, std::int64_t got, Describe const& layer, shape const& s) {
  if (expected != dynamic && expected != got)
    throw error("E-SHAPE-012",
                layer() + " expects " + std::to_string(expected) + " input features, got " + std::to_string(got) + " (input shape " +
                    s.to_string() + ")",
                "make the previous layer produce " + std::to_string(expected) + " features, or change this layer's input size");
}

}  // namespace nitro::nn
