// nitro/optim/schedule_map.hpp — the compile-time map from schedule key to schedule factory.
//
//   auto schedules() const {
//     return nitro::schedule_map{
//         nitro::key<"eta"> = nitro::sched::one_cycle(lr),              // a rule field: every group's eta
//         nitro::key<"smoothing"> = [](std::int64_t) {                  // a Device field, written each step
//           return [](std::int64_t t) { return 0.1 * double(t) / 5000; }; },
//         nitro::key<"opt.encoder.eta"> = nitro::sched::cosine(1e-4),   // path-bound: one group
//         nitro::key<"device.lambda"> = 0.5};                           // qualified: the Device field
//   }
//   nitro::Nitro h(e, nitro::schedules = nitro::schedule_map{nitro::key<"eta"> = 1e-3});  // the run keyword
//
// The keys are template arguments, so they are resolved by the compiler (optim/resolve.hpp): a key
// that binds nothing, binds twice, or names a group param_group does not produce is a compile
// error. The factories are values: called once with the horizon when the handle is built.
#pragma once

#include "nitro/core/fixed_string.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/optim/group.hpp"
#include "nitro/optim/schedule.hpp"

#include <cstddef>      // size_t
#include <string>       // describe()
#include <tuple>        // the entries
#include <type_traits>  // traits
#include <utility>      // forward

namespace nitro {

template <class Key, class Factory>
struct schedule_is_not_a_factory {
  static_assert(always_false<Key, Factory>,
                "E-SCHED-007: a schedule must be a number or a factory of the horizon: callable with the total number "
                "of optimizer steps, returning a curve callable with the step (from 1) that returns a number. Fix: "
                "`[](std::int64_t total) { return [total](std::int64_t t) { return ...; }; }` or nitro::sched::...");
  static constexpr bool ok = false;
};
template <class Argument>
struct schedules_takes_key_value_pairs {
  static_assert(always_false<Argument>,
                "E-SCHED-008: nitro::schedule_map{...} takes entries written nitro::key<\"name\"> = schedule. Fix: write each "
                "argument as nitro::key<\"eta\"> = nitro::sched::one_cycle(1e-3).");
  static constexpr bool ok = false;
};

// One entry: a key and its factory (a bare number is stored as sched::constant).
template <fixed_string K, class F>
struct schedule_entry {
  static constexpr auto key = K;
  using factory_type = F;
  using schedule_entry_tag = void;  // what is_schedule_entry detects (nvcc: see is_keyword_arg)
  F factory;
};

template <fixed_string K>
struct schedule_key {
  static constexpr auto name = K;
  template <class F>
  constexpr auto operator=(F&& f) const {  // NOLINT: assignment syntax is the point
    using D = std::remove_cvref_t<F>;
    if constexpr (std::is_arithmetic_v<D>) return schedule_entry<K, sched::constant>{sched::constant(static_cast<double>(f))};
    else if constexpr (schedule_factory<D>) return schedule_entry<K, D>{static_cast<F&&>(f)};
    else {
      (void)schedule_is_not_a_factory<str_of<K>, returned<D>>::ok;
      return schedule_entry<K, sched::constant>{sched::constant(0)};
    }
  }
};
// nitro::key<"eta">, nitro::key<"opt.encoder.eta">, nitro::key<"device.lambda">
template <fixed_string K>
inline constexpr schedule_key<K> key{};

template <class T> struct is_schedule_entry : std::bool_constant<requires { typename T::schedule_entry_tag; }> {};

namespace detail {
template <class A>
constexpr bool check_schedule_entry() {
  if constexpr (is_schedule_entry<A>::value) return true;
  else return schedules_takes_key_value_pairs<A>::ok;
}
}  // namespace detail

template <class... Entries>
struct schedule_map {
  // A failing gate (not checks_evaluated): clang then stops at the map, where it went on to report
  // every use of the entry that is not one; the coded error naming the argument comes first.
  static_assert((detail::check_schedule_entry<Entries>() && ...),
                "E-SCHED-008: an argument of nitro::schedule_map{...} is not an entry (the error above names it). Fix: as it says.");
  static constexpr std::size_t size = sizeof...(Entries);
  std::tuple<Entries...> entries;

  constexpr schedule_map(Entries... e) : entries(std::move(e)...) {}  // NOLINT: nitro::schedule_map{entries...}

  // The keys, for show and the run's records: "eta, beta1" (the curves are the optimizer's rows).
  std::string describe() const {
    std::string s;
    ((s += (s.empty() ? "" : ", ") + std::string(Entries::key.view())), ...);
    return s.empty() ? std::string("none") : s;
  }
};
template <class... Entries>
schedule_map(Entries...) -> schedule_map<Entries...>;

// Whether every argument of a schedule map is an entry (else E-SCHED-008 has named the one that is
// not, and the optimizer program reads the map as empty rather than report each use of it).
template <class M> inline constexpr bool schedule_entries_valid = true;
template <class... Entries>
inline constexpr bool schedule_entries_valid<schedule_map<Entries...>> = (is_schedule_entry<Entries>::value && ...);

template <class T> struct is_schedule_map : std::false_type {};
template <class... E> struct is_schedule_map<schedule_map<E...>> : std::true_type {};

}  // namespace nitro
