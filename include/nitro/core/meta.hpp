// nitro/core/meta.hpp — the few metaprogramming helpers every room uses.
#pragma once

namespace nitro {

// A dependent false, for static_asserts that must fire only when a template is instantiated.
template <class... T> inline constexpr bool always_false = false;
template <auto... V> inline constexpr bool always_false_v = false;

// Evaluates checks whose every failure is a coded diagnostic of its own (a static_assert in a
// diagnostic class template, instantiated by the check): `static_assert(checks_evaluated<c1, c2>)`
// forces them and adds no bare "static assertion failed" of its own, before or after theirs.
template <bool... Checks> inline constexpr bool checks_evaluated = true;

namespace detail {
template <class... T> struct type_list {};
}  // namespace detail

}  // namespace nitro
