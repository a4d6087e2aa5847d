// nitro/train/keyword.hpp — what a run keyword is: the keyword object and its argument, what a
// generic keyword accepts, the coded diagnostics, a resolved value with its source, a record, and
// the resolvers the table's rows expand to (keyword, else accessor, else field, else default).
//
// The table itself is train/keyword_table.hpp; train/keywords.hpp expands it into run_keywords.
#pragma once

#include "nitro/train/keyword_table.hpp"

#include "nitro/bind/hook.hpp"
#include "nitro/core/error.hpp"
#include "nitro/core/fixed_string.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/core/cache_stats.hpp"
#include "nitro/train/early_stop.hpp"
#include "nitro/train/ema.hpp"
#include "nitro/record/logger.hpp"
#include "nitro/dist/replicas.hpp"
#include "nitro/tensor/backend.hpp"

#include <boost/hana/accessors.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/string.hpp>

#include <algorithm>    // max, min
#include <concepts>     // convertible_to
#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <optional>     // keywords given or not at run time
#include <string>       // run_dir, texts
#include <string_view>  // names
#include <type_traits>  // detection
#include <utility>      // forward
#include <vector>       // records

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
  using keyword_arg_tag = void;  // what is_keyword_arg detects (nvcc's front end cannot match keyword_arg<N, V>)
  V value;
};

// The framework's value of a generic keyword: the room that consumes the keyword decides it.
struct framework_default {
  std::string describe() const { return "framework default"; }
};
// The value of a construction fact nobody gave.
struct not_given {
  std::string describe() const { return "none"; }
};

// ---- what a generic keyword accepts -----------------------------------------------------------------
template <class V>
inline constexpr bool is_object_value_v =
    std::is_class_v<V> && !std::is_convertible_v<V const&, std::string_view> && !std::is_same_v<V, std::string>;

template <fixed_string Name>
struct keyword_accepts {
  template <class V> static constexpr bool test = true;
};
template <> struct keyword_accepts<"logger"> {
  template <class V> static constexpr bool test = is_logger_value_v<V>;
};
template <> struct keyword_accepts<"checkpointer"> {
  template <class V> static constexpr bool test = is_object_value_v<V>;
};
template <> struct keyword_accepts<"schedules"> {
  template <class V> static constexpr bool test = is_object_value_v<V>;
};
template <> struct keyword_accepts<"device"> {
  template <class V> static constexpr bool test = backend_choice<V>;  // nitro::cpu_backend{} (the default), nitro::cuda_device{}
};

