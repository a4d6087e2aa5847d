// nitro/optim/rules/lion.hpp — Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms").
//
//   nitro::optim::lion({.beta1 = 0.9, .beta2 = 0.99, .lambda = 0})
//     u <- sign(beta1*m + (1 - beta1)*g);  m <- beta2*m + (1 - beta2)*g;  w <- w - eta*u
// with decoupled decay through the group's lambda, as in the paper's reference implementation.
// Fields: beta1, beta2. State: "m". Lion's steps have unit size per element: use a learning rate
// 3-10x smaller than AdamW's and a lambda 3-10x larger.
#pragma once

#include "nitro/optim/rule.hpp"

#include <array>    // fields
#include <cstdint>  // int64_t
#include <string>   // describe

namespace nitro::optim {

struct lion_options {
  double beta1 = 0.9, beta2 = 0.99, lambda = 0;
};

struct lion_rule {
  using fields = field_names<"beta1", "beta2">;
  using paths = detail::prefixed_t<"lion", fields>;
  using states = field_names<"m">;
  static constexpr std::array<domain, 2> domains{domain::unit_closed, domain::unit_closed};
  std::array<double, 2> values{0.9, 0.99};
  double default_lambda = 0;

  using consts = rule_math::lion_consts;  // the arithmetic: tensor/rule_math.hpp, shared with the CUDA kernel
  NITRO_HD_INLINE consts prepare(double const* f, std::int64_t) const { return rule_math::lion_consts_of(f[0], f[1]); }
  template <bool Decay, bool Anchor>
  static NITRO_HD_INLINE void element(consts const& k, float& u, float, float, float* s) noexcept {
    rule_math::lion_direction(u, s[0], k);
  }
  template <bool Decay, bool Anchor>
  static void apply(consts const& k, block const& b) noexcept {
    float* __restrict u = b.u;
    float* __restrict m = b.state[0];
    for (std::int64_t i = 0; i < b.n; ++i) rule_math::lion_direction(u[i], m[i], k);  // a plain loop: the compiler vectorises the sign
  }
  std::string describe(double const* f) const { return "lion(" + detail::describe_fields<fields>(f) + ")"; }
};

constexpr lion_rule lion(lion_options o = {}) {
  lion_rule r;
  r.values = {o.beta1, o.beta2};
  r.default_lambda = o.lambda;
  return r;
}

}  // namespace nitro::optim
