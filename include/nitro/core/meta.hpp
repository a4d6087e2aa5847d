// nitro/core/meta.hpp — the few metaprogramming helpers every room uses.
#pragma once

namespace nitro {

// A dependent false, for static_asserts that must fire only when a template is instantiated.
template <class... T> inline constexpr bool always_false = false;
template <auto... V> inline constexpr bool always_false_v = false;

namespace detail {
template <class... T> struct type_list {};
}  // namespace detail

}  // namespace nitro
