// nitro/train/keywords.hpp — run keywords: keyword, else accessor, else field, else default.
//
//   nitro::Nitro h(e, nitro::max_epochs = 60);   // the keyword wins for THIS run
//   int max_epochs() const { return 5; }          // else the experiment's accessor
//   int max_epochs = 5;                           // else a field of the same name (C++ allows one of the two)
//   1                                             // else the framework's value
//
// Each resolution is recorded with its source (keyword, accessor, field, default) for the
// manifest, `explain` and `show`. A field of the right name but a type that does not convert is a
// compile error naming the keyword; so is passing something that is not a run keyword.
#pragma once

#include "nitro/core/fixed_string.hpp"
#include "nitro/core/meta.hpp"

#include <cstdint>      // uint64_t
#include <string>       // run_dir, sources
#include <string_view>  // names
#include <type_traits>  // detection
#include <utility>      // forward

namespace nitro {

enum class keyword_source { keyword, accessor, field, fallback };
constexpr char const* to_string(keyword_source s) noexcept {
  switch (s) {
    case keyword_source::keyword: return "keyword";
    case keyword_source::accessor: return "accessor";
    case keyword_source::field: return "field";
    case keyword_source::fallback: return "default";
  }
  return "?";
}

// A keyword with its value, as passed to the handle.
template <fixed_string Name, class V>
struct keyword_arg {
  static constexpr auto name = Name;
  using value_type = V;
  V value;
};

// The keyword object: `nitro::max_epochs = 60` makes a keyword_arg. Typed keywords convert the
// value to T; generic ones (T = void) keep the value's own type (loggers, schedules, ...).
template <fixed_string Name, class T = void>
struct keyword {
  static constexpr auto name = Name;
  template <class V>
  constexpr auto operator=(V&& v) const {  // NOLINT: assignment syntax is the point
    if constexpr (std::is_void_v<T>) return keyword_arg<Name, std::remove_cvref_t<V>>{static_cast<V&&>(v)};
    else {
      static_assert(std::is_convertible_v<V&&, T>, "nitro: this run keyword's value does not convert to the keyword's type");
      return keyword_arg<Name, T>{static_cast<T>(static_cast<V&&>(v))};
    }
  }
};

template <class K> struct is_keyword_arg : std::false_type {};
template <fixed_string N, class V> struct is_keyword_arg<keyword_arg<N, V>> : std::true_type {};

template <class Arg, std::size_t Position>
struct not_a_run_keyword {
  static_assert(always_false<Arg>,
                "E-KW-001: an argument of nitro::Nitro(experiment, ...) is not a run keyword. "
                "Fix: pass keywords as nitro::max_epochs = 60, nitro::seed = 3, ... (see docs/keywords.md).");
  static constexpr bool ok = false;
};
template <class Keyword, class FieldType>
struct keyword_field_has_wrong_type {
  static_assert(always_false<Keyword, FieldType>,
                "E-KW-002: the experiment has a field named after a run keyword, but its type does not convert to "
                "the keyword's type. Fix: change the field's type, or rename the field if it is not meant as the keyword.");
  static constexpr bool ok = false;
};

template <class Arg, std::size_t Position>
constexpr bool check_run_keyword() noexcept {
  if constexpr (is_keyword_arg<Arg>::value) return true;
  else return not_a_run_keyword<Arg, Position>::ok;
}

// Finds keyword Name among the arguments; nullptr-like when absent.
template <fixed_string Name, class... Args>
constexpr bool has_keyword() noexcept {
  return ((is_keyword_arg<std::remove_cvref_t<Args>>::value && std::remove_cvref_t<Args>::name == Name) || ...);
}
template <fixed_string Name, class First, class... Rest>
constexpr auto const& get_keyword(First const& first, Rest const&... rest) noexcept {
  if constexpr (is_keyword_arg<First>::value && First::name == Name) return first.value;
  else return get_keyword<Name>(rest...);
}

template <class T>
struct resolved {
  T value;
  keyword_source source;
};

// NITRO_DETAIL_RUN_KEYWORD(name, Type, default): the keyword object nitro::kw::name (also nitro::name)
// and its resolver
// nitro::detail::resolve_name(e, args...). Type void: generic keyword without a typed default.
#define NITRO_DETAIL_RUN_KEYWORD(KW_NAME, Type, ...)                                                         \
  namespace kw { inline constexpr ::nitro::keyword<#KW_NAME, Type> KW_NAME{}; }                                  \
  using kw::KW_NAME;                                                                                        \
  namespace detail::kw_##KW_NAME {                                                                          \
  struct probe_base { int KW_NAME; };                                                                       \
  template <class E> struct probe : E, probe_base {};                                                  \
  template <class E> constexpr bool has_member() {                                                     \
    if constexpr (::std::is_class_v<E> && !::std::is_final_v<E>) return !requires { &probe<E>::KW_NAME; }; \
    else return false;                                                                                 \
  }                                                                                                    \
  template <class E> constexpr bool has_accessor() {                                                   \
    if constexpr (has_member<E>()) return requires(E const& e) { e.KW_NAME(); };                            \
    else return false;                                                                                 \
  }                                                                                                    \
  template <class E> constexpr bool has_field() {                                                      \
    if constexpr (has_member<E>() && !has_accessor<E>())                                               \
      return ::std::is_member_object_pointer_v<decltype(&E::KW_NAME)>;                                      \
    else return false;                                                                                 \
  }                                                                                                    \
  }                                                                                                    \
  template <class E, class... Args>                                                                    \
  auto resolve_##KW_NAME(E const& e, Args const&... args) {                                                 \
    using T = Type;                                                                                    \
    if constexpr (::nitro::has_keyword<#KW_NAME, Args...>()) {                                              \
      return ::nitro::resolved<T>{static_cast<T>(::nitro::get_keyword<#KW_NAME>(args...)), ::nitro::keyword_source::keyword}; \
    } else if constexpr (detail::kw_##KW_NAME::has_accessor<E>()) {                                         \
      return ::nitro::resolved<T>{static_cast<T>(e.KW_NAME()), ::nitro::keyword_source::accessor};          \
    } else if constexpr (detail::kw_##KW_NAME::has_field<E>()) {                                            \
      using F = ::std::remove_cvref_t<decltype(e.KW_NAME)>;                                                 \
      if constexpr (::std::is_convertible_v<F const&, T>)                                              \
        return ::nitro::resolved<T>{static_cast<T>(e.KW_NAME), ::nitro::keyword_source::field};             \
      else {                                                                                           \
        (void)::nitro::keyword_field_has_wrong_type<::nitro::keyword<#KW_NAME, T>, F>::ok;                  \
        return ::nitro::resolved<T>{T(__VA_ARGS__), ::nitro::keyword_source::fallback};                \
      }                                                                                                \
    } else {                                                                                           \
      return ::nitro::resolved<T>{T(__VA_ARGS__), ::nitro::keyword_source::fallback};                  \
    }                                                                                                  \
  }

// The typed run keywords (the others are generic: their types come from later rooms).
NITRO_DETAIL_RUN_KEYWORD(seed, std::uint64_t, 1)
NITRO_DETAIL_RUN_KEYWORD(run_dir, std::string, "runs")
NITRO_DETAIL_RUN_KEYWORD(n_devs, int, 1)
NITRO_DETAIL_RUN_KEYWORD(accum, int, 1)
NITRO_DETAIL_RUN_KEYWORD(max_epochs, int, 1)
NITRO_DETAIL_RUN_KEYWORD(gradient_clip_norm, double, 0.0)
NITRO_DETAIL_RUN_KEYWORD(check_divergence, bool, true)
NITRO_DETAIL_RUN_KEYWORD(autolog_schedules, bool, true)
NITRO_DETAIL_RUN_KEYWORD(log_every_n_steps, int, 50)
NITRO_DETAIL_RUN_KEYWORD(eval_loss, bool, true)

// Not run keywords in the note's sense (no keyword), but resolved the same way from the
// experiment: the batch size and the base learning rate (learning_rate(e), or a field `lr`).
NITRO_DETAIL_RUN_KEYWORD(batch_size, std::int64_t, 128)

}  // namespace nitro
