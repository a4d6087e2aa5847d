// nitro/core/reflect.hpp — experiments: a plain struct whose fields nitro can name.
//
//   template <int Width = 128> struct FashionMLP { nitro::GraphConst<int, Width> width; float lr; ... };
//   NITRO_EXPERIMENT(FashionMLP, width, lr, ...);   // one line adapts every instantiation
//
// NITRO_EXPERIMENT works for a concrete struct and for a class template alike: it declares, in the
// experiment's namespace, a function found by argument-dependent lookup that accepts exactly the
// types `Name` spells (Name itself, or any Name<...>, told apart by class template argument
// deduction from a copy). The adapted experiment is also a Boost.Hana Struct.
//
// A data member left out of NITRO_EXPERIMENT is a compile error (it would otherwise vanish from
// knobs, manifests and checkpoints without a word): the member count of the aggregate is compared
// with the adapted list and the first unlisted member is named by position and type.
#pragma once

#include "nitro/core/detail/members.hpp"
#include "nitro/core/detail/pp.hpp"
#include "nitro/core/fixed_string.hpp"
#include "nitro/core/markers.hpp"
#include "nitro/core/meta.hpp"

#include <boost/hana/accessors.hpp>
#include <boost/hana/pair.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/tuple.hpp>

#include <cstddef>      // size_t
#include <string_view>  // names
#include <type_traits>  // traits
#include <utility>      // declval, index_sequence

namespace nitro {

namespace detail {

template <class M> struct member_pointer_traits;
template <class T, class C> struct member_pointer_traits<T C::*> { using type = T; using owner = C; };

}  // namespace detail

// One adapted field: its name and the pointer to the member.
template <fixed_string Name, auto MemPtr>
struct field_desc {
  static constexpr auto name = Name;
  static constexpr auto ptr = MemPtr;
  using type = typename detail::member_pointer_traits<decltype(MemPtr)>::type;
  static constexpr nitro::residency residency = residency_of<type>();

  template <class E> static constexpr decltype(auto) get(E& e) noexcept { return (e.*MemPtr); }
  template <class E> static constexpr decltype(auto) get(E const& e) noexcept { return (e.*MemPtr); }
};

namespace detail {

template <class E, fixed_string Name, class... Fields>
struct experiment_desc {
  using experiment = E;
  static constexpr auto name = Name;
  static constexpr std::size_t field_count = sizeof...(Fields);
  using fields = type_list<Fields...>;
};

// ---- counting an aggregate's members (as Boost.PFR does: brace-initialise with "anything") ----
struct any_member {
  template <class T> operator T&() const&& noexcept;  // NOLINT: declared only, used unevaluated
};
template <class E, std::size_t... I>
constexpr bool brace_init_with(std::index_sequence<I...>) noexcept {
  return requires { E{((void)I, any_member{})...}; };
}
template <class E, std::size_t N = 0>
constexpr std::size_t aggregate_member_count() noexcept {
  if constexpr (N > 64) return N;
  else if constexpr (!brace_init_with<E>(std::make_index_sequence<N + 1>{})) return N;
  else return aggregate_member_count<E, N + 1>();
}

template <class T, class... L> constexpr std::size_t count_in(type_list<L...>) noexcept {
  return (std::size_t{0} + ... + std::size_t(std::is_same_v<T, L>));
}
template <std::size_t I, class... L> struct nth;
template <std::size_t I, class H, class... L> struct nth<I, H, L...> : nth<I - 1, L...> {};
template <class H, class... L> struct nth<0, H, L...> { using type = H; };
// Type computations as declared-only functions, called only inside decltype. Not lambdas: clang
// 14 crashes reading a lambda written inside decltype in a template back from a precompiled
// header (llvm/llvm-project#53757; house.no_lambda_in_decltype keeps them out of the headers).
template <class... F> type_list<typename F::type...> field_value_types(type_list<F...>);
template <std::size_t I, class... D> std::type_identity<typename nth<I, D...>::type> nth_of(type_list<D...>);

// Position (1-based) of the first declared member whose type is not accounted for by the adapted
// list; 0 when every declared member is adapted.
template <class... D, class... A, std::size_t... I>
constexpr std::size_t first_unadapted(type_list<D...>, type_list<A...>, std::index_sequence<I...>) noexcept {
  std::size_t found = 0;
  auto check = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
    using T = typename nth<K, D...>::type;
    // how many of T precede-or-are position K in declaration order, versus how many are adapted
    constexpr std::size_t seen = [] {
      std::size_t c = 0;
      std::size_t k = 0;
      ((c += (k++ <= K && std::is_same_v<T, D>) ? 1 : 0), ...);
      return c;
    }();
    if (found == 0 && seen > count_in<T>(type_list<A...>{})) found = K + 1;
  };
  (check(std::integral_constant<std::size_t, I>{}), ...);
  return found;
}

}  // namespace detail

// The diagnostic for a member left out of NITRO_EXPERIMENT. Its template arguments are what the
// first line of the compiler's message shows: the experiment, the member's position and its type.
// Wrappers whose names read well in diagnostics: `declared_member<5, float>`.
template <std::size_t Number, class Type> struct declared_member {};
template <std::size_t Declared, std::size_t Adapted> struct member_counts {};

