// nitro/core/tree.hpp — named trees with names the compiler knows: parameters `ps`, state `st`.
//
//   tree<entry<"weight", Tensor>, entry<"bias", Tensor>>            a dense layer's parameters
//   tree<entry<"layer_1", tree<...>>, entry<"layer_2", tree<...>>>  a chain's
//
// get<"weight">(ps) reads a child; for_each_leaf visits every leaf with its keypath as a
// compile-time string ("layer_1.weight"), so hooks like param_group(keypath) can be evaluated by
// the compiler. at(ps, "layer_1.weight") looks a leaf up at run time.
#pragma once

#include "nitro/core/fixed_string.hpp"

#include <cstddef>      // size_t
#include <string_view>  // run-time keypaths
#include <type_traits>  // traits
#include <utility>      // forward

namespace nitro {

template <fixed_string Name, class T>
struct entry {
  static constexpr auto name = Name;
  using type = T;
  T value{};
};

template <class... Entries>
struct tree : Entries... {
  static constexpr std::size_t size = sizeof...(Entries);
};

template <class T> struct is_tree : std::false_type {};
template <class... E> struct is_tree<tree<E...>> : std::true_type {};
template <class T> inline constexpr bool is_tree_v = is_tree<std::remove_cvref_t<T>>::value;

// get<"name">(t): the child called name (found through the entry base class).
template <fixed_string Name, class T> constexpr T& get(entry<Name, T>& e) noexcept { return e.value; }
template <fixed_string Name, class T> constexpr T const& get(entry<Name, T> const& e) noexcept { return e.value; }
template <fixed_string Name, class T> constexpr T&& get(entry<Name, T>&& e) noexcept { return static_cast<T&&>(e.value); }

// A compile-time keypath handed to leaf visitors.
template <fixed_string Path>
struct keypath {
  static constexpr auto value = Path;
  static constexpr std::string_view view() noexcept { return Path.view(); }
  constexpr operator std::string_view() const noexcept { return Path.view(); }  // NOLINT
};

namespace detail {
template <fixed_string Prefix, fixed_string Name>
constexpr auto child_path() noexcept {
  if constexpr (Prefix.size() == 0) return Name;
  else return join(Prefix, '.', Name);
}

template <class Entry, class Tree>
constexpr auto&& child_of(Tree&& t) noexcept {
  using E = std::conditional_t<std::is_const_v<std::remove_reference_t<Tree>>, Entry const&, Entry&>;
  return static_cast<E>(t).value;
}

// Visits the leaves of one or more trees of the same structure in step.
template <fixed_string Prefix, class F, class T0, class... Ts>
constexpr void visit_leaves(F& f, T0&& t0, Ts&&... ts) {
  using Tr = std::remove_cvref_t<T0>;
  [&]<class... E>(tree<E...> const*) {
    (
        [&]<class En>(En const*) {
          constexpr auto path = child_path<Prefix, En::name>();
          using Child = typename En::type;
          if constexpr (is_tree_v<Child>) visit_leaves<path>(f, child_of<En>(t0), child_of<En>(ts)...);
          else f(keypath<path>{}, child_of<En>(t0), child_of<En>(ts)...);
        }(static_cast<E const*>(nullptr)),
        ...);
  }(static_cast<Tr const*>(nullptr));
}

template <fixed_string Prefix, class Tree, class F>
constexpr void visit_leaf_types(F& f) {
  [&]<class... E>(tree<E...> const*) {
    (
        [&]<class En>(En const*) {
          constexpr auto path = child_path<Prefix, En::name>();
          using Child = typename En::type;
          if constexpr (is_tree_v<Child>) visit_leaf_types<path, Child>(f);
          else f(keypath<path>{}, std::type_identity<Child>{});
        }(static_cast<E const*>(nullptr)),
        ...);
  }(static_cast<Tree const*>(nullptr));
}
}  // namespace detail

// f(keypath<"layer_1.weight">{}, leaf) for every leaf, depth first, in declaration order.
template <class Tree, class F>
constexpr void for_each_leaf(Tree&& t, F&& f) {
  static_assert(is_tree_v<Tree>, "E-TREE-001: nitro::for_each_leaf(t, f) walks a nitro::tree, and t is not one. Fix: pass ps, st or another tree of tensors.");
  detail::visit_leaves<fixed_string<0>{}>(f, t);
}
// The same over two trees of one structure: f(keypath, a_leaf, b_leaf).
template <class A, class B, class F>
constexpr void for_each_leaf2(A&& a, B&& b, F&& f) {
  static_assert(std::is_same_v<std::remove_cvref_t<A>, std::remove_cvref_t<B>>,
                "E-TREE-002: nitro::for_each_leaf2(a, b, f) walks two trees of the same type, and a and b differ. Fix: pass trees of one spec (e.g. ps and its gradient).");
  detail::visit_leaves<fixed_string<0>{}>(f, a, b);
}
// f(keypath<...>{}, std::type_identity<Leaf>{}) for every leaf type: no object needed.
template <class Tree, class F>
constexpr void for_each_leaf_type(F&& f) {
  static_assert(is_tree_v<Tree>, "E-TREE-003: nitro::for_each_leaf_type<Tree>(f) walks a nitro::tree type, and Tree is not one. Fix: name a tree type such as the model's ps_type.");
  detail::visit_leaf_types<fixed_string<0>{}, Tree>(f);
}

// Number of leaves (compile time).
template <class Tree>
constexpr std::size_t leaf_count() noexcept {
  std::size_t n = 0;
  for_each_leaf_type<Tree>([&](auto, auto) { ++n; });
  return n;
}

// Run-time lookup: a pointer to the leaf at keypath, or nullptr.
template <class Leaf, class Tree>
Leaf* find_leaf(Tree& t, std::string_view path) noexcept {
  Leaf* found = nullptr;
  for_each_leaf(t, [&](auto kp, auto& leaf) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(leaf)>, std::remove_const_t<Leaf>>)
      if (!found && decltype(kp)::view() == path) found = &leaf;
  });
  return found;
}

}  // namespace nitro
