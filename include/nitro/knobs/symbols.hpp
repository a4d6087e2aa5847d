// nitro/knobs/symbols.hpp — an enum as a knob: its values printed and parsed by name.
//
//   enum class optimizer_kind { adamw, sgd, lion };
//   NITRO_KNOB_ENUM(optimizer_kind, adamw, sgd, lion)   // at namespace scope, beside the enum
//
//   struct Exp { optimizer_kind optimizer = optimizer_kind::adamw; ... };
//   ./trainer run --set optimizer=sgd     (the note's `(optimizer :sgd)`: `:sgd` reads the same)
//
// C++ has no reflection of enumerators, so the macro lists them once; a knob of an enum type that
// no NITRO_KNOB_ENUM describes is E-KNOB-002 at compile time. The names are found by argument-
// dependent lookup (a function `nitro_knob_symbols` declared beside the enum), so the macro works
// for an enum in any namespace without opening namespace nitro.
#pragma once

#include <boost/preprocessor/seq/for_each.hpp>
#include <boost/preprocessor/stringize.hpp>
#include <boost/preprocessor/variadic/to_seq.hpp>

#include <array>        // the table
#include <cstddef>      // size_t
#include <string_view>  // names
#include <type_traits>  // is_enum

namespace nitro {

// One named value of a knob enum.
template <class E>
struct knob_symbol {
  E value;
  std::string_view name;
};

namespace detail {
template <class E>
concept described_enum = std::is_enum_v<E> && requires { nitro_knob_symbols(static_cast<E const*>(nullptr)); };
}  // namespace detail

// Is E an enum that NITRO_KNOB_ENUM described (so it can be a knob)?
template <class E>
inline constexpr bool is_knob_symbol_v = detail::described_enum<E>;

// The table of E's names, in the order NITRO_KNOB_ENUM lists them.
template <detail::described_enum E>
inline constexpr auto knob_symbols = nitro_knob_symbols(static_cast<E const*>(nullptr));

// The name of a value, or "" for a value the table does not list (a cast from a number).
template <detail::described_enum E>
constexpr std::string_view symbol_name(E v) noexcept {
  for (auto const& s : knob_symbols<E>)
    if (s.value == v) return s.name;
  return {};
}

// Every name of E, for messages and listings.
template <detail::described_enum E>
inline constexpr auto symbol_names = [] {
  std::array<std::string_view, knob_symbols<E>.size()> names{};
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = knob_symbols<E>[i].name;
  return names;
}();

}  // namespace nitro

#define NITRO_DETAIL_KNOB_SYMBOL(r, E, v) ::nitro::knob_symbol<E>{E::v, BOOST_PP_STRINGIZE(v)},

// Describes an enum's values by name so that it can be a knob. Use at namespace scope, in the
// enum's own namespace; list every value a user may select.
#define NITRO_KNOB_ENUM(E, ...)                                                                       \
  [[maybe_unused]] constexpr auto nitro_knob_symbols(E const*) noexcept {                             \
    return std::array{BOOST_PP_SEQ_FOR_EACH(NITRO_DETAIL_KNOB_SYMBOL, E, BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__))}; \
  }