template <class Experiment, std::size_t MemberNumber, class MemberType>
struct experiment_member_not_adapted {
  static_assert(always_false<Experiment, declared_member<MemberNumber, MemberType>>,
                "E-REFL-001: a data member of the experiment is missing from NITRO_EXPERIMENT(...): "
                "it would vanish from knobs, manifests and checkpoints. "
                "Fix: add the member's name to NITRO_EXPERIMENT (MemberNumber counts declared members from 1).");
  static constexpr bool ok = false;
};
template <class Experiment, std::size_t Declared, std::size_t Adapted>
struct experiment_adapts_unknown_members {
  static_assert(always_false<Experiment, member_counts<Declared, Adapted>>,
                "E-REFL-002: NITRO_EXPERIMENT lists more fields than the experiment declares "
                "(a name listed twice, or members of a base class). Fix: list each data member once.");
  static constexpr bool ok = false;
};
template <class Experiment>
struct experiment_must_be_aggregate {
  static_assert(always_false<Experiment>,
                "E-REFL-003: an experiment must be an aggregate (public data members, no user-declared "
                "constructors, no virtual functions) so nitro can check that every member is adapted. "
                "Fix: remove the constructors and give members default initialisers instead.");
  static constexpr bool ok = false;
};

namespace detail {

template <class E, class Desc>
constexpr bool check_adaptation() noexcept {
  if constexpr (!std::is_aggregate_v<E>) {
    return experiment_must_be_aggregate<E>::ok;
  } else {
    constexpr std::size_t declared = aggregate_member_count<E>();
    constexpr std::size_t adapted = Desc::field_count;
    using declared_types = decltype(member_types_of<declared, E>());
    using adapted_types = decltype(field_value_types(typename Desc::fields{}));
    if constexpr (adapted > declared) {
      return experiment_adapts_unknown_members<E, declared, adapted>::ok;
    } else {
      constexpr std::size_t missing =
          first_unadapted(declared_types{}, adapted_types{}, std::make_index_sequence<declared>{});
      if constexpr (missing != 0) {
        using T = typename decltype(nth_of<missing - 1>(declared_types{}))::type;
        return experiment_member_not_adapted<E, missing, T>::ok;
      } else {
        return true;
      }
    }
  }
}

template <class E>
concept adl_adapted = requires(E const* p) { nitro_experiment_info(p); };

}  // namespace detail

// An experiment type: a struct adapted with NITRO_EXPERIMENT.
template <class E>
concept experiment = detail::adl_adapted<std::remove_cvref_t<E>>;

// Everything nitro knows about an experiment's declaration: name, fields (checked complete).
template <experiment E>
struct experiment_traits {
  using desc = decltype(nitro_experiment_info(static_cast<E const*>(nullptr)));
  static constexpr bool complete = detail::check_adaptation<E, desc>();
  static constexpr std::string_view name = desc::name.view();
  using fields = typename desc::fields;
  static constexpr std::size_t field_count = desc::field_count;
};

// Calls f(field_desc<...>{}) for every adapted field, in the order NITRO_EXPERIMENT lists them.
template <experiment E, class F>
constexpr void for_each_field(F&& f) {
  static_assert(checks_evaluated<experiment_traits<E>::complete>);  // E-REFL-001..003 name what is wrong
  [&]<class... D>(detail::type_list<D...>) { (f(D{}), ...); }(typename experiment_traits<E>::fields{});
}

// Is `name` an adapted field of E?
template <experiment E>
constexpr bool has_field(std::string_view name) noexcept {
  bool found = false;
  for_each_field<E>([&](auto d) { found = found || decltype(d)::name.view() == name; });
  return found;
}

namespace detail {
template <fixed_string S, std::size_t... I>
constexpr auto to_hana_string(std::index_sequence<I...>) noexcept {
  return boost::hana::string<S.chars[I]...>{};
}
template <auto MemPtr>
struct hana_member_accessor {
  template <class T> constexpr decltype(auto) operator()(T&& t) const { return static_cast<T&&>(t).*MemPtr; }
};
}  // namespace detail

}  // namespace nitro

// Adapted experiments are Boost.Hana Structs: hana::keys, hana::members, hana::to_map work on them.
namespace boost::hana {
template <class E>
struct accessors_impl<E, when<::nitro::detail::adl_adapted<E>>> {
  static constexpr auto apply() {
    return []<class... D>(::nitro::detail::type_list<D...>) {
      return make_tuple(make_pair(
          ::nitro::detail::to_hana_string<D::name>(std::make_index_sequence<D::name.size()>{}),
          ::nitro::detail::hana_member_accessor<D::ptr>{})...);
    }(typename ::nitro::experiment_traits<E>::fields{});
  }
};
}  // namespace boost::hana

#define NITRO_DETAIL_FIELD_DESC(E, f) ::nitro::field_desc<::nitro::fixed_string{#f}, &E::f>

// NITRO_EXPERIMENT(Name, field, ...): adapt the struct (or every instantiation of the class
// template) Name. Place it in the namespace that declares Name.
#define NITRO_EXPERIMENT(Name, ...)                                                                  \
  template <class NitroE>                                                                            \
    requires ::std::is_same_v<decltype(Name(::std::declval<NitroE const&>())), NitroE>              \
  constexpr auto nitro_experiment_info(NitroE const*) noexcept                                       \
      -> ::nitro::detail::experiment_desc<NitroE, ::nitro::fixed_string{#Name},                      \
                                          NITRO_PP_FOR_EACH(NITRO_DETAIL_FIELD_DESC, NitroE, __VA_ARGS__)> { \
    return {};                                                                                       \
  }                                                                                                  \
  static_assert(true, "")
