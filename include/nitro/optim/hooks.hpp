// nitro/optim/hooks.hpp — the experiment's optimizer hooks, found by name and checked by the compiler.
//
// Per group (the argument is the group's tag; each hook may also be written without it, for every group):
//   auto optimizer(nitro::group<"encoder">) const      the group's rule (default: nitro::optim::adamw())
//   double learning_rate(nitro::group<"encoder">) const the group's rate; its RATIO to learning_rate()
//                                                       multiplies any eta schedule
//   double lambda(nitro::group<"encoder">) const       decoupled decay (default: the rule's, adamw 0.01)
//   auto decay_anchor(nitro::group<"encoder">) const   nitro::anchor::zero (default), w0, values(...)
// Per leaf (kp is nitro::keypath<"layer_1.weight">, x the leaf's initial tensor):
//   bool no_decay(auto kp, nitro::Tensor const& x) const         default: x.rank() < 2
//   bool no_perturb(auto kp, nitro::Tensor const& x) const       default: false
//   bool adaptive_perturb(auto kp, nitro::Tensor const& x) const default: x.rank() >= 2
// A per-group overload whose group param_group does not produce (a misspelt name) is a compile
// error listing the groups; so is a hook returning the wrong kind of value.
#pragma once

#include "nitro/bind/hook.hpp"
#include "nitro/core/fixed_string.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/optim/anchor.hpp"
#include "nitro/optim/group.hpp"
#include "nitro/optim/rule.hpp"
#include "nitro/optim/rules/adam.hpp"
#include "nitro/tensor/tensor.hpp"

#include <cstdint>      // uint32_t
#include <type_traits>  // traits
#include <utility>      // declval

