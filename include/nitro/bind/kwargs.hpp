// nitro/bind/kwargs.hpp — filling a hook's input struct from the batch, by field name.
//
// `struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };` receives the
// batch's `label`. A std::optional<T> member is a keyword with a default: filled when the batch
// has the field, left empty when not. A required member the batch lacks is a compile error whose
// first line names the hook, the missing member and every field the batch has:
//   binding_error<nitro::hook::loss, missing<&LossIn::label>, batch_has<&Batch::img, &Batch::idx>>
// Fields are moved out of an rvalue batch and copied from an lvalue one.
#pragma once

#include "nitro/bind/hook.hpp"

#include <boost/hana/accessors.hpp>
#include <boost/hana/define_struct.hpp>  // struct_detail::member_ptr, read for diagnostics
#include <boost/hana/contains.hpp>
#include <boost/hana/find.hpp>
#include <boost/hana/keys.hpp>
#include <boost/hana/at_key.hpp>
#include <boost/hana/string.hpp>

#include <optional>     // optional hook fields
#include <type_traits>  // traits
#include <utility>      // forward, move

namespace nitro {

// Diagnostic vocabulary: pointer-to-member arguments print verbatim in g++, clang and nvcc.
template <auto Member> struct missing {};
template <auto... Members> struct batch_has {};
template <auto Member> struct hook_field {};
template <auto Member> struct batch_field {};
template <class T> struct declared_as {};   // the hook field's type
template <class T> struct batch_gives {};   // the batch field's type
template <class T> struct hook_input_type {};

template <class Hook, class Missing, class Has>
struct binding_error {
  static_assert(always_false<Hook, Missing, Has>,
                "E-BIND-001: a hook declares a batch field that the batch does not have. "
                "Fix: add the field to the batch (the data set's batch type), or declare it in the hook's "
                "input struct as std::optional<T> so it is a keyword with a default.");
  static constexpr bool ok = false;
};
template <class Hook, class Input>
struct hook_input_not_a_struct {
  static_assert(always_false<Hook, Input>,
                "E-BIND-002: a hook's last parameter must be a Boost.Hana struct naming the batch fields it "
                "wants (or the batch type itself, or a generic parameter for the whole batch). "
                "Fix: declare it with BOOST_HANA_DEFINE_STRUCT(Name, (nitro::Tensor, img), ...).");
  static constexpr bool ok = false;
};
template <class Hook, class HookField, class BatchField, class Declared, class Given>
struct binding_type_mismatch {
  static_assert(always_false<Hook, HookField, BatchField>,
                "E-BIND-005: a hook's input field (hook_field, declared_as its type) and the batch field of the same name "
                "(batch_field, batch_gives its type) have types that do not convert. Fix: declare the hook's field with "
                "the batch field's type.");
  static constexpr bool ok = false;
};

namespace detail {

template <class A> struct accessor_member_ptr { static constexpr bool known = false; };
template <class M, M P>
struct accessor_member_ptr<boost::hana::struct_detail::member_ptr<M, P>> {
  static constexpr bool known = true;
  static constexpr M value = P;
};
template <auto P>
struct accessor_member_ptr<hana_member_accessor<P>> {
  static constexpr bool known = true;
  static constexpr auto value = P;
};

template <class S>
using accessors_t = decltype(boost::hana::accessors<S>());

template <class S, std::size_t I>
using accessor_at = std::remove_cvref_t<decltype(boost::hana::second(boost::hana::at_c<I>(std::declval<accessors_t<S>>())))>;
template <class S, std::size_t I>
using key_at = std::remove_cvref_t<decltype(boost::hana::first(boost::hana::at_c<I>(std::declval<accessors_t<S>>())))>;

template <class S>
inline constexpr std::size_t member_count = decltype(boost::hana::length(std::declval<accessors_t<S>>()))::value;

template <class S, class Key>
inline constexpr bool struct_has_key =
    decltype(boost::hana::contains(boost::hana::keys(std::declval<S const&>()), std::declval<Key>()))::value;

template <class S, class Key, std::size_t... I>
constexpr std::size_t index_of_key(std::index_sequence<I...>) noexcept {
  std::size_t r = sizeof...(I);
  (void)((std::is_same_v<key_at<S, I>, Key> ? (r = I, true) : false) || ...);
  return r;
}
template <class S, class Key>
inline constexpr std::size_t key_index = index_of_key<S, Key>(std::make_index_sequence<member_count<S>>{});

template <class S, std::size_t... I>
constexpr auto batch_fields_of(std::index_sequence<I...>) {
  if constexpr ((accessor_member_ptr<accessor_at<S, I>>::known && ...))
    return batch_has<accessor_member_ptr<accessor_at<S, I>>::value...>{};
  else
    return batch_has<>{};
}

template <class T> struct optional_inner { using type = T; static constexpr bool is_optional = false; };
template <class T> struct optional_inner<std::optional<T>> { using type = T; static constexpr bool is_optional = true; };

// Whether member I of hook H's input struct In binds from batch type B: the batch has the field
// (or the member is a std::optional keyword) with a type that converts. The diagnostics name the
// hook, the field and both types (E-BIND-001, E-BIND-005).
template <class Hook, class In, std::size_t I, class B>
constexpr bool member_binds() {
  using Key = key_at<In, I>;
  using Acc = accessor_at<In, I>;
  using Member = std::remove_cvref_t<decltype(Acc{}(std::declval<In&>()))>;
  using Inner = optional_inner<Member>;
  if constexpr (struct_has_key<B, Key>) {
    using BAcc = accessor_at<B, key_index<B, Key>>;
    using Source = decltype(BAcc{}(std::declval<B const&>()));
    if constexpr (std::is_convertible_v<Source, typename Inner::type>) return true;
    else
      return binding_type_mismatch<Hook, hook_field<accessor_member_ptr<Acc>::value>, batch_field<accessor_member_ptr<BAcc>::value>,
                                   declared_as<Member>, batch_gives<std::remove_cvref_t<Source>>>::ok;
  } else if constexpr (!Inner::is_optional) {
    return binding_error<Hook, missing<accessor_member_ptr<Acc>::value>, decltype(batch_fields_of<B>(std::make_index_sequence<member_count<B>>{}))>::ok;
  } else {
    return true;
  }
}

template <class Hook, class In, std::size_t I, class Batch>
void fill_member(In& in, Batch&& batch) {
  using B = std::remove_cvref_t<Batch>;
  using Key = key_at<In, I>;
  using Acc = accessor_at<In, I>;
  if constexpr (member_binds<Hook, In, I, B>()) {  // else the binding has named the field already (the same diagnostic)
    if constexpr (struct_has_key<B, Key>) Acc{}(in) = accessor_at<B, key_index<B, Key>>{}(std::forward<Batch>(batch));
  }
}

}  // namespace detail

// The Hana key of a batch field named by a compile-time string: field_key<"img">.
template <fixed_string S>
using field_key = decltype(detail::to_hana_string<S>(std::make_index_sequence<S.size()>{}));

// Builds hook H's input struct In from the batch.
template <class Hook, class In, class Batch>
In bind_input(Batch&& batch) {
  if constexpr (!is_hana_struct_v<In>) {
    (void)hook_input_not_a_struct<Hook, hook_input_type<In>>::ok;
    return In{};
  } else {
    In in{};
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (detail::fill_member<Hook, In, I>(in, std::forward<Batch>(batch)), ...);
    }(std::make_index_sequence<detail::member_count<In>>{});
    return in;
  }
}

