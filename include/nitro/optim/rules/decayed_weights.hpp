// nitro/optim/rules/decayed_weights.hpp — coupled (L2) weight decay, as a chain link.
//
//   chain(decayed_weights(1e-4), sgd({.momentum = 0.9}))   PyTorch's SGD(weight_decay=1e-4, momentum=0.9)
//   chain(decayed_weights(1e-4), adam())                   PyTorch's Adam(weight_decay=1e-4)
//     u <- u + weight_decay*(w - anchor)     on the leaves no_decay leaves decayed, toward the group's anchor
// Field: weight_decay. No state. This is the gradient of weight_decay/2*|w - anchor|^2, so the rule
// after it sees it; the group's `lambda` (decoupled decay) is the other kind and applies after the rule.
#pragma once

#include "nitro/optim/rule.hpp"

#include <array>    // fields
#include <cstdint>  // int64_t
#include <string>   // describe

namespace nitro::optim {

struct decayed_weights_rule {
  using fields = field_names<"weight_decay">;
  using paths = detail::prefixed_t<"decayed_weights", fields>;
  using states = field_names<>;
  static constexpr std::array<domain, 1> domains{domain::nonnegative};
  std::array<double, 1> values{0};
  double default_lambda = 0;

  struct consts { float wd; };
  NITRO_HD_INLINE consts prepare(double const* f, std::int64_t) const { return {float(f[0])}; }
  template <bool Decay, bool Anchor>
  static NITRO_HD_INLINE void element(consts const& k, float& u, float w, float a, float*) noexcept {
    if constexpr (Decay) rule_math::coupled_decay<Anchor>(u, w, a, k.wd);
  }
  template <bool Decay, bool Anchor>
  static void apply(consts const& k, block const& b) noexcept {
    if constexpr (Decay) {
      auto u = detail::arr(b.u, b.n);
      if constexpr (Anchor) rule_math::coupled_decay<true>(u, detail::arr(b.w, b.n), detail::arr(b.a, b.n), k.wd);
      else rule_math::coupled_decay<false>(u, detail::arr(b.w, b.n), 0.0f, k.wd);
    }
  }
  std::string describe(double const* f) const { return "decayed_weights(" + detail::describe_fields<fields>(f) + ")"; }
};

constexpr decayed_weights_rule decayed_weights(double weight_decay) {
  decayed_weights_rule r;
  r.values = {weight_decay};
  return r;
}

}  // namespace nitro::optim