namespace nitro {

NITRO_DETAIL_DEFINE_HOOK(optimizer)
NITRO_DETAIL_DEFINE_HOOK(learning_rate)
NITRO_DETAIL_DEFINE_HOOK(lambda)
NITRO_DETAIL_DEFINE_HOOK(decay_anchor)
NITRO_DETAIL_DEFINE_HOOK(no_decay)
NITRO_DETAIL_DEFINE_HOOK(no_perturb)
NITRO_DETAIL_DEFINE_HOOK(adaptive_perturb)

// ---- diagnostics --------------------------------------------------------------------------------
template <class Hook, class Group, class Groups>
struct per_group_hook_names_unknown_group {
  static_assert(always_false<Hook, Group, Groups>,
                "E-OPT-001: a per-group hook (learning_rate, lambda, decay_anchor or optimizer) is written for a group "
                "that param_group does not produce (the hook, the group and the groups param_group produces are shown "
                "above). Fix: spell the group as param_group returns it, or add leaves to that group.");
  static constexpr bool ok = false;
};
template <class Hook, class Group, class Returned>
struct optimizer_must_return_a_rule {
  static_assert(always_false<Hook, Group, Returned>,
                "E-OPT-003: optimizer() must return a rule: nitro::optim::sgd(...), adam(...), adamw(...), lion(...), "
                "chain(...), sam(...) or asam(...). Fix: return one of those.");
  static constexpr bool ok = false;
};
template <class Hook, class Group, class Returned>
struct decay_anchor_must_return_an_anchor {
  static_assert(always_false<Hook, Group, Returned>,
                "E-OPT-004: decay_anchor() must return nitro::anchor::zero, nitro::anchor::w0 or nitro::anchor::values(...). "
                "Fix: return one of those.");
  static constexpr bool ok = false;
};
template <class Hook, class Keypath, class Returned>
struct leaf_hook_must_return_bool {
  static_assert(always_false<Hook, Keypath, Returned>,
                "E-OPT-005: no_decay, no_perturb and adaptive_perturb take (keypath, tensor) and return bool. Fix: "
                "`bool no_decay(auto kp, nitro::Tensor const& x) const { return x.rank() < 2; }`.");
  static constexpr bool ok = false;
};
template <class Hook, class Group, class Returned>
struct rate_hook_must_return_a_number {
  static_assert(always_false<Hook, Group, Returned>,
                "E-OPT-006: learning_rate and lambda return a number (double). Fix: `double learning_rate(nitro::group<\"...\">) "
                "const { return 1e-3; }`.");
  static constexpr bool ok = false;
};

namespace optim::detail {

template <class Groups> struct group_set;
template <class... G> struct group_set<nitro::detail::tlist<G...>> {
  static constexpr bool contains(std::string_view n) noexcept { return ((G::view() == n) || ...); }
};

// Converts to group<N> for no N: for an N param_group does NOT produce, checking the conversion's
// constraint instantiates the diagnostic, so the coded error naming the hook, the misspelt group
// and the groups there are is the first thing the compiler prints (every misspelt overload is one
// candidate, so each is named). A bare static_assert after it would come first otherwise.
template <class Hook, class Layout, fixed_string N>
inline constexpr bool unknown_group_reported = per_group_hook_names_unknown_group<Hook, str_of<N>, typename Layout::diagnostic_names>::ok;

template <class Hook, class Layout>
struct unknown_group_probe {
  template <fixed_string N>
    requires(!group_set<typename Layout::groups>::contains(N.view()) && unknown_group_reported<Hook, Layout, N>)
  operator group<N>() const {  // NOLINT: implicit by design; never satisfied
    return {};
  }
};
struct any_probe {};  // converts to nothing: a hook accepting it is generic in its argument

// Checks hook H of E for overloads written for a group param_group does not produce: overload
// resolution with the probe reports each (E-OPT-001) while the compiler evaluates this.
template <class Hook, class E, class Layout>
constexpr bool per_group_hook_checked() {
  if constexpr (!Hook::template present<E>) return true;
  else if constexpr (Hook::template callable<E const, any_probe>) return true;  // generic: called with known groups only
  else return !Hook::template callable<E const, unknown_group_probe<Hook, Layout>>;  // never callable: the probe converts to nothing
}

// ---- per-group values ---------------------------------------------------------------------------
template <class E, class G>
constexpr auto rule_for(E const& e) {
  if constexpr (hook::optimizer::callable<E const, G>) {
    using R = std::remove_cvref_t<decltype(e.optimizer(G{}))>;
    if constexpr (rule<R>) return e.optimizer(G{});
    else { (void)optimizer_must_return_a_rule<hook::optimizer, str_of<G::name>, returned<R>>::ok; return adamw(); }
  } else if constexpr (hook::optimizer::callable<E const>) {
    using R = std::remove_cvref_t<decltype(e.optimizer())>;
    if constexpr (rule<R>) return e.optimizer();
    else { (void)optimizer_must_return_a_rule<hook::optimizer, str_of<G::name>, returned<R>>::ok; return adamw(); }
  } else {
    return adamw();
  }
}
template <class E, class G>
using rule_for_t = decltype(rule_for<E, G>(std::declval<E const&>()));

template <class E, class G>
constexpr auto anchor_for(E const& e) {
  if constexpr (hook::decay_anchor::callable<E const, G>) {
    using A = std::remove_cvref_t<decltype(e.decay_anchor(G{}))>;
    if constexpr (is_anchor<A>::value) return e.decay_anchor(G{});
    else { (void)decay_anchor_must_return_an_anchor<hook::decay_anchor, str_of<G::name>, returned<A>>::ok; return anchor::zero; }
  } else if constexpr (hook::decay_anchor::callable<E const>) {
    using A = std::remove_cvref_t<decltype(e.decay_anchor())>;
    if constexpr (is_anchor<A>::value) return e.decay_anchor();
    else { (void)decay_anchor_must_return_an_anchor<hook::decay_anchor, str_of<G::name>, returned<A>>::ok; return anchor::zero; }
  } else {
    return anchor::zero;
  }
}
template <class E, class G>
using anchor_for_t = decltype(anchor_for<E, G>(std::declval<E const&>()));

// learning_rate(G) / lambda(G): the value and whether the experiment gave one.
template <class Hook, class E, class G>
constexpr bool has_group_value() {
  return Hook::template callable<E const, G> || (std::is_same_v<Hook, hook::lambda> && Hook::template callable<E const>);
}
template <class Hook, class E, class G>
double group_value(E const& e) {
  auto check = [](auto v) {
    using V = decltype(v);
    if constexpr (std::is_convertible_v<V, double>) return static_cast<double>(v);
    else { (void)rate_hook_must_return_a_number<Hook, str_of<G::name>, returned<V>>::ok; return 0.0; }
  };
  if constexpr (Hook::template callable<E const, G>) return check(Hook::call(e, G{}));
  else return check(Hook::call(e));
}

// ---- per-leaf flags -----------------------------------------------------------------------------
// Whether hook H of E, asked about leaf Path, answers a bool (E-OPT-005 otherwise). The program
// asks for every leaf when it is instantiated, so the diagnostic precedes whatever a step compiles.
template <class Hook, class E, fixed_string Path>
constexpr bool leaf_hook_checked() {
  if constexpr (Hook::template callable<E const, keypath<Path>, Tensor const&>) {
    using R = decltype(Hook::call(std::declval<E const&>(), keypath<Path>{}, std::declval<Tensor const&>()));
    if constexpr (std::is_convertible_v<R, bool>) return true;
    else return leaf_hook_must_return_bool<Hook, str_of<Path>, returned<R>>::ok;
  } else if constexpr (Hook::template present<E>) {
    return leaf_hook_must_return_bool<Hook, str_of<Path>, returned<void>>::ok;
  } else {
    return true;
  }
}
template <class E, class Paths> struct leaf_hooks_checked;
template <class E, class... L> struct leaf_hooks_checked<E, nitro::detail::tlist<L...>> {
  static constexpr bool value = ((leaf_hook_checked<hook::no_decay, E, L::path>() && leaf_hook_checked<hook::no_perturb, E, L::path>() &&
                                  leaf_hook_checked<hook::adaptive_perturb, E, L::path>()) && ...);
};

// The hook's answer for leaf Path, else the fallback (a hook that does not answer a bool was named
// by leaf_hook_checked when the program was instantiated).
template <class Hook, class E, fixed_string Path>
bool leaf_flag(E const& e, Tensor const& x, bool fallback) {
  if constexpr (Hook::template present<E> && leaf_hook_checked<Hook, E, Path>()) return static_cast<bool>(Hook::call(e, keypath<Path>{}, x));
  else return fallback;
}

}  // namespace optim::detail
}  // namespace nitro
