// nitro/optim/rules/adam.hpp — Adam, and AdamW (Adam with decoupled weight decay).
//
//   nitro::optim::adam()                           PyTorch's torch.optim.Adam (no weight decay)
//   nitro::optim::adamw({.lambda = 1e-2})          PyTorch's torch.optim.AdamW: the same direction,
//                                                  with decoupled decay w <- w - eta*lambda*(w - anchor)
//     m <- beta1*m + (1 - beta1)*g;  v <- beta2*v + (1 - beta2)*g^2
//     u <- (m / (1 - beta1^t)) / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Fields: beta1, beta2, eps. States: "m", "v". AdamW's lambda is the group's `lambda` field (the
// default when the experiment has no lambda(group) hook). Coupled decay (torch Adam's
// weight_decay) is chain(decayed_weights(wd), adam()).
#pragma once

#include "nitro/optim/rule.hpp"

#include <array>    // fields
#include <cmath>    // pow, sqrt
#include <cstdint>  // int64_t
#include <string>   // describe
#include <type_traits>  // conditional_t

namespace nitro::optim {

struct adam_options {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};
struct adamw_options {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, lambda = 1e-2;
};

// adam and adamw differ only in their name and default lambda; the name is the rule's type, so a
// schedule key can name "adamw.beta1" at compile time.
template <bool Decoupled>
struct basic_adam_rule {
  using fields = field_names<"beta1", "beta2", "eps">;
  using paths = std::conditional_t<Decoupled, detail::prefixed_t<"adamw", fields>, detail::prefixed_t<"adam", fields>>;
  using states = field_names<"m", "v">;
  static constexpr std::array<domain, 3> domains{domain::unit_open, domain::unit_open, domain::nonnegative};
  static constexpr bool decoupled = Decoupled;
  std::array<double, 3> values{0.9, 0.999, 1e-8};
  double default_lambda = 0;

  using consts = rule_math::adam_consts;  // the arithmetic: tensor/rule_math.hpp, shared with the CUDA kernel
  NITRO_HD_INLINE consts prepare(double const* f, std::int64_t t) const { return rule_math::adam_consts_at(f[0], f[1], f[2], t); }
  template <bool Decay, bool Anchor>
  static NITRO_HD_INLINE void element(consts const& k, float& u, float, float, float* s) noexcept {
    rule_math::adam_direction(u, s[0], s[1], k);
  }
  template <bool Decay, bool Anchor>
  static void apply(consts const& k, block const& b) noexcept {
    auto u = detail::arr(b.u, b.n);
    auto m = detail::arr(b.state[0], b.n);
    auto v = detail::arr(b.state[1], b.n);
    rule_math::adam_direction(u, m, v, k);
  }
  std::string describe(double const* f) const { return std::string(Decoupled ? "adamw(" : "adam(") + detail::describe_fields<fields>(f) + ")"; }
};
using adam_rule = basic_adam_rule<false>;
using adamw_rule = basic_adam_rule<true>;

constexpr adam_rule adam(adam_options o = {}) {
  adam_rule r;
  r.values = {o.beta1, o.beta2, o.eps};
  return r;
}
constexpr adamw_rule adamw(adamw_options o = {}) {
  adamw_rule r;
  r.values = {o.beta1, o.beta2, o.eps};
  r.default_lambda = o.lambda;
  return r;
}

}  // namespace nitro::optim
