// nitro/optim/rules/sgd.hpp — stochastic gradient descent with momentum (heavy-ball or Nesterov).
//
//   nitro::optim::sgd()                                        w <- w - eta*g
//   nitro::optim::sgd({.momentum = 0.9, .nesterov = true})     PyTorch's torch.optim.SGD update:
//     b <- momentum*b + (1 - dampening)*g   (b <- g on the first step)
//     u <- g + momentum*b (Nesterov) or b;   w <- w - eta*u
// Fields: momentum, dampening (schedulable). State: one buffer, "momentum_buffer". With momentum 0
// the update is plain SGD whatever the dampening (as in PyTorch); the buffer then holds the
// gradient, so that momentum scheduled up from 0 starts from it.
#pragma once

#include "nitro/optim/rule.hpp"

#include <array>    // fields
#include <cstdint>  // int64_t
#include <string>   // describe

namespace nitro::optim {

struct sgd_options {
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
};

struct sgd_rule {
  using fields = field_names<"momentum", "dampening">;
  using paths = detail::prefixed_t<"sgd", fields>;
  using states = field_names<"momentum_buffer">;
  static constexpr std::array<domain, 2> domains{domain::nonnegative, domain::unit_closed};
  std::array<double, 2> values{0, 0};
  double default_lambda = 0;
  bool nesterov = false;

  using consts = rule_math::sgd_consts;  // the arithmetic: tensor/rule_math.hpp, shared with the CUDA kernel
  NITRO_HD_INLINE consts prepare(double const* f, std::int64_t t) const { return rule_math::sgd_consts_at(f[0], f[1], nesterov, t); }
  template <bool Decay, bool Anchor>
  static NITRO_HD_INLINE void element(consts const& k, float& u, float, float, float* s) noexcept {
    rule_math::sgd_direction(u, s[0], k);
  }
  template <bool Decay, bool Anchor>
  static void apply(consts const& k, block const& b) noexcept {
    auto u = detail::arr(b.u, b.n);
    auto buf = detail::arr(b.state[0], b.n);
    rule_math::sgd_direction(u, buf, k);
  }
  std::string describe(double const* f) const {
    return std::string("sgd(") + detail::describe_fields<fields>(f) + (nesterov ? ", nesterov" : "") + ")";
  }
};

constexpr sgd_rule sgd(sgd_options o = {}) {
  sgd_rule r;
  r.values = {o.momentum, o.dampening};
  r.nesterov = o.nesterov;
  return r;
}

}  // namespace nitro::optim