// ---- diagnostics ------------------------------------------------------------------------------------
template <class Arg, std::size_t Position>
struct not_a_run_keyword {
  static_assert(always_false<Arg>,
                "E-KW-001: an argument of nitro::Nitro(experiment, ...) is not a run keyword. "
                "Fix: pass keywords as nitro::max_epochs = 60, nitro::seed = 3, ... (every keyword is listed in nitro/train/keywords.hpp).");
  static constexpr bool ok = false;
};
template <class Keyword, class FieldType>
struct keyword_field_has_wrong_type {
  static_assert(always_false<Keyword, FieldType>,
                "E-KW-002: the experiment has a field named after a run keyword, but its type does not convert to "
                "the keyword's type. Fix: change the field's type, or rename the field if it is not meant as the keyword.");
  static constexpr bool ok = false;
};
template <class Keyword, class ReturnType>
struct keyword_accessor_has_wrong_type {
  static_assert(always_false<Keyword, ReturnType>,
                "E-KW-002: the experiment has an accessor named after a run keyword, but what it returns does not "
                "convert to the keyword's type. Fix: return the keyword's type, or rename the member function.");
  static constexpr bool ok = false;
};
template <class Keyword, std::size_t Position>
struct unknown_run_keyword {
#define NITRO_DETAIL_LISTED(KW_NAME, ...) #KW_NAME ", "
#define NITRO_DETAIL_LISTED_DATA(Doc) "data, "
  static_assert(always_false<Keyword>,
                "E-KW-003: this keyword is not one of the run keywords or construction facts ("
                NITRO_DETAIL_RUN_KEYWORDS(NITRO_DETAIL_LISTED, NITRO_DETAIL_LISTED, NITRO_DETAIL_LISTED, NITRO_DETAIL_LISTED_DATA)
                "checkpoint). Fix: spell one of them.");
#undef NITRO_DETAIL_LISTED
#undef NITRO_DETAIL_LISTED_DATA
  static constexpr bool ok = false;
};
template <class Keyword, class ValueType>
struct keyword_value_has_wrong_type {
  static_assert(always_false<Keyword, ValueType>,
                "E-KW-004: a run keyword was given a value of a type it does not take. Fix: pass the keyword's type "
                "(see the keyword's documentation in train/keywords.hpp).");
  static constexpr bool ok = false;
};
template <class Keyword, class Again>
struct run_keyword_given_twice {
  static_assert(always_false<Keyword, Again>,
                "E-KW-005: a run keyword is given twice (or as weights and as its deprecated spelling checkpoint). "
                "Fix: pass each keyword once.");
  static constexpr bool ok = false;
};
template <auto Member>
struct schedules_come_from_an_accessor {
  static_assert(always_false_v<Member>,
                "E-KW-006: the experiment has a data member called `schedules`, but schedules are read from the "
                "keyword or from an accessor, never from a field. Fix: `auto schedules() const { return ...; }`, "
                "or rename the member.");
  static constexpr bool ok = false;
};

namespace detail {

template <class T, class... Depends> struct dependent_type { using type = T; };

template <class T> struct is_optional : std::false_type {};
template <class T> struct is_optional<std::optional<T>> : std::true_type {};
template <class T> inline constexpr bool is_optional_v = is_optional<T>::value;

template <class T, class V>
inline constexpr bool keyword_converts = std::is_convertible_v<V, T> || requires(V&& v) { T{static_cast<V&&>(v)}; };

template <class T, class V>
T keyword_convert(V&& v) {
  if constexpr (std::is_convertible_v<V&&, T>) return static_cast<T>(static_cast<V&&>(v));
  else return T{static_cast<V&&>(v)};
}

}  // namespace detail

// The keyword object: `nitro::max_epochs = 60` makes a keyword_arg. Typed keywords convert the
// value to T; generic ones (T = void) keep the value's own type (loggers, schedules, ...).
template <fixed_string Name, class T = void>
struct keyword {
  static constexpr auto name = Name;
  using value_type = T;  // void: a generic keyword (the value keeps its own type)
  template <class V>
  constexpr auto operator=(V&& v) const {  // NOLINT: assignment syntax is the point
    using D = std::decay_t<V>;
    if constexpr (std::is_void_v<T>) {
      if constexpr (!keyword_accepts<Name>::template test<D>) (void)keyword_value_has_wrong_type<keyword, D>::ok;
      return keyword_arg<Name, D>{static_cast<V&&>(v)};
    } else if constexpr (detail::is_optional_v<D>) {
      // an optional value: empty means "not given" (the accessor, field or default decide)
      using U = typename D::value_type;
      if constexpr (!detail::keyword_converts<T, U const&>) {
        (void)keyword_value_has_wrong_type<keyword, D>::ok;
        return keyword_arg<Name, std::optional<T>>{};
      } else {
        std::optional<T> out;
        if (v) out = detail::keyword_convert<T>(*v);
        return keyword_arg<Name, std::optional<T>>{out};
      }
    } else {
      if constexpr (!detail::keyword_converts<T, V&&>) {
        (void)keyword_value_has_wrong_type<keyword, D>::ok;
        return keyword_arg<Name, T>{};
      } else {
        return keyword_arg<Name, T>{detail::keyword_convert<T>(static_cast<V&&>(v))};
      }
    }
  }
};

