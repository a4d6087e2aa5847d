// nitro/knobs/declarations.hpp — an experiment's knobs, variants and sweeps as the compiler sees
// them, checked.
//
//   nitro::declarations<E>::ok          every check below passed (a failed one is a compile error)
//   nitro::knob_traits<E, "lr">         where the knob lives (field or run keyword), its C++ type
//
// The mistakes the compiler can see are compile errors whose first lines name them:
// (names print as character packs: knob_name<nitro::fixed_string<2>{"lr"}>, the same in g++ and clang)
//   E-KNOB-001  knob_declared_twice<E, knob_name<"lr">>
//   E-KNOB-002  knob_names_no_field<E, knob_name<"lrr">>, knob_type_not_supported<E, knob_name<..>, given<T>>
//   E-KNOB-003  variant_sets_undeclared_knob<E, variant_name<"small">, knob_name<"lyrs">>, and the same
//               for a sweep axis (sweep_sets_undeclared_knob)
//   E-KNOB-004  sweep_base_variant_undeclared<E, sweep_name<..>, variant_name<..>> (a :variant no one declared)
//   E-KNOB-006  variant_declared_twice<E, variant_name<"small">>, variant_sets_knob_twice<...>, and
//               variants_not_constant<E>: the C++ meaning of the note's "late variant" — a variant set
//               that is not a compile-time constant would exist only after the experiment does, too late
//               for the selection, which is made before anything reads a knob
//   E-KNOB-007  a variant or axis value that does not fit the knob's type (an enum knob takes its own
//               enum's values; a list knob a std::array of numbers, of the array's length)
//   E-KNOB-008  sweep_declared_twice, sweep_sets_knob_twice, knobs_not_constant, sweeps_not_constant
// `seed` is a knob of every experiment: declared by it, or added by nitro (the run keyword).
#pragma once

#include "nitro/bind/hook.hpp"
#include "nitro/core/fixed_string.hpp"
#include "nitro/core/markers.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/core/reflect.hpp"
#include "nitro/knobs/declare.hpp"
#include "nitro/knobs/keyword_knobs.hpp"
#include "nitro/knobs/knob_value.hpp"

#include <cstddef>      // size_t
#include <string>       // std::string knobs
#include <string_view>  // names
#include <tuple>        // lists
#include <type_traits>  // traits

