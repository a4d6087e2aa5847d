// nitro/optim/group.hpp — parameter groups: compile-time tags, and how leaves are assigned to them.
//
//   auto param_group(auto kp) const {                       // kp: nitro::keypath<"layer_1.weight">
//     if constexpr (kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
//     else return nitro::group<"head">{};
//   }
//
// The hook is evaluated by the compiler for every trainable leaf of ps; its return TYPE is the
// group. Without the hook every leaf is in nitro::default_group (group<"default">). The groups, in
// the order their first leaf is declared, are a type list; each group owns one contiguous span of
// the flat parameter and gradient buffers (param_store's grouped layout) and one flat buffer per
// optimizer state. Not here: rules (rule.hpp) and the program that updates the groups (program.hpp).
#pragma once

#include "nitro/bind/hook.hpp"
#include "nitro/core/fixed_string.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/core/tree.hpp"
#include "nitro/nn/param.hpp"

#include <array>        // group index of each leaf
#include <cstddef>      // size_t
#include <string_view>  // names
#include <type_traits>  // traits
#include <utility>      // index_sequence

namespace nitro {

// A parameter group's tag: nitro::group<"encoder">. Per-group hooks take it as their argument.
template <fixed_string Name>
struct group {
  static constexpr auto name = Name;
  static constexpr std::string_view view() noexcept { return Name.view(); }
  using group_tag = void;  // what is_group detects (nvcc: see is_keyword_arg)
};
using default_group = group<"default">;

template <class T> struct is_group : std::bool_constant<requires { typename T::group_tag; }> {};
template <class T> inline constexpr bool is_group_v = is_group<std::remove_cvref_t<T>>::value;

// ---- diagnostics vocabulary: names both compilers print as text --------------------------------
// A compile-time string in a diagnostic: `nitro::str<nitro::fixed_string<3>{"eta"}>` in g++,
// `nitro::str<nitro::fixed_string<3>{"eta"}>` in clang (core/fixed_string.hpp says why).
#if NITRO_DETAIL_NAMES_AS_CHARS
template <char... C> struct str {};
#else
template <fixed_string S> struct str {};
#endif
template <class... Names> struct param_group_produces {};
template <class... Names> struct opt_fields {};
template <class... Names> struct device_fields {};
template <class... Names> struct qualified_forms {};
template <class T> struct returned {};

#if NITRO_DETAIL_NAMES_AS_CHARS
namespace detail {
template <fixed_string S, std::size_t... I>
str<S.chars[I]...> to_str(std::index_sequence<I...>);
// Src::get() returns a std::string_view with static storage (a constant expression).
template <class Src, std::size_t... I>
str<Src::get()[I]...> view_to_str(std::index_sequence<I...>);
}  // namespace detail
template <fixed_string S> using str_of = decltype(detail::to_str<S>(std::make_index_sequence<S.size()>{}));
template <class Src> using str_from = decltype(detail::view_to_str<Src>(std::make_index_sequence<Src::get().size()>{}));
#else
namespace detail {
// Src::get() returns a std::string_view with static storage (a constant expression).
template <class Src>
constexpr auto fixed_of() noexcept {
  fixed_string<Src::get().size()> f;
  for (std::size_t i = 0; i < Src::get().size(); ++i) f.chars[i] = Src::get()[i];
  return f;
}
}  // namespace detail
template <fixed_string S> using str_of = str<S>;
template <class Src> using str_from = str<detail::fixed_of<Src>()>;
#endif

// ---- the param_group hook -----------------------------------------------------------------------
NITRO_DETAIL_DEFINE_HOOK(param_group)

template <class Keypath, class Returned>
struct param_group_must_return_a_group {
  static_assert(always_false<Keypath, Returned>,
                "E-OPT-002: param_group(keypath) must return a group tag, nitro::group<\"name\">{}, for every trainable leaf "
                "(the leaf's keypath and what the hook returned are shown above). Fix: return nitro::group<\"...\">{} on "
                "every path (use `if constexpr` on kp.view()).");
  static constexpr bool ok = false;
};

namespace detail {

// The group of one leaf: what param_group returns for its keypath, or default_group.
template <class E, fixed_string Path>
constexpr auto group_of_leaf() {
  if constexpr (hook::param_group::present<E>) {
    if constexpr (requires(E const& e) { e.param_group(keypath<Path>{}); }) {
      using G = std::remove_cvref_t<decltype(std::declval<E const&>().param_group(keypath<Path>{}))>;
      if constexpr (is_group<G>::value) return G{};
      else {
        (void)param_group_must_return_a_group<str_of<Path>, returned<G>>::ok;
        return default_group{};
      }
    } else {
      (void)param_group_must_return_a_group<str_of<Path>, returned<void>>::ok;
      return default_group{};
    }
  } else {
    return default_group{};
  }
}

template <class... L> struct tlist { static constexpr std::size_t size = sizeof...(L); };
template <class A, class B> struct tconcat;
template <class... A, class... B> struct tconcat<tlist<A...>, tlist<B...>> { using type = tlist<A..., B...>; };
template <class... Ls> struct tconcat_all { using type = tlist<>; };
template <class L0, class... Ls> struct tconcat_all<L0, Ls...> {
  using type = typename tconcat<L0, typename tconcat_all<Ls...>::type>::type;
};

// Every leaf of Spec in declaration order, as a flat list of keypaths: the per-leaf hooks are
// then asked once per leaf in one pack expansion, not down the tree's recursion, so a hook's
// diagnostic comes a few instantiation frames after the user's line whatever the model's depth.
template <fixed_string Path, bool Trainable> struct leaf_path {
  static constexpr auto path = Path;
  static constexpr bool trainable = Trainable;
};
template <fixed_string Prefix, class En> struct leaf_paths_entry;
// A function, not a partial specialisation leaf_paths<Prefix, tree<En...>>: nvcc's front end does
// not match a class-type template parameter in a partial specialisation.
template <fixed_string Prefix, class... En>
auto leaf_paths_of_tree(tree<En...>*) -> typename tconcat_all<typename leaf_paths_entry<Prefix, En>::type...>::type;
template <fixed_string Prefix, class En>
struct leaf_paths_entry {
  static constexpr auto path = child_path<Prefix, En::name>();
  using Child = typename En::type;
  static auto compute() {
    if constexpr (is_tree_v<Child>) return leaf_paths_of_tree<path>(static_cast<Child*>(nullptr));
    else return tlist<leaf_path<path, Child::trainable>>{};
  }
  using type = decltype(compute());
};
template <class Spec> using leaf_paths_of = decltype(leaf_paths_of_tree<fixed_string<0>{}>(static_cast<Spec*>(nullptr)));

// The group type of every leaf of Spec in declaration order; void for non-trainable leaves.
template <class E, class L> struct group_of_path {
  static auto compute() {
    if constexpr (L::trainable) return group_of_leaf<E, L::path>();
    else return;
  }
  using type = decltype(compute());
};
template <class E, class Paths> struct leaf_groups;
template <class E, class... L> struct leaf_groups<E, tlist<L...>> { using type = tlist<typename group_of_path<E, L>::type...>; };

template <class T, class L> struct tcontains;
template <class T, class... L> struct tcontains<T, tlist<L...>> : std::bool_constant<(std::is_same_v<T, L> || ...)> {};

template <class Acc, class L> struct tunique { using type = Acc; };
template <class... A, class H, class... R>
struct tunique<tlist<A...>, tlist<H, R...>> {
  using next = std::conditional_t<std::is_void_v<H> || tcontains<H, tlist<A...>>::value, tlist<A...>, tlist<A..., H>>;
  using type = typename tunique<next, tlist<R...>>::type;
};

template <class T, class L> struct tindex;
template <class T, class... L> struct tindex<T, tlist<L...>> {
  static constexpr int value = [] {
    constexpr bool same[] = {std::is_same_v<T, L>..., false};
    for (int i = 0; i < int(sizeof...(L)); ++i)
      if (same[i]) return i;
    return -1;
  }();
};

template <class G, class Groups>
constexpr int group_index_or_none() noexcept {
  if constexpr (std::is_void_v<G>) return -1;
  else return tindex<G, Groups>::value;
}

template <class L> struct group_names_of;
template <class... G> struct group_names_of<tlist<G...>> {
  using type = param_group_produces<str_of<G::name>...>;
};

}  // namespace detail

// How the leaves of Spec fall into groups under experiment E (compile time). This is the layout
// policy param_store uses: groups in order of their first leaf, each one contiguous; within a group
// leaves of rank >= 2 first (so the default no_decay splits a group into at most two runs), then
// the others, each in declaration order; non-trainable leaves last, in no group.
template <class E, class Spec>
struct group_layout {
  using leaf_group_types = typename detail::leaf_groups<E, detail::leaf_paths_of<Spec>>::type;
  using groups = typename detail::tunique<detail::tlist<>, leaf_group_types>::type;  // detail::tlist<group<...>...>
  static constexpr std::size_t group_count = groups::size;
  static constexpr bool grouped = true;
  static constexpr auto group_of = []<class... G>(detail::tlist<G...>) {
    return std::array<int, sizeof...(G)>{detail::group_index_or_none<G, groups>()...};
  }(leaf_group_types{});
  static constexpr auto group_names = []<class... G>(detail::tlist<G...>) {
    return std::array<std::string_view, sizeof...(G)>{G::view()...};
  }(groups{});
  using diagnostic_names = typename detail::group_names_of<groups>::type;  // param_group_produces<str<...>...>
  template <class G> static constexpr int index_of = detail::tindex<G, groups>::value;
};

// The plain layout: declaration order, one span (used for state buffers and by default).
struct declaration_layout {
  static constexpr bool grouped = false;
  static constexpr std::size_t group_count = 1;
};

}  // namespace nitro