// Detected through a member, not a partial specialisation on keyword_arg<N, V>: nvcc's front end
// (EDG) does not deduce a class-type template argument nested in a template-id (docs/cuda.md).
template <class K> struct is_keyword_arg : std::bool_constant<requires { typename K::keyword_arg_tag; }> {};

template <class Arg, std::size_t Position>
constexpr bool check_run_keyword() noexcept {
  if constexpr (is_keyword_arg<Arg>::value) return true;
  else return not_a_run_keyword<Arg, Position>::ok;
}

// Is K the keyword Name? False for anything that is not a keyword, without naming K::name (an
// argument that is not a keyword is E-KW-001 once, not an error in every lookup after it).
template <fixed_string Name, class K>
constexpr bool keyword_named() noexcept {
  if constexpr (is_keyword_arg<K>::value) return K::name == Name;
  else return false;
}
template <fixed_string Name, class K> inline constexpr bool is_keyword_named = keyword_named<Name, K>();

// Finds keyword Name among the arguments.
template <fixed_string Name, class... Args>
constexpr bool has_keyword() noexcept {
  return (is_keyword_named<Name, std::remove_cvref_t<Args>> || ...);
}
template <fixed_string Name, class... Args>
constexpr std::size_t count_keyword() noexcept {
  return (std::size_t{0} + ... + std::size_t(is_keyword_named<Name, std::remove_cvref_t<Args>>));
}
template <fixed_string Name, class First, class... Rest>
constexpr auto const& get_keyword(First const& first, Rest const&... rest) noexcept {
  if constexpr (is_keyword_named<Name, First>) return first.value;
  else return get_keyword<Name>(rest...);
}

template <class T>
struct resolved {
  T value;
  keyword_source source;
};

// One keyword's resolution, as the manifest, `explain` and `show` print it.
struct keyword_record {
  std::string name;
  std::string value;
  keyword_source source = keyword_source::fallback;
  bool fact = false;   // a construction fact (keyword or nothing)
  std::string note;    // e.g. "given as `checkpoint`, the deprecated spelling of weights"
};

// A value as text: numbers, strings, anything with describe() or to_string(), data sets by name.
template <class V>
std::string keyword_text(V const& v) {
  if constexpr (detail::is_optional_v<V>) {
    return v ? keyword_text(*v) : std::string("none");
  } else if constexpr (std::is_pointer_v<V> && !std::is_convertible_v<V, std::string_view>) {  // a job, a backend: by what it says
    return v ? keyword_text(*v) : std::string("none");
  } else if constexpr (std::is_same_v<V, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_integral_v<V>) {
    return std::to_string(v);
  } else if constexpr (std::is_floating_point_v<V>) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
    return buf;
  } else if constexpr (std::is_convertible_v<V const&, std::string_view>) {
    return std::string(std::string_view(v));
  } else if constexpr (requires { { v.describe() } -> std::convertible_to<std::string>; }) {
    return v.describe();
  } else if constexpr (requires { { v.to_string() } -> std::convertible_to<std::string>; }) {
    return v.to_string();
  } else if constexpr (requires { v.name; v.splits; }) {
    return "data set " + std::string(v.name);
  } else if constexpr (requires { { v.string() } -> std::convertible_to<std::string>; }) {
    return v.string();
  } else if constexpr (is_hana_struct_v<V>) {
    std::string s;
    boost::hana::for_each(boost::hana::accessors<V>(), [&](auto acc) {
      s += (s.empty() ? "" : ", ") + std::string(boost::hana::to<char const*>(boost::hana::first(acc)));
    });
    return "{" + s + "}";
  } else {
    return type_name<V>();
  }
}