namespace nitro {

NITRO_DETAIL_DEFINE_HOOK(knobs)
NITRO_DETAIL_DEFINE_HOOK(variants)
NITRO_DETAIL_DEFINE_HOOK(sweeps)

// ---- the diagnostics ------------------------------------------------------------------------------
template <class Experiment, class Knob>
struct knob_declared_twice {
  static_assert(always_false<Experiment, Knob>,
                "E-KNOB-001: a knob is declared twice in knobs(). Fix: declare each knob once (one nitro::knob<\"name\">).");
  static constexpr bool ok = false;
};
template <class Experiment, class Knob>
struct knob_names_no_field {
  static_assert(always_false<Experiment, Knob>,
                "E-KNOB-002: a knob names neither a field of the experiment (listed in NITRO_EXPERIMENT) nor a run "
                "keyword (seed, max_epochs, batch_size, ...). Fix: add the field, or correct the knob's name.");
  static constexpr bool ok = false;
};
template <class Experiment, class Knob, class Type>
struct knob_type_not_supported {
  static_assert(always_false<Experiment, Knob, Type>,
                "E-KNOB-002: a knob's field has a type no knob can hold. Fix: use bool, an integer, float, double, "
                "std::string (optionally inside nitro::GraphConst, nitro::Device or nitro::Host), an enum described "
                "by NITRO_KNOB_ENUM(Enum, value, ...), or a std::vector / std::array of numbers.");
  static constexpr bool ok = false;
};
template <class Experiment, class Variant, class Knob>
struct variant_sets_undeclared_knob {
  static_assert(always_false<Experiment, Variant, Knob>,
                "E-KNOB-003: a variant sets a knob that knobs() does not declare. Fix: declare the knob with "
                "nitro::knob<\"name\">, or correct the name in nitro::set<\"name\">.");
  static constexpr bool ok = false;
};
template <class Experiment, class Sweep, class Knob>
struct sweep_sets_undeclared_knob {
  static_assert(always_false<Experiment, Sweep, Knob>,
                "E-KNOB-003: a sweep has an axis over a knob that knobs() does not declare (seed is always declared). "
                "Fix: declare the knob with nitro::knob<\"name\">, or correct the name in nitro::axis<\"name\">.");
  static constexpr bool ok = false;
};
template <class Experiment, class Sweep, class Variant>
struct sweep_base_variant_undeclared {
  static_assert(always_false<Experiment, Sweep, Variant>,
                "E-KNOB-004: a sweep's base variant (nitro::base<\"name\">) is not declared in variants(). Fix: declare "
                "the variant, or correct its name.");
  static constexpr bool ok = false;
};
template <class Experiment, class Variant>
struct variant_declared_twice {
  static_assert(always_false<Experiment, Variant>,
                "E-KNOB-006: two variants have the same name. Fix: give each variant its own name (variants do not "
                "compose, so a second declaration could only shadow the first).");
  static constexpr bool ok = false;
};
template <class Experiment, class Variant, class Knob>
struct variant_sets_knob_twice {
  static_assert(always_false<Experiment, Variant, Knob>,
                "E-KNOB-006: a variant sets the same knob twice. Fix: keep one nitro::set<\"name\"> per knob.");
  static constexpr bool ok = false;
};
template <class Experiment>
struct variants_not_constant {
  static_assert(always_false<Experiment>,
                "E-KNOB-006: variants() is not a compile-time constant, so its variants would exist only after the "
                "experiment does (the note's late variant): the selection is made before anything reads a knob. Fix: "
                "`static constexpr auto variants() { return nitro::variants(...); }` with constant values.");
  static constexpr bool ok = false;
};
template <class Experiment, class Where, class Knob, class Value>
struct knob_value_does_not_fit {
  static_assert(always_false<Experiment, Where, Knob, Value>,
                "E-KNOB-007: a variant or sweep gives a knob a value of another kind (a string for a number, a number "
                "for a bool, ...). Fix: give a value of the knob's type.");
  static constexpr bool ok = false;
};
template <class Experiment, class Sweep>
struct sweep_declared_twice {
  static_assert(always_false<Experiment, Sweep>,
                "E-KNOB-008: two sweeps have the same name. Fix: give each sweep its own name.");
  static constexpr bool ok = false;
};
template <class Experiment, class Sweep, class Knob>
struct sweep_sets_knob_twice {
  static_assert(always_false<Experiment, Sweep, Knob>,
                "E-KNOB-008: a sweep has two axes over the same knob. Fix: put all its values on one nitro::axis.");
  static constexpr bool ok = false;
};
template <class Experiment>
struct knobs_not_constant {
  static_assert(always_false<Experiment>,
                "E-KNOB-008: knobs() is not a compile-time constant. Fix: `static constexpr auto knobs() { return "
                "nitro::knobs(nitro::knob<\"name\">(\"doc\"), ...); }`.");
  static constexpr bool ok = false;
};
template <class Experiment>
struct sweeps_not_constant {
  static_assert(always_false<Experiment>,
                "E-KNOB-008: sweeps() is not a compile-time constant. Fix: `static constexpr auto sweeps() { return "
                "nitro::sweeps(nitro::sweep<\"name\">(nitro::axis<\"knob\">(...)), ...); }`.");
  static constexpr bool ok = false;
};

// ---- where a knob lives -------------------------------------------------------------------------
namespace detail {

template <class T> struct knob_storage { using type = T; };
template <class T, T V> struct knob_storage<GraphConst<T, V>> { using type = T; };
template <class T> struct knob_storage<Device<T>> { using type = T; };
template <class T> struct knob_storage<Host<T>> { using type = T; };

template <fixed_string Name, class... D>
constexpr auto find_field(type_list<D...>) {
  constexpr std::size_t n = sizeof...(D);
  constexpr std::size_t at = [] {
    std::size_t i = 0, found = n;
    ((D::name.view() == Name.view() && found == n ? (found = i, ++i) : ++i), ...);
    return found;
  }();
  if constexpr (at == n) return std::type_identity<void>{};
  else return std::type_identity<typename nth<at, D...>::type>{};
}

template <class E>
concept constant_knobs = requires { typename std::bool_constant<(static_cast<void>(E::knobs()), true)>; };
template <class E>
concept constant_variants = requires { typename std::bool_constant<(static_cast<void>(E::variants()), true)>; };
template <class E>
concept constant_sweeps = requires { typename std::bool_constant<(static_cast<void>(E::sweeps()), true)>; };

}  // namespace detail

template <class E, fixed_string Name>
struct knob_traits {
  using field = typename decltype(detail::find_field<Name>(typename experiment_traits<E>::fields{}))::type;  // field_desc or void
  static constexpr bool is_field = !std::is_void_v<field>;
  static constexpr bool is_keyword = !is_field && keyword_knob<Name>::known;
  static constexpr bool exists = is_field || is_keyword;

