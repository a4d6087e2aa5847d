// nitro/bind/hook.hpp — finding an experiment's hooks and what each one asks of the batch.
//
// A hook is a member function found by name (forward, loss, metrics, ...). Its last parameter
// says which batch fields it wants:
//   - a Boost.Hana struct (BOOST_HANA_DEFINE_STRUCT) whose member names are batch field names;
//   - the batch type itself, or a parameter left generic (`auto const&`): the whole batch.
// The parameter's type is read by the compiler from the hook's signature: for a hook that is a
// template in its leading parameters (`auto const& model`) the specialisation for the actual
// leading argument types is named explicitly and its signature deduced.
#pragma once

#include "nitro/core/reflect.hpp"

#include <boost/hana/accessors.hpp>
#include <boost/hana/concept/struct.hpp>
#include <boost/hana/length.hpp>

#include <cstddef>      // size_t
#include <string_view>  // hook names
#include <type_traits>  // traits
#include <utility>      // declval, index_sequence

namespace nitro {

namespace detail {

template <class... P> struct param_list {
  static constexpr std::size_t size = sizeof...(P);
};
template <class L> struct last_param;
template <class P0, class... P> struct last_param<param_list<P0, P...>> {
  using type = std::remove_cvref_t<typename decltype((std::type_identity<P0>{}, ..., std::type_identity<P>{}))::type>;
};
template <> struct last_param<param_list<>> { using type = void; };
template <class L> struct first_param;
template <class P0, class... P> struct first_param<param_list<P0, P...>> { using type = P0; };

// Signature deduction from a function or member-function pointer. nvcc cannot take decltype of
// `&E::template f<A...>` directly, but deduces through a call like this one on every compiler.
template <class R, class C, class... A> param_list<A...> deduce_params(R (C::*)(A...));
template <class R, class C, class... A> param_list<A...> deduce_params(R (C::*)(A...) const);
template <class R, class C, class... A> param_list<A...> deduce_params(R (C::*)(A...) noexcept);
template <class R, class C, class... A> param_list<A...> deduce_params(R (C::*)(A...) const noexcept);
template <class R, class... A> param_list<A...> deduce_params(R (*)(A...));
template <class R, class... A> param_list<A...> deduce_params(R (*)(A...) noexcept);

template <class... T> struct type_pack {};
template <std::size_t N, class Pack, class = std::make_index_sequence<N>> struct take;
template <std::size_t N, class... T, std::size_t... I>
struct take<N, type_pack<T...>, std::index_sequence<I...>> {
  using type = type_pack<typename nth<I, T...>::type...>;
};

struct no_params {};  // the hook is absent, or generic in its last parameter

template <class H, class E>
constexpr auto plain_params() { return H::template plain<E>(); }

// Whether every member of a hook's input struct In binds from batch type Batch, with the binding's
// own diagnostics (E-BIND-001, E-BIND-005); true for an input that is not a Hana struct (bound, or
// refused with E-BIND-002, later). member_binds is defined by bind/kwargs.hpp. A variable template
// over the member indices, so a refused field's diagnostic is few instantiation frames deep.
template <class Hook, class In, std::size_t I, class B> constexpr bool member_binds();
template <class S, bool = boost::hana::Struct<S>::value> struct member_sequence { using type = void; };
template <class S> struct member_sequence<S, true> {
  using type = std::make_index_sequence<decltype(boost::hana::length(boost::hana::accessors<S>()))::value>;
};
template <class Hook, class In, class Batch, class Seq = typename member_sequence<In>::type>
inline constexpr bool members_bind_v = true;
template <class Hook, class In, class Batch, std::size_t... I>
inline constexpr bool members_bind_v<Hook, In, Batch, std::index_sequence<I...>> = (member_binds<Hook, In, I, Batch>() && ...);

// Stands in for the hook's last argument while the hook is looked up. A hook that is a template in
// its leading parameters has a deduced return type, so naming its specialisation compiles its body;
// converting this probe to the hook's input type `T const&` happens during overload resolution,
// before that, and checks T's fields against the batch then. So a mistyped or missing field is the
// first error, ahead of whatever the hook's body makes of it. (Declared only: never called.)
template <class Hook, class Batch>
struct binding_probe {
  template <class T, bool = members_bind_v<Hook, std::remove_cvref_t<T>, Batch>>
  operator T const&() const;
};

}  // namespace detail

// A hook's kind of input, once resolved.
enum class hook_input_kind { absent, fields, whole_batch };

// NITRO_DETAIL_DEFINE_HOOK(name) declares nitro::hook::name with:
//   present<E>               E has a member called `name`
//   params<E, Lead...>       the parameter list of the specialisation for Lead... (or no_params)
//   call(e, args...)         e.name(args...)
#define NITRO_DETAIL_DEFINE_HOOK(hook_name)                                                            \
  namespace hook {                                                                                     \
  struct hook_name {                                                                                   \
    static constexpr ::std::string_view name = #hook_name;                                             \
    struct probe_base_ { int hook_name; };                                                             \
    template <class E> struct probe_ : E, probe_base_ {};                                              \
    template <class E> static constexpr bool present_impl() {                                          \
      if constexpr (::std::is_class_v<E> && !::std::is_final_v<E>)                                     \
        return !requires { &probe_<E>::hook_name; };                                                   \
      else return false;                                                                               \
    }                                                                                                  \
    template <class E> static constexpr bool present = present_impl<E>();                              \
    template <class E, class... Lead>                                                                  \
    static constexpr auto params_for(::nitro::detail::type_pack<Lead...>) {                            \
      if constexpr (requires { ::nitro::detail::deduce_params(&E::hook_name); })                       \
        return decltype(::nitro::detail::deduce_params(&E::hook_name)){};                              \
      else if constexpr (requires { ::nitro::detail::deduce_params(&E::template hook_name<Lead...>); }) \
        return decltype(::nitro::detail::deduce_params(&E::template hook_name<Lead...>)){};            \
      else return ::nitro::detail::no_params{};                                                        \
    }                                                                                                  \
    template <class E>                                                                                 \
    static constexpr auto plain() {                                                                    \
      if constexpr (requires { ::nitro::detail::deduce_params(&E::hook_name); })                       \
        return decltype(::nitro::detail::deduce_params(&E::hook_name)){};                              \
      else return ::nitro::detail::no_params{};                                                        \
    }                                                                                                  \
    template <class E, class... Lead>                                                                  \
    using params = decltype(params_for<E>(::nitro::detail::type_pack<Lead...>{}));                     \
    template <class E, class... A>                                                                     \
    static decltype(auto) call(E&& e, A&&... a) {                                                      \
      return static_cast<E&&>(e).hook_name(static_cast<A&&>(a)...);                                   \
    }                                                                                                  \
    template <class E, class... A>                                                                     \
    static constexpr bool callable = requires(E& e, A&&... a) { e.hook_name(static_cast<A&&>(a)...); }; \
  };                                                                                                   \
  }

// The hooks the trainer binds. Each is a tag type, so diagnostics print `nitro::hook::loss`.
NITRO_DETAIL_DEFINE_HOOK(forward)
NITRO_DETAIL_DEFINE_HOOK(loss)
NITRO_DETAIL_DEFINE_HOOK(metrics)
NITRO_DETAIL_DEFINE_HOOK(build_model)
NITRO_DETAIL_DEFINE_HOOK(build_data)
NITRO_DETAIL_DEFINE_HOOK(finalize_metrics)

// ---- what a hook takes from the batch --------------------------------------------------------

template <class S>
inline constexpr bool is_hana_struct_v = boost::hana::Struct<S>::value;

namespace detail {
// Checks a template hook's input fields against the batch by looking the hook up with a
// binding_probe as its last argument (before anything names its specialisation). A hook read from
// its signature, or one that takes the whole batch, is left to hook_input. Always true: a field
// that does not bind is a static_assert.
template <class H, class E, class Batch, class... Lead>
constexpr bool fields_probed() {
  if constexpr (!std::is_same_v<decltype(plain_params<H, E>()), no_params> || !H::template present<E>) return true;
  else if constexpr (H::template callable<E const, Lead const&..., Batch const&>) return true;
  else return H::template callable<E const, Lead const&..., binding_probe<H, Batch>> || true;
}
}  // namespace detail

// Resolves hook H of experiment E, given the leading argument types and the batch type.
//   kind     absent | fields (a Hana struct of batch fields) | whole_batch
//   input    the struct type (fields) or Batch (whole_batch)
template <class H, class E, class Batch, class... Lead>
struct hook_input {
  // Order matters: a non-template hook is read from its signature; a hook callable with the whole
  // batch takes the whole batch; only then is the specialisation for the leading argument types
  // named (naming it earlier could bind a generic batch parameter to a leading argument's type),
  // after its input fields have been checked against the batch (binding_probe).
  static constexpr auto compute() {
    using P0 = decltype(detail::plain_params<H, E>());
    if constexpr (!std::is_same_v<P0, detail::no_params>) {
      using In = typename detail::last_param<P0>::type;
      if constexpr (std::is_same_v<In, Batch>) return std::pair<std::integral_constant<int, 2>, Batch>{};
      else return std::pair<std::integral_constant<int, 1>, In>{};
    } else if constexpr (H::template present<E> && H::template callable<E const, Lead const&..., Batch const&>) {
      return std::pair<std::integral_constant<int, 2>, Batch>{};
    } else {
      (void)detail::fields_probed<H, E, Batch, Lead...>();
      if constexpr (!std::is_same_v<typename H::template params<E, Lead...>, detail::no_params>) {
        using params = typename H::template params<E, Lead...>;
        using In = typename detail::last_param<params>::type;
        if constexpr (std::is_same_v<In, Batch>) return std::pair<std::integral_constant<int, 2>, Batch>{};
        else return std::pair<std::integral_constant<int, 1>, In>{};
      } else {
        return std::pair<std::integral_constant<int, 0>, void*>{};
      }
    }
  }
  using computed = decltype(compute());
  static constexpr hook_input_kind kind = hook_input_kind(computed::first_type::value);
  using input = typename computed::second_type;
};

}  // namespace nitro
