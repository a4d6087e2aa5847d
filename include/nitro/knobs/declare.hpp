// nitro/knobs/declare.hpp — how an experiment declares what it may vary: knobs, variants, sweeps.
//
// Three static constexpr hooks of the experiment, each returning a list (the note's defknobs,
// defvariant and defsweep):
//
//   static constexpr auto knobs() {
//     return nitro::knobs(nitro::knob<"lr">("peak learning rate"),   // a field: its initialiser is the default
//                         nitro::knob<"width">("hidden width"),       // a GraphConst field: one program per value
//                         nitro::knob<"max_epochs">());               // a run keyword: its doc is the keyword table's
//   }
//   static constexpr auto variants() {
//     return nitro::variants(nitro::variant<"small">(nitro::set<"width">(128), nitro::set<"lr">(0.002)),
//                            nitro::variant<"smoke">(nitro::set<"max_epochs">(1)));
//   }
//   static constexpr auto sweeps() {
//     return nitro::sweeps(nitro::sweep<"seeds">(nitro::axis<"seed">(1, 2, 3)),
//                          nitro::sweep<"deep-lr">(nitro::base<"small">, nitro::axis<"lr">(0.002, 0.004)));
//   }
//
// Names are template arguments, so the compiler checks them (knobs/declarations.hpp): a knob
// declared twice, a variant setting an undeclared knob, a duplicate variant are compile errors.
// Values are constants evaluated once, when the program is compiled. Code may generate variants:
// nitro::variants(...) flattens lists, and nitro::generate<V...>(f) calls f.template operator()<V>()
// for each V (see nitro::numbered for names such as "depth4").
#pragma once

#include "nitro/core/fixed_string.hpp"
#include "nitro/core/meta.hpp"

#include <algorithm>    // min, max of list lengths
#include <array>        // axis values
#include <cstddef>      // size_t
#include <cstdint>      // int64_t
#include <string_view>  // docs, text values
#include <tuple>        // settings, lists
#include <type_traits>  // value normalisation
#include <utility>      // index_sequence