  static constexpr auto storage() {
    if constexpr (is_field) return std::type_identity<typename detail::knob_storage<typename field::type>::type>{};
    else if constexpr (is_keyword) return std::type_identity<typename keyword_knob<Name>::type>{};
    else return std::type_identity<void>{};
  }
  using value_type = typename decltype(storage())::type;  // the C++ type the knob's value has
  static constexpr bool supported = !std::is_void_v<value_type> && is_knob_type_v<value_type>;
  static constexpr nitro::residency residency = [] {
    if constexpr (is_field) return field::residency;
    else return nitro::residency::host;
  }();
  static constexpr bool is_graph_const = is_field && residency == nitro::residency::graph_const;
};

namespace detail {
template <class L> struct literal_array { static constexpr bool array = false; };
template <class Y, std::size_t Min, std::size_t Max> struct literal_array<list_constant<Y, Min, Max>> {
  static constexpr bool array = true;
  using element = Y;
  static constexpr std::size_t min_length = Min, max_length = Max;
};
}  // namespace detail

// Does a constant of literal type L fit a knob holding T?
template <class T, class L>
constexpr bool knob_literal_fits() noexcept {
  if constexpr (std::is_same_v<T, bool>) return std::is_same_v<L, bool>;
  else if constexpr (std::is_enum_v<T>) return std::is_same_v<L, T>;
  else if constexpr (knob_list_traits<T>::list) {
    using A = detail::literal_array<L>;
    if constexpr (!A::array) return false;
    else
      return knob_literal_fits<typename knob_list_traits<T>::element, typename A::element>() &&
             (knob_list_traits<T>::length == 0 ||
              (knob_list_traits<T>::length == A::min_length && knob_list_traits<T>::length == A::max_length));
  }
  else if constexpr (std::is_integral_v<T>) return std::is_same_v<L, std::int64_t> || std::is_same_v<L, std::uint64_t>;
  else if constexpr (std::is_floating_point_v<T>)
    return std::is_same_v<L, double> || std::is_same_v<L, std::int64_t> || std::is_same_v<L, std::uint64_t>;
  else if constexpr (std::is_same_v<T, std::string>) return std::is_same_v<L, std::string_view>;
  else return false;
}

// ---- the declarations, read and checked -----------------------------------------------------------
template <class E>
struct declarations {
  static constexpr bool knobs_declared = hook::knobs::present<E>;
  static constexpr bool variants_declared = hook::variants::present<E>;
  static constexpr bool sweeps_declared = hook::sweeps::present<E>;

  static constexpr bool constant_hooks() {
    if constexpr (knobs_declared && !detail::constant_knobs<E>) return knobs_not_constant<E>::ok;
    else if constexpr (variants_declared && !detail::constant_variants<E>) return variants_not_constant<E>::ok;
    else if constexpr (sweeps_declared && !detail::constant_sweeps<E>) return sweeps_not_constant<E>::ok;
    else return true;
  }
  static constexpr bool hooks_ok = constant_hooks();

  // The declared knobs, plus `seed` when the experiment does not declare it.
  static constexpr auto declared_knobs() {
    if constexpr (knobs_declared && hooks_ok) return E::knobs().items;
    else return std::tuple<>{};
  }
  static constexpr bool declares_seed = [] {
    return std::apply([](auto const&... k) { return ((std::remove_cvref_t<decltype(k)>::name.view() == "seed") || ... || false); },
                      declared_knobs());
  }();
  static constexpr auto knob_items() {
    if constexpr (declares_seed) return declared_knobs();
    else return std::tuple_cat(declared_knobs(), std::tuple<knob_decl<"seed">>{knob_decl<"seed">{}}  /* its doc: the keyword table's */);
  }
  static constexpr auto variant_items() {
    if constexpr (variants_declared && hooks_ok) return E::variants().items;
    else return std::tuple<>{};
  }
  static constexpr auto sweep_items() {
    if constexpr (sweeps_declared && hooks_ok) return E::sweeps().items;
    else return std::tuple<>{};
  }
  using knob_tuple = decltype(knob_items());
  using variant_tuple = decltype(variant_items());
  using sweep_tuple = decltype(sweep_items());

  template <fixed_string Name>
  static constexpr bool declares_knob() {
    return []<class... K>(std::tuple<K...> const*) { return ((K::name.view() == Name.view()) || ... || false); }(
        static_cast<knob_tuple const*>(nullptr));
  }
  template <fixed_string Name>
  static constexpr bool declares_variant() {
    return []<class... V>(std::tuple<V...> const*) { return ((V::name.view() == Name.view()) || ... || false); }(
        static_cast<variant_tuple const*>(nullptr));
  }

