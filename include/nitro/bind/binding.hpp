// nitro/bind/binding.hpp — the whole binding of an experiment to a batch type, resolved by the
// compiler: which hook takes which fields, what forward hands downstream, and the transfer set.
//
//   using B = nitro::binding<E, Batch, Model, Ps, St>;
//   B::forward_input, B::loss_input, B::metrics_input   (hook_input<...> each)
//   B::outputs                                          what forward returns first, as returned
//   B::transferred<Key>                                 does any hook declare batch field Key?
//
// forward declares inputs only, so a batch without labels still binds forward (predict). A loss
// whose parameter cannot take forward's outputs is a compile error naming both.
#pragma once

#include "nitro/bind/kwargs.hpp"

#include <boost/hana/accessors.hpp>

#include <cstddef>      // size_t
#include <string_view>  // field names
#include <tuple>        // get on forward's pair
#include <type_traits>  // traits
#include <utility>      // declval

namespace nitro {

template <class T> struct returns {};
template <class T> struct expects {};

template <class Producer, class Returns, class Consumer, class Expects>
struct hook_output_mismatch {
  static_assert(always_false<Producer, Returns, Consumer, Expects>,
                "E-BIND-003: a hook cannot take what the previous hook returns (forward's outputs go to loss and "
                "metrics exactly as returned, never unpacked or renamed). Fix: make the consumer's first parameter "
                "the producer's output type (or `auto const&`).");
  static constexpr bool ok = false;
};
template <class Hook, class Returned>
struct forward_must_return_pair {
  static_assert(always_false<Hook, Returned>,
                "E-BIND-004: forward must return (outputs, st_new): a std::pair or std::tuple of two. Fix: "
                "`auto [y, st_new] = model(in.img, ps, st); return std::pair{y, st_new};`");
  static constexpr bool ok = false;
};
template <class Hook, class Experiment>
struct required_hook_missing {
  static_assert(always_false<Hook, Experiment>,
                "E-BIND-007: the experiment lacks a hook the trainer needs (see nitro::hook::<name> above). Fix: define it "
                "as a const member function; see docs/hooks.md for its signature.");
  static constexpr bool ok = false;
};

namespace detail {
template <class T> struct is_pair_like : std::false_type {};
template <class A, class B> struct is_pair_like<std::pair<A, B>> : std::true_type {};
template <class A, class B> struct is_pair_like<std::tuple<A, B>> : std::true_type {};

template <class H, class E, class Batch, class... Lead>
constexpr bool hook_binds() {
  return hook_input<H, E, Batch, Lead...>::kind != hook_input_kind::absent;
}

// First parameter a non-generic consumer hook declares (to name it when outputs do not fit).
template <class H, class E>
using first_param_of = typename first_param<decltype(H::template plain<E>())>::type;
template <class P>
struct first_param_or_none { using type = void; };
}  // namespace detail

// forward's outputs when forward could not be bound (its coded error is printed): the hooks after it
// are then not compared with it, which would only add errors that say the same.
struct no_outputs {};

template <class E, class Batch, class Model, class Ps, class St>
struct binding {
  using experiment = E;
  using batch = Batch;
  using forward_input = hook_input<hook::forward, E, Batch, Model, Ps, St>;
  static constexpr bool has_forward = forward_input::kind != hook_input_kind::absent;

  static constexpr auto forward_result_type() {
    // forward's fields checked first, so a refused field's diagnostic is few frames deep
    if constexpr (!detail::fields_probed<hook::forward, E, Batch, Model, Ps, St>()) {
      return std::type_identity<std::pair<no_outputs, St>>{};
    } else if constexpr (!has_forward) {
      (void)required_hook_missing<hook::forward, E>::ok;
      return std::type_identity<std::pair<no_outputs, St>>{};
    } else if constexpr (!input_binds<hook::forward, forward_input, Batch>()) {  // named before forward's body is compiled
      return std::type_identity<std::pair<no_outputs, St>>{};
    } else {
      using R = std::remove_cvref_t<decltype(call_hook<hook::forward>(std::declval<E const&>(), std::declval<Batch const&>(),
                                                                      std::declval<Model const&>(), std::declval<Ps const&>(),
                                                                      std::declval<St const&>()))>;
      if constexpr (!detail::is_pair_like<R>::value) {
        (void)forward_must_return_pair<hook::forward, returns<R>>::ok;
        return std::type_identity<std::pair<no_outputs, St>>{};
      } else {
        return std::type_identity<R>{};
      }
    }
  }
  using forward_result = typename decltype(forward_result_type())::type;
  using outputs = std::remove_cvref_t<std::tuple_element_t<0, forward_result>>;
  using state_out = std::remove_cvref_t<std::tuple_element_t<1, forward_result>>;

  using loss_input = hook_input<hook::loss, E, Batch, outputs>;
  using metrics_input = hook_input<hook::metrics, E, Batch, outputs>;
  static constexpr bool has_loss = hook::loss::present<E>;
  static constexpr bool has_metrics = hook::metrics::present<E>;

  // A consumer hook that exists but cannot take `outputs` is named with what it expects.
  template <class H>
  static constexpr bool consumer_fits() {
    if constexpr (!H::template present<E> || std::is_same_v<outputs, no_outputs>) return true;
    else if constexpr (hook_input<H, E, Batch, outputs>::kind != hook_input_kind::absent) {
      using In = hook_input<H, E, Batch, outputs>;
      if constexpr (In::kind == hook_input_kind::fields) {
        using P = decltype(H::template plain<E>());
        if constexpr (!std::is_same_v<P, detail::no_params>) {
          using First = std::remove_cvref_t<typename detail::first_param<P>::type>;
          if constexpr (!std::is_convertible_v<outputs const&, First>)
            return hook_output_mismatch<hook::forward, returns<outputs>, H, expects<First>>::ok;
        }
      }
      return true;
    } else {
      using P = decltype(H::template plain<E>());
      if constexpr (!std::is_same_v<P, detail::no_params>)
        return hook_output_mismatch<hook::forward, returns<outputs>, H,
                                    expects<std::remove_cvref_t<typename detail::first_param<P>::type>>>::ok;
      else
        return hook_output_mismatch<hook::forward, returns<outputs>, H, expects<void>>::ok;
    }
  }
  // forward bound: it exists, its fields bind, it returns (outputs, st_new)
  static constexpr bool forward_fits = !std::is_same_v<outputs, no_outputs>;
  // loss and metrics bind from the batch and take outputs: checked before either body is compiled
  static constexpr bool loss_fits = input_binds<hook::loss, loss_input, Batch>() && consumer_fits<hook::loss>();
  static constexpr bool metrics_fits = input_binds<hook::metrics, metrics_input, Batch>() && consumer_fits<hook::metrics>();

  // The transfer set: a batch field moves to the device only if some hook declares it.
  template <class Key>
  static constexpr bool transferred = declares_field<forward_input, Key>() || declares_field<loss_input, Key>() ||
                                      declares_field<metrics_input, Key>();
  // For predict: only what forward declares.
  template <class Key>
  static constexpr bool needed_by_forward = declares_field<forward_input, Key>();
};

}  // namespace nitro