// Does every field hook H's input (resolved by hook_input) declares bind from batch type B? The
// binding asks before any hook's body is instantiated, so a missing or mistyped field is the first
// error, not whatever the hook's body makes of it.
template <class Hook, class HookInput, class B>
constexpr bool input_binds() {
  if constexpr (HookInput::kind != hook_input_kind::fields) return true;
  else if constexpr (!is_hana_struct_v<typename HookInput::input>) return true;  // bind_input names it (hook_input_not_a_struct)
  else {
    return detail::members_bind_v<Hook, typename HookInput::input, B>;
  }
}


// Does the input of a hook (resolved by hook_input) declare the batch field `Key`?
template <class HookInput, class Key>
constexpr bool declares_field() noexcept {
  if constexpr (HookInput::kind == hook_input_kind::whole_batch) return true;
  else if constexpr (HookInput::kind == hook_input_kind::fields) {
    if constexpr (is_hana_struct_v<typename HookInput::input>) return detail::struct_has_key<typename HookInput::input, Key>;
    else return false;
  } else return false;
}

// Calls hook H on e with the leading arguments and the part of the batch it declares.
template <class Hook, class E, class Batch, class... Lead>
decltype(auto) call_hook(E&& e, Batch&& batch, Lead&&... lead) {
  using B = std::remove_cvref_t<Batch>;
  using R = hook_input<Hook, std::remove_cvref_t<E>, B, std::remove_cvref_t<Lead>...>;
  if constexpr (R::kind == hook_input_kind::whole_batch) {
    return Hook::call(std::forward<E>(e), std::forward<Lead>(lead)..., std::forward<Batch>(batch));
  } else {
    static_assert(R::kind == hook_input_kind::fields, "E-BIND-011: call_hook names a hook the experiment does not define. Fix: define the hook, or call only the hooks it has.");
    return Hook::call(std::forward<E>(e), std::forward<Lead>(lead)...,
                      bind_input<Hook, typename R::input>(std::forward<Batch>(batch)));
  }
}

}  // namespace nitro