 private:
  template <class... K>
  static constexpr bool check_knobs(std::tuple<K...> const*) {
    return ([]<class Kn>(std::type_identity<Kn>) {
      using T = knob_traits<E, Kn::name>;
      constexpr std::size_t count = ((K::name.view() == Kn::name.view() ? 1 : 0) + ... + 0);
      if constexpr (count > 1) return knob_declared_twice<E, spelled<knob_name, Kn::name>>::ok;
      else if constexpr (!T::exists) return knob_names_no_field<E, spelled<knob_name, Kn::name>>::ok;
      else if constexpr (!T::supported) return knob_type_not_supported<E, spelled<knob_name, Kn::name>, given<typename T::value_type>>::ok;
      else return true;
    }(std::type_identity<K>{}) && ... && true);
  }

  template <class Where, class... S>
  static constexpr bool check_settings(std::tuple<S...> const*) {
    return ([]<class St>(std::type_identity<St>) {
      constexpr std::size_t count = ((S::knob.view() == St::knob.view() ? 1 : 0) + ... + 0);
      if constexpr (!declares_knob<St::knob>()) return variant_sets_undeclared_knob<E, Where, spelled<knob_name, St::knob>>::ok;
      else if constexpr (count > 1) return variant_sets_knob_twice<E, Where, spelled<knob_name, St::knob>>::ok;
      else if constexpr (!knob_literal_fits<typename knob_traits<E, St::knob>::value_type, typename St::value_type>())
        return knob_value_does_not_fit<E, Where, spelled<knob_name, St::knob>, given<typename St::value_type>>::ok;
      else return true;
    }(std::type_identity<S>{}) && ... && true);
  }
  template <class... V>
  static constexpr bool check_variants(std::tuple<V...> const*) {
    return ([]<class Va>(std::type_identity<Va>) {
      constexpr std::size_t count = ((V::name.view() == Va::name.view() ? 1 : 0) + ... + 0);
      if constexpr (count > 1) return variant_declared_twice<E, spelled<variant_name, Va::name>>::ok;
      else return check_settings<spelled<variant_name, Va::name>>(static_cast<decltype(Va::settings) const*>(nullptr));
    }(std::type_identity<V>{}) && ... && true);
  }

  template <class Where, class... A>
  static constexpr bool check_axes(std::tuple<A...> const*) {
    return ([]<class Ax>(std::type_identity<Ax>) {
      constexpr std::size_t count = ((A::knob.view() == Ax::knob.view() ? 1 : 0) + ... + 0);
      if constexpr (!declares_knob<Ax::knob>()) return sweep_sets_undeclared_knob<E, Where, spelled<knob_name, Ax::knob>>::ok;
      else if constexpr (count > 1) return sweep_sets_knob_twice<E, Where, spelled<knob_name, Ax::knob>>::ok;
      else if constexpr (!knob_literal_fits<typename knob_traits<E, Ax::knob>::value_type, typename Ax::value_type>())
        return knob_value_does_not_fit<E, Where, spelled<knob_name, Ax::knob>, given<typename Ax::value_type>>::ok;
      else return true;
    }(std::type_identity<A>{}) && ... && true);
  }
  template <class Sw>
  static constexpr bool check_base() {
    using B = typename Sw::base_type;
    if constexpr (std::is_void_v<B>) return true;
    else if constexpr (!declares_variant<B::name>()) return sweep_base_variant_undeclared<E, spelled<sweep_name, Sw::name>, spelled<variant_name, B::name>>::ok;
    else return true;
  }
  template <class... W>
  static constexpr bool check_sweeps(std::tuple<W...> const*) {
    return ([]<class Sw>(std::type_identity<Sw>) {
      constexpr std::size_t count = ((W::name.view() == Sw::name.view() ? 1 : 0) + ... + 0);
      if constexpr (count > 1) return sweep_declared_twice<E, spelled<sweep_name, Sw::name>>::ok;
      else if constexpr (!check_base<Sw>()) return false;
      else return check_axes<spelled<sweep_name, Sw::name>>(static_cast<decltype(Sw::axes) const*>(nullptr));
    }(std::type_identity<W>{}) && ... && true);
  }

  static constexpr bool check_all() {
    if constexpr (!hooks_ok) return false;
    else if constexpr (!check_knobs(static_cast<knob_tuple const*>(nullptr))) return false;
    else if constexpr (!check_variants(static_cast<variant_tuple const*>(nullptr))) return false;
    else return check_sweeps(static_cast<sweep_tuple const*>(nullptr));
  }

 public:
  static constexpr bool ok = check_all();
};

}  // namespace nitro