namespace detail {

enum class keyword_reads { accessor_and_field, accessor_only };

// Resolves keyword Name of type T (void: generic) for experiment E. Probe detects and reads the
// member of that name; make_default() is the framework's value.
template <fixed_string Name, class T, keyword_reads Reads, class Probe, class E, class MakeDefault, class... Args>
auto resolve_run_keyword(E const& e, MakeDefault make_default, Args const&... args) {
  constexpr bool generic = std::is_void_v<T>;
  auto fallback = [&] {
    if constexpr (generic) return resolved<std::decay_t<decltype(make_default())>>{make_default(), keyword_source::fallback};
    else return resolved<T>{static_cast<T>(make_default()), keyword_source::fallback};
  };
  if constexpr (has_keyword<Name, Args...>()) {
    auto const& v = get_keyword<Name>(args...);
    using V = std::remove_cvref_t<decltype(v)>;
    if constexpr (generic) return resolved<V>{v, keyword_source::keyword};
    else if constexpr (is_optional_v<V>) {  // given at run time, or not: then the accessor, field, default
      if (v) return resolved<T>{static_cast<T>(*v), keyword_source::keyword};
      return resolve_run_keyword<Name, T, Reads, Probe>(e, make_default);
    } else return resolved<T>{static_cast<T>(v), keyword_source::keyword};
  } else if constexpr (Probe::template has_accessor<E>()) {
    using R = std::decay_t<decltype(Probe::accessor(e))>;
    if constexpr (generic) {
      if constexpr (keyword_accepts<Name>::template test<R>) return resolved<R>{Probe::accessor(e), keyword_source::accessor};
      else {
        (void)keyword_accessor_has_wrong_type<keyword<Name, T>, R>::ok;
        return fallback();
      }
    } else {
      if constexpr (keyword_converts<T, R>) return resolved<T>{keyword_convert<T>(Probe::accessor(e)), keyword_source::accessor};
      else {
        (void)keyword_accessor_has_wrong_type<keyword<Name, T>, R>::ok;
        return fallback();
      }
    }
  } else if constexpr (Probe::template has_field<E>()) {
    using F = std::remove_cvref_t<decltype(Probe::field(e))>;
    if constexpr (Reads == keyword_reads::accessor_only) {
      (void)schedules_come_from_an_accessor<Probe::template field_ptr<E>()>::ok;
      return fallback();
    } else if constexpr (generic) {
      if constexpr (keyword_accepts<Name>::template test<F>) return resolved<F>{Probe::field(e), keyword_source::field};
      else {
        (void)keyword_field_has_wrong_type<keyword<Name, T>, F>::ok;
        return fallback();
      }
    } else {
      if constexpr (keyword_converts<T, F const&>) return resolved<T>{keyword_convert<T>(Probe::field(e)), keyword_source::field};
      else {
        (void)keyword_field_has_wrong_type<keyword<Name, T>, F>::ok;
        return fallback();
      }
    }
  } else {
    return fallback();
  }
}

// A construction fact: the keyword's value, else the default.
template <fixed_string Name, class T, class MakeDefault, class... Args>
auto resolve_fact(MakeDefault make_default, Args const&... args) {
  if constexpr (has_keyword<Name, Args...>()) {
    auto const& v = get_keyword<Name>(args...);
    using V = std::remove_cvref_t<decltype(v)>;
    if constexpr (std::is_void_v<T> && is_optional_v<V>)  // an empty optional: not given
      return resolved<V>{v, v ? keyword_source::keyword : keyword_source::fallback};
    else if constexpr (!std::is_void_v<T> && is_optional_v<V>)
      return resolved<T>{v ? static_cast<T>(*v) : static_cast<T>(make_default()), v ? keyword_source::keyword : keyword_source::fallback};
    else return resolved<V>{v, keyword_source::keyword};
  } else if constexpr (std::is_void_v<T>) {
    return resolved<std::decay_t<decltype(make_default())>>{make_default(), keyword_source::fallback};
  } else {
    return resolved<T>{static_cast<T>(make_default()), keyword_source::fallback};
  }
}

}  // namespace detail

