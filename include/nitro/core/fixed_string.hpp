// nitro/core/fixed_string.hpp — compile-time strings usable as template arguments.
//
// Names that must be known to the compiler (tree entry names, keypaths, group tags) are
// `fixed_string` values passed as non-type template arguments. Not a general string type.
#pragma once

#include <cstddef>      // size_t
#include <string_view>  // views of the characters

namespace nitro {

template <std::size_t N>
struct fixed_string {
  char chars[N + 1]{};  // NUL-terminated; N is the length without it

  constexpr fixed_string() noexcept = default;
  constexpr fixed_string(char const (&s)[N + 1]) noexcept {  // NOLINT: implicit by design
    for (std::size_t i = 0; i <= N; ++i) chars[i] = s[i];
  }
  static constexpr std::size_t size() noexcept { return N; }
  constexpr std::string_view view() const noexcept { return {chars, N}; }
  constexpr operator std::string_view() const noexcept { return view(); }  // NOLINT
  constexpr char const* c_str() const noexcept { return chars; }

  template <std::size_t M>
  constexpr bool operator==(fixed_string<M> const& o) const noexcept {
    return view() == o.view();
  }
};
template <std::size_t N>
fixed_string(char const (&)[N]) -> fixed_string<N - 1>;

// How a compile-time name reads in a diagnostic. g++ (and nvcc's host pass) print a fixed_string
// template argument as text — `nitro::str<nitro::fixed_string<3>{"eta"}>` — so there names are
// fixed_string arguments; clang 14 prints one as character codes (`{{101, 116, 97, 0}}`), so there
// names are packs of characters, which it prints as `nitro::str<nitro::fixed_string<3>{"eta"}>`.
#if defined(__clang__)
#define NITRO_DETAIL_NAMES_AS_CHARS 1
#else
#define NITRO_DETAIL_NAMES_AS_CHARS 0
#endif

// a + sep + b, evaluated by the compiler: keypaths are joined this way ("layer_1" "." "weight").
template <std::size_t A, std::size_t B>
constexpr fixed_string<A + B + 1> join(fixed_string<A> const& a, char sep, fixed_string<B> const& b) noexcept {
  fixed_string<A + B + 1> out;
  for (std::size_t i = 0; i < A; ++i) out.chars[i] = a.chars[i];
  out.chars[A] = sep;
  for (std::size_t i = 0; i < B; ++i) out.chars[A + 1 + i] = b.chars[i];
  return out;
}
template <std::size_t A, std::size_t B>
constexpr fixed_string<A + B> concat(fixed_string<A> const& a, fixed_string<B> const& b) noexcept {
  fixed_string<A + B> out;
  for (std::size_t i = 0; i < A; ++i) out.chars[i] = a.chars[i];
  for (std::size_t i = 0; i < B; ++i) out.chars[A + i] = b.chars[i];
  return out;
}

// "12" from the number 12, at compile time.
template <std::size_t I>
constexpr auto number_text() noexcept {
  constexpr std::size_t digits = [] { std::size_t d = 1; for (std::size_t v = I; v >= 10; v /= 10) ++d; return d; }();
  fixed_string<digits> out;
  std::size_t v = I;
  for (std::size_t i = 0; i < digits; ++i) { out.chars[digits - 1 - i] = char('0' + v % 10); v /= 10; }
  return out;
}

// "layer_1" from the number 1, at compile time (chain children are named this way, as in Lux).
template <std::size_t I>
constexpr auto layer_name() noexcept {
  return concat(fixed_string{"layer_"}, number_text<I>());
}

// "momentum" from "sgd.momentum": a dotted path without its first segment (the whole path when it
// has one segment).
template <fixed_string P>
constexpr auto without_head() noexcept {
  constexpr std::size_t dot = P.view().find('.');
  if constexpr (dot == std::string_view::npos) {
    return P;
  } else {
    fixed_string<P.size() - dot - 1> out;
    for (std::size_t i = 0; i < out.size(); ++i) out.chars[i] = P.chars[dot + 1 + i];
    return out;
  }
}

}  // namespace nitro