namespace nitro {

// Names as diagnostics print them: knob_name<nitro::fixed_string<2>{"lr"}> in g++, knob_name<'l',
// 'r'> in clang (core/fixed_string.hpp says why); variant_name, sweep_name alike.
#if NITRO_DETAIL_NAMES_AS_CHARS
template <char... C> struct knob_name {};
template <char... C> struct variant_name {};
template <char... C> struct sweep_name {};
namespace detail {
template <template <char...> class T, fixed_string S, std::size_t... I>
auto spell(std::index_sequence<I...>) -> T<S.chars[I]...>;
}  // namespace detail
template <template <char...> class T, fixed_string S>
using spelled = decltype(detail::spell<T, S>(std::make_index_sequence<S.size()>{}));
#else
template <fixed_string S> struct knob_name {};
template <fixed_string S> struct variant_name {};
template <fixed_string S> struct sweep_name {};
template <template <fixed_string> class T, fixed_string S>
using spelled = T<S>;
#endif
template <class T> struct given {};

// A constant of a type that cannot be a knob value (variant, axis) — the first line names its type.
template <class Value>
struct not_a_knob_literal {
  static_assert(always_false<Value>,
                "E-KNOB-007: a variant or sweep gives a knob a value of a type no knob holds. Fix: give a bool, an "
                "integer, a floating-point number, a string literal, an enum value, or a std::array of numbers "
                "(std::array{64, 32}) for a list knob.");
  using type = int;
};

namespace detail {
template <class T> struct literal_list { static constexpr bool list = false; };
template <class X, std::size_t N> struct literal_list<std::array<X, N>> {
  static constexpr bool list = std::is_arithmetic_v<X> && !std::is_same_v<X, bool>;
  using element = X;
  static constexpr std::size_t length = N;
};
}  // namespace detail

// A list constant (a list knob's value in a variant or an axis): up to Max numbers, at least Min —
// an axis over lists of different lengths keeps both in its type, so the compiler can tell whether
// a std::array knob of one length takes every value.
template <class X, std::size_t Min, std::size_t Max>
struct list_constant {
  using value_type = X;
  static constexpr std::size_t min_length = Min, max_length = Max;
  std::array<X, Max> items{};
  std::size_t length = 0;
  constexpr std::size_t size() const noexcept { return length; }
  constexpr X const& operator[](std::size_t i) const noexcept { return items[i]; }
};

namespace detail {
template <class T> struct is_list_constant : std::false_type {};
template <class X, std::size_t Min, std::size_t Max> struct is_list_constant<list_constant<X, Min, Max>> : std::true_type {};

// Constants are kept as one of five scalar types (bool, int64, uint64, double, string_view), the
// enum they are, or a list_constant of those numbers (a std::array given to a list knob).
template <class V>
constexpr auto knob_literal_type() {
  using T = std::remove_cvref_t<V>;
  if constexpr (std::is_same_v<T, bool>) return std::type_identity<bool>{};
  else if constexpr (std::is_enum_v<T>) return std::type_identity<T>{};
  else if constexpr (literal_list<T>::list)
    return std::type_identity<list_constant<typename decltype(knob_literal_type<typename literal_list<T>::element>())::type,
                                            literal_list<T>::length, literal_list<T>::length>>{};
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return std::type_identity<std::int64_t>{};
  else if constexpr (std::is_integral_v<T>) return std::type_identity<std::uint64_t>{};
  else if constexpr (std::is_floating_point_v<T>) return std::type_identity<double>{};
  else if constexpr (std::is_convertible_v<T, std::string_view>) return std::type_identity<std::string_view>{};
  else return std::type_identity<typename not_a_knob_literal<T>::type>{};
}
template <class V> using knob_literal_t = typename decltype(knob_literal_type<V>())::type;

template <class L, class V>
constexpr L to_knob_literal(V const& v) noexcept {
  if constexpr (is_list_constant<L>::value) {
    L out{};
    out.length = v.size();
    for (std::size_t i = 0; i < v.size(); ++i) out.items[i] = static_cast<typename L::value_type>(v[i]);
    return out;
  } else {
    return static_cast<L>(v);
  }
}
}  // namespace detail

// ---- knobs ------------------------------------------------------------------------------------
template <fixed_string Name>
struct knob_decl {
  static constexpr auto name = Name;
  std::string_view doc{};
};
template <fixed_string Name>
constexpr knob_decl<Name> knob(std::string_view doc = {}) noexcept {
  return {doc};
}

template <class... Knobs>
struct knob_list {
  std::tuple<Knobs...> items;
  static constexpr std::size_t size = sizeof...(Knobs);
};
template <class... Knobs>
constexpr knob_list<Knobs...> knobs(Knobs... k) noexcept {
  return {std::tuple<Knobs...>{k...}};
}

// ---- variants ---------------------------------------------------------------------------------
template <fixed_string Knob, class V>
struct setting {
  static constexpr auto knob = Knob;
  using value_type = V;
  V value;
};
// set<"lr">(0.002): one override of a variant.
template <fixed_string Knob, class V>
constexpr auto set(V const& v) noexcept {
  using L = detail::knob_literal_t<V>;
  return setting<Knob, L>{detail::to_knob_literal<L>(v)};
}

template <fixed_string Name, class... Settings>
struct variant_decl {
  static constexpr auto name = Name;
  std::tuple<Settings...> settings;
};
template <fixed_string Name, class... Settings>
constexpr variant_decl<Name, Settings...> variant(Settings... s) noexcept {
  return {std::tuple<Settings...>{s...}};
}

template <class... Variants>
struct variant_list {
  std::tuple<Variants...> items;
  static constexpr std::size_t size = sizeof...(Variants);
};

namespace detail {
template <class T> struct is_variant_list : std::false_type {};
template <class... V> struct is_variant_list<variant_list<V...>> : std::true_type {};
template <class T>
constexpr auto as_variant_tuple(T const& t) {
  if constexpr (is_variant_list<T>::value) return t.items;
  else return std::tuple<T>{t};
}
template <class... T>
constexpr auto make_variant_list(std::tuple<T...> const& t) {
  return variant_list<T...>{t};
}
}  // namespace detail

// variants(v...): the experiment's variants; lists (from generate) are spliced in place.
template <class... Items>
constexpr auto variants(Items const&... items) noexcept {
  return detail::make_variant_list(std::tuple_cat(detail::as_variant_tuple(items)...));
}

// generate<V...>(f): f.template operator()<V>() for each V, as a list — variants made by code:
//   nitro::generate<2, 4, 8>([]<int L>() { return nitro::variant<nitro::numbered<"depth", L>()>(nitro::set<"layers">(L)); })
template <auto... Values, class F>
constexpr auto generate(F f) noexcept {
  return detail::make_variant_list(std::tuple_cat(detail::as_variant_tuple(f.template operator()<Values>())...));
}

// numbered<"depth", 4>() is "depth4": names for generated variants and sweeps, made by the compiler.
template <fixed_string Prefix, unsigned long long N>
constexpr auto numbered() noexcept {
  constexpr std::size_t digits = [] {
    std::size_t d = 1;
    for (unsigned long long v = N; v >= 10; v /= 10) ++d;
    return d;
  }();
  fixed_string<digits> number;
  unsigned long long v = N;
  for (std::size_t i = 0; i < digits; ++i) {
    number.chars[digits - 1 - i] = char('0' + v % 10);
    v /= 10;
  }
  return concat(Prefix, number);
}

// ---- sweeps -----------------------------------------------------------------------------------
template <fixed_string Knob, class V, std::size_t N>
struct axis_decl {
  static constexpr auto knob = Knob;
  using value_type = V;
  static constexpr std::size_t size = N;
  std::array<V, N> values;
};
// axis<"lr">(0.002, 0.004): one axis of a sweep; values in order.
namespace detail {
// An axis's constant type: its first value's, widened for lists to hold every value's length.
template <class V0, class... V>
constexpr auto axis_literal_type() {
  using L0 = knob_literal_t<V0>;
  if constexpr (is_list_constant<L0>::value && (literal_list<V>::list && ... && true))
    return std::type_identity<list_constant<typename L0::value_type, std::min({L0::min_length, literal_list<V>::length...}),
                                            std::max({L0::max_length, literal_list<V>::length...})>>{};
  else return std::type_identity<L0>{};
}
}  // namespace detail

template <fixed_string Knob, class V0, class... V>
constexpr auto axis(V0 const& v0, V const&... v) noexcept {
  using L = typename decltype(detail::axis_literal_type<V0, V...>())::type;
  return axis_decl<Knob, L, 1 + sizeof...(V)>{{detail::to_knob_literal<L>(v0), detail::to_knob_literal<L>(v)...}};
}

// The base variant of every point of a sweep: sweep<"deep-lr">(nitro::base<"small">, axis...).
template <fixed_string Variant>
struct base_variant {
  static constexpr auto name = Variant;
  using base_variant_tag = void;  // what is_base_variant detects (nvcc: see is_keyword_arg)
};
template <fixed_string Variant>
inline constexpr base_variant<Variant> base{};

template <fixed_string Name, class Base, class... Axes>
struct sweep_decl {
  static constexpr auto name = Name;
  using base_type = Base;  // base_variant<...> or void
  std::tuple<Axes...> axes;
  static constexpr std::size_t axis_count = sizeof...(Axes);
};

namespace detail {
template <class T> struct is_base_variant : std::bool_constant<requires { typename T::base_variant_tag; }> {};
}  // namespace detail

// sweep<"name">([base<"v">,] axis<...>(...)...): a cross product, the last axis varying fastest.
template <fixed_string Name, class First, class... Axes>
constexpr auto sweep(First const& first, Axes const&... axes) noexcept {
  if constexpr (detail::is_base_variant<First>::value) return sweep_decl<Name, First, Axes...>{std::tuple<Axes...>{axes...}};
  else return sweep_decl<Name, void, First, Axes...>{std::tuple<First, Axes...>{first, axes...}};
}

template <class... Sweeps>
struct sweep_list {
  std::tuple<Sweeps...> items;
  static constexpr std::size_t size = sizeof...(Sweeps);
};
template <class... Sweeps>
constexpr sweep_list<Sweeps...> sweeps(Sweeps... s) noexcept {
  return {std::tuple<Sweeps...>{s...}};
}

}  // namespace nitro