// NITRO_DETAIL_KEYWORD_PROBE(name): nitro::detail::kw_<name>::probe, which finds and reads a
// member of that name.
#define NITRO_DETAIL_KEYWORD_PROBE(KW_NAME)                                                               \
  namespace detail::kw_##KW_NAME {                                                                        \
  struct probe_base { int KW_NAME; };                                                                     \
  template <class E> struct probe_of : E, probe_base {};                                                  \
  struct probe {                                                                                          \
    template <class E> static constexpr bool has_member() {                                               \
      if constexpr (::std::is_class_v<E> && !::std::is_final_v<E>) return !requires { &probe_of<E>::KW_NAME; }; \
      else return false;                                                                                  \
    }                                                                                                     \
    template <class E> static constexpr bool has_accessor() {                                             \
      if constexpr (has_member<E>()) return requires(E const& e) { e.KW_NAME(); };                        \
      else return false;                                                                                  \
    }                                                                                                     \
    template <class E> static constexpr bool has_field() {                                                \
      if constexpr (has_member<E>() && !has_accessor<E>()) /* a constrained accessor that does not apply: no field */ \
        return requires { requires ::std::is_member_object_pointer_v<decltype(&E::KW_NAME)>; };           \
      else return false;                                                                                  \
    }                                                                                                     \
    template <class E> static decltype(auto) accessor(E const& e) { return e.KW_NAME(); }                 \
    template <class E> static auto const& field(E const& e) { return e.KW_NAME; }                         \
    template <class E> static constexpr auto field_ptr() { return &E::KW_NAME; }                          \
  };                                                                                                      \
  }

// NITRO_DETAIL_RUN_KEYWORD(name, Type, default...): the keyword object nitro::kw::name (also
// nitro::name) and its resolver nitro::resolve_name(e, args...) -> resolved<Type>.
#define NITRO_DETAIL_RUN_KEYWORD(KW_NAME, Type, ...)                                                      \
  namespace kw { inline constexpr ::nitro::keyword<#KW_NAME, Type> KW_NAME{}; }                             \
  using kw::KW_NAME;                                                                                      \
  NITRO_DETAIL_KEYWORD_PROBE(KW_NAME)                                                                     \
  template <class E, class... Args>                                                                      \
  auto resolve_##KW_NAME(E const& e, Args const&... args) {                                               \
    return ::nitro::detail::resolve_run_keyword<#KW_NAME, Type, ::nitro::detail::keyword_reads::accessor_and_field, \
                                                detail::kw_##KW_NAME::probe>(                             \
        e, [] { return Type(__VA_ARGS__); }, args...);                                                    \
  }

// NITRO_DETAIL_GENERIC_KEYWORD(name, reads, default-expression): a keyword that keeps its value's
// type (checked by keyword_accepts<"name">). Only in nitro::kw (the plain names are taken).
#define NITRO_DETAIL_GENERIC_KEYWORD(KW_NAME, Reads, ...)                                                 \
  namespace kw { inline constexpr ::nitro::keyword<#KW_NAME> KW_NAME{}; }                                   \
  NITRO_DETAIL_KEYWORD_PROBE(KW_NAME)                                                                     \
  template <class E, class... Args>                                                                      \
  auto resolve_##KW_NAME(E const& e, Args const&... args) {                                               \
    return ::nitro::detail::resolve_run_keyword<#KW_NAME, void, ::nitro::detail::keyword_reads::Reads,      \
                                                detail::kw_##KW_NAME::probe>(                             \
        e, [] { return __VA_ARGS__; }, args...);                                                          \
  }

// NITRO_DETAIL_CONSTRUCTION_FACT(name, Type or void, default-expression): a keyword without an
// accessor; nitro::resolve_name(args...).
#define NITRO_DETAIL_CONSTRUCTION_FACT(KW_NAME, Type, ...)                                                \
  namespace kw { inline constexpr ::nitro::keyword<#KW_NAME, Type> KW_NAME{}; }                             \
  template <class... Args>                                                                               \
  auto resolve_##KW_NAME(Args const&... args) {                                                           \
    return ::nitro::detail::resolve_fact<#KW_NAME, Type>([] { return __VA_ARGS__; }, args...);              \
  }

}  // namespace nitro
