// nitro/optim/sam.hpp — sharpness-aware minimisation: SAM and ASAM wrap a rule.
//
//   auto optimizer() const { return nitro::optim::sam(nitro::optim::sgd({.momentum = 0.9}), {.rho = 0.05}); }
//   auto optimizer() const { return nitro::optim::asam(nitro::optim::adamw(), {.rho = 0.5, .adaptive_eta = 0.01}); }
//
// A step then takes two passes over each micro-batch: the gradient g at w, then the gradient at
// w + e with
//   e = rho * T^2 g / |T g|        (T = 1 for SAM; for ASAM T = |w| + adaptive_eta on the leaves
//                                   adaptive_perturb(keypath, x) selects, by default rank >= 2)
// where the norm runs over every perturbed leaf of every group (leaves no_perturb(keypath, x)
// selects, and groups whose rule is not SAM-wrapped, stay where they are). The wrapped rule then
// updates w with the second gradient. Fields: the rule's, then rho (and adaptive_eta for ASAM),
// all schedulable. The perturbation pass itself lives in the program (program.hpp).
#pragma once

#include "nitro/optim/rule.hpp"

#include <array>    // fields
#include <cstdint>  // int64_t
#include <string>   // describe
#include <type_traits>  // conditional_t

namespace nitro::optim {

struct sam_options {
  double rho = 0.05;
};
struct asam_options {
  double rho = 0.5;
  double adaptive_eta = 0.01;
};

template <class R, bool Adaptive>
struct sam_rule {
  static_assert(rule<R>, "E-OPT-023: the first argument of nitro::optim::sam(rule, ...) is not a rule. Fix: sam(adamw(...), 0.05) with sgd, adam, adamw, lion or a chain.");
  static_assert(!perturbs<R>::value, "E-OPT-024: sam(sam(...)) perturbs twice. Fix: wrap the rule once: sam(adamw(...), rho).");
  static constexpr bool adaptive = Adaptive;
  using own_fields = std::conditional_t<Adaptive, field_names<"rho", "adaptive_eta">, field_names<"rho">>;
  using fields = typename detail::concat_names<typename R::fields, own_fields>::type;
  using paths = std::conditional_t<Adaptive, detail::prefixed_t<"asam", typename detail::concat_names<rule_paths_t<R>, own_fields>::type>,
                                   detail::prefixed_t<"sam", typename detail::concat_names<rule_paths_t<R>, own_fields>::type>>;
  using states = typename R::states;
  static constexpr std::size_t rho_index = R::fields::size;
  static constexpr std::size_t adaptive_eta_index = R::fields::size + 1;
  static constexpr auto domains = [] {
    std::array<domain, fields::size> d{};
    std::size_t k = 0;
    for (auto x : R::domains) d[k++] = x;
    d[k++] = domain::nonnegative;
    if constexpr (Adaptive) d[k++] = domain::nonnegative;
    return d;
  }();

  R inner;
  std::array<double, fields::size> values{};
  double default_lambda = 0;

  using consts = typename R::consts;
  NITRO_HD_INLINE consts prepare(double const* f, std::int64_t t) const { return inner.prepare(f, t); }
  template <bool Decay, bool Anchor>
  static NITRO_HD_INLINE void element(consts const& k, float& u, float w, float a, float* s) noexcept {
    R::template element<Decay, Anchor>(k, u, w, a, s);
  }
  template <bool Decay, bool Anchor>
  static void apply(consts const& k, block const& b) noexcept {
    apply_rule<R, Decay, Anchor>(k, b);
  }
  std::string describe(double const* f) const {
    std::string s = std::string(Adaptive ? "asam(" : "sam(") + inner.describe(f) + ", rho=" + detail::format_number(f[rho_index]);
    if constexpr (Adaptive) s += ", adaptive_eta=" + detail::format_number(f[adaptive_eta_index]);
    return s + ")";
  }
};
template <class R, bool A> struct perturbs<sam_rule<R, A>> : std::true_type {};

template <class R>
constexpr sam_rule<R, false> sam(R r, sam_options o = {}) {
  sam_rule<R, false> s{r, {}, r.default_lambda};
  for (std::size_t i = 0; i < R::fields::size; ++i) s.values[i] = r.values[i];
  s.values[R::fields::size] = o.rho;
  return s;
}
template <class R>
constexpr sam_rule<R, true> asam(R r, asam_options o = {}) {
  sam_rule<R, true> s{r, {}, r.default_lambda};
  for (std::size_t i = 0; i < R::fields::size; ++i) s.values[i] = r.values[i];
  s.values[R::fields::size] = o.rho;
  s.values[R::fields::size + 1] = o.adaptive_eta;
  return s;
}

}  // namespace nitro::optim
