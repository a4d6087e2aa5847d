// nitro/train/keywords.hpp — run keywords: keyword, else accessor, else field, else default.
//
//   nitro::Nitro h(e, nitro::max_epochs = 60);   // the keyword wins for THIS run
//   int max_epochs() const { return 5; }          // else the experiment's accessor
//   int max_epochs = 5;                           // else a field of the same name (C++ allows one of the two)
//   1                                             // else the framework's value
//
// The sixteen run keywords of the note: seed, run_dir, n_devs, accum, max_epochs, schedules,
// gradient_clip_norm, check_divergence, autolog_schedules, log_every_n_steps, logger,
// checkpointer, early_stop, monitor, eval_loss, ema. `schedules` reads an accessor and never a
// field (a data member called `schedules` is a compile error). Typed keywords convert their value
// to the keyword's type (ema = 0.999 makes an ema_options); generic ones (logger, checkpointer,
// schedules) keep the value's own type, checked against what the keyword accepts.
//
// Construction facts are keywords without accessors or fields: data, weights, resume, run_ref, w0,
// restore_optimizer, restore_best, eval_weights, load_ema — and checkpoint, the deprecated spelling
// of weights. They are spelled nitro::kw::<name> (also nitro::<name>, except data and
// checkpointer, whose plain names are the data-set namespace and the checkpointer class).
//
// Each keyword is one row of the table NITRO_DETAIL_RUN_KEYWORDS below (name, type, knob or not, doc,
// default), which generates the keyword objects, their resolvers, run_keywords' members and records,
// the names E-KW-003 accepts and run_keyword_doc(name): nothing else lists them.
//
// `nitro::run_keywords kw(e, args...)` resolves them all at once and checks the arguments: an
// unknown keyword, a keyword given twice, or a field/accessor of the right name but the wrong type
// is a compile error naming it (E-KW-001..006); `kw.validate()` checks values (E-KW-007, E-EMA-001,
// E-STOP-001); `kw.records()` is one (name, value as text, source) record per keyword, for the
// manifest, `explain` and `show`.
#pragma once

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

// ---- the one table of run keywords ----------------------------------------------------------------------
// Every run keyword and construction fact, once, in the order the records list them. Each row
// generates the keyword object, its resolver, its member of run_keywords, its record (manifest,
// show, explain), the names E-KW-003 accepts, its one-line doc (explain) and, for `knob` rows, the
// knob it can be without being a field (knobs/keyword_knobs.hpp).
//   TYPED(name, Type, knob|no_knob, "doc", default...)   keyword -> accessor -> field -> default, as Type
//   GENERIC(name, reads, "doc", default)                  keeps its value's type (keyword_accepts<"name">)
//   FACT(name, Type|void, resolver, "doc", default)        a construction fact: the keyword or its default
//   DATA("doc")                                           the data set: nitro::kw::data, resolved by the handle
#define NITRO_DETAIL_RUN_KEYWORDS(TYPED, GENERIC, FACT, DATA)                                                               \
  TYPED(seed, std::uint64_t, knob, "the run seed; every random stream folds it in", 1)                                  \
  TYPED(run_dir, std::string, knob, "where runs are recorded", "runs")                                                   \
  TYPED(n_devs, int, knob, "devices to train on", 1)                                                                     \
  TYPED(accum, int, knob, "batches accumulated per optimizer step", 1)                                                   \
  TYPED(max_epochs, int, knob, "epochs to train", 1)                                                                     \
  GENERIC(schedules, accessor_only, "schedule key -> factory of the horizon (an accessor, never a field)",                \
          ::nitro::framework_default{})                                                                                 \
  TYPED(gradient_clip_norm, double, knob, "global gradient-norm clip (0: off)", 0.0)                                     \
  TYPED(check_divergence, bool, knob, "stop as diverged on a NaN, infinite or blown-up loss", true)                      \
  TYPED(autolog_schedules, bool, knob, "log every scheduled value", true)                                                \
  TYPED(log_every_n_steps, int, knob, "steps between train log lines", 50)                                               \
  GENERIC(logger, accessor_and_field, "where the run's lines go", ::nitro::default_loggers)                              \
  GENERIC(checkpointer, accessor_and_field, "when checkpoints are written, which are kept", ::nitro::framework_default{}) \
  TYPED(early_stop, early_stopping, no_knob, "evaluations without improvement before stopping", )                        \
  TYPED(monitor, monitor_spec, no_knob, "the metric early stopping and the best checkpoint watch", )                     \
  TYPED(eval_loss, bool, knob, "report the loss when evaluating", true)                                                  \
  TYPED(ema, ema_options, no_knob, "an exponential moving average of the weights", )                                     \
  TYPED(batch_size, std::int64_t, knob, "samples per batch", 128)                                                        \
  TYPED(max_steps, std::int64_t, no_knob, "optimizer steps to train instead of max_epochs epochs (0: max_epochs decides)", 0) \
  TYPED(eval_every, std::int64_t, no_knob, "steps between evaluations of valid besides each epoch's end (0: none)", 0)  \
  TYPED(diagnostics, bool, no_knob, "gradient and parameter norms in every train line", false)                          \
  DATA("the data set")                                                                                                  \
  FACT(weights, void, resolve_weights_or_checkpoint, "weights to start from", ::nitro::not_given{})                     \
  FACT(resume, void, resolve_resume, "a checkpoint to continue exactly", ::nitro::not_given{})                          \
  FACT(run_ref, void, resolve_run_ref, "the run's record folder", ::nitro::not_given{})                                 \
  FACT(w0, void, resolve_w0, "the anchor of decay toward w0", ::nitro::not_given{})                                     \
  FACT(restore_optimizer, bool, resolve_restore_optimizer, "resume the optimizer's state too", true)                    \
  FACT(restore_best, void, resolve_restore_best, "the weights the run ends with", ::nitro::not_given{})                 \
  FACT(eval_weights, void, resolve_eval_weights, "the weights evaluate() uses", ::nitro::not_given{})                   \
  FACT(load_ema, bool, resolve_load_ema, "take the EMA a weights or resume file holds", true)                    \
  FACT(device, void, resolve_device, "the backend the run's steps run on", ::nitro::cpu_backend{})                       \
  FACT(replicas, ::nitro::dist::replicas*, resolve_replicas, "the data-parallel job this run is one replica of", nullptr)

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
  template <class V> static constexpr bool test = Backend<V>;  // nitro::cpu_backend{}, the default
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

template <class K> struct is_keyword_arg : std::false_type {};
template <fixed_string N, class V> struct is_keyword_arg<keyword_arg<N, V>> : std::true_type {};

template <class Arg, std::size_t Position>
constexpr bool check_run_keyword() noexcept {
  if constexpr (is_keyword_arg<Arg>::value) return true;
  else return not_a_run_keyword<Arg, Position>::ok;
}

// Finds keyword Name among the arguments.
template <fixed_string Name, class... Args>
constexpr bool has_keyword() noexcept {
  return ((is_keyword_arg<std::remove_cvref_t<Args>>::value && std::remove_cvref_t<Args>::name == Name) || ...);
}
template <fixed_string Name, class... Args>
constexpr std::size_t count_keyword() noexcept {
  return (std::size_t{0} + ... + std::size_t(is_keyword_arg<std::remove_cvref_t<Args>>::value && std::remove_cvref_t<Args>::name == Name));
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
  } else if constexpr (std::is_pointer_v<V>) {
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

#define NITRO_DETAIL_DECLARE_TYPED(KW_NAME, Type, Knob, Doc, ...) NITRO_DETAIL_RUN_KEYWORD(KW_NAME, Type, __VA_ARGS__)
#define NITRO_DETAIL_DECLARE_GENERIC(KW_NAME, Reads, Doc, ...) NITRO_DETAIL_GENERIC_KEYWORD(KW_NAME, Reads, __VA_ARGS__)
#define NITRO_DETAIL_DECLARE_FACT(KW_NAME, Type, Resolver, Doc, ...) NITRO_DETAIL_CONSTRUCTION_FACT(KW_NAME, Type, __VA_ARGS__)
#define NITRO_DETAIL_DECLARE_DATA(Doc)  // `data` is nitro::kw::data, defined beside the handle
NITRO_DETAIL_RUN_KEYWORDS(NITRO_DETAIL_DECLARE_TYPED, NITRO_DETAIL_DECLARE_GENERIC, NITRO_DETAIL_DECLARE_FACT, NITRO_DETAIL_DECLARE_DATA)
#undef NITRO_DETAIL_DECLARE_TYPED
#undef NITRO_DETAIL_DECLARE_GENERIC
#undef NITRO_DETAIL_DECLARE_FACT
#undef NITRO_DETAIL_DECLARE_DATA
// The plain names of the generic keywords and facts (nitro::weights, ...). Not `data` (the data-set
// namespace) nor `checkpointer` (the checkpointer class): those are nitro::kw:: only.
using kw::logger;
using kw::schedules;
using kw::weights;
using kw::resume;
using kw::run_ref;
using kw::w0;
using kw::restore_optimizer;
using kw::restore_best;
using kw::eval_weights;
using kw::load_ema;
using kw::device;

// `checkpoint = path` is the deprecated spelling of `weights = path`.
namespace kw {
[[deprecated("nitro::kw::checkpoint is the deprecated spelling of nitro::weights: write nitro::weights = \"path\"")]]
inline constexpr keyword<"checkpoint"> checkpoint{};
}  // namespace kw

// weights, or its deprecated spelling checkpoint; given as both is E-KW-005.
template <class... Args>
auto resolve_weights_or_checkpoint(Args const&... args) {
  if constexpr (has_keyword<"checkpoint", Args...>()) {
    if constexpr (has_keyword<"weights", Args...>()) {
      (void)run_keyword_given_twice<typename detail::dependent_type<keyword<"weights">, Args...>::type, keyword<"checkpoint">>::ok;
    }
    auto const& v = get_keyword<"checkpoint">(args...);
    return resolved<std::remove_cvref_t<decltype(v)>>{v, keyword_source::keyword};
  } else {
    return resolve_weights(args...);
  }
}

namespace detail {

#define NITRO_DETAIL_NAME_OF_TYPED(KW_NAME, ...) #KW_NAME,
#define NITRO_DETAIL_NAME_OF_GENERIC(KW_NAME, ...) #KW_NAME,
#define NITRO_DETAIL_NAME_OF_FACT(KW_NAME, ...) #KW_NAME,
#define NITRO_DETAIL_NAME_OF_DATA(Doc) "data",
// Every name a handle accepts: the table's, and `checkpoint`, the deprecated spelling of weights.
inline constexpr std::string_view run_keyword_names[] = {NITRO_DETAIL_RUN_KEYWORDS(
    NITRO_DETAIL_NAME_OF_TYPED, NITRO_DETAIL_NAME_OF_GENERIC, NITRO_DETAIL_NAME_OF_FACT, NITRO_DETAIL_NAME_OF_DATA) "checkpoint"};
#undef NITRO_DETAIL_NAME_OF_TYPED
#undef NITRO_DETAIL_NAME_OF_GENERIC
#undef NITRO_DETAIL_NAME_OF_FACT
#undef NITRO_DETAIL_NAME_OF_DATA

#define NITRO_DETAIL_DOC_OF_TYPED(KW_NAME, Type, Knob, Doc, ...) {#KW_NAME, Doc},
#define NITRO_DETAIL_DOC_OF_GENERIC(KW_NAME, Reads, Doc, ...) {#KW_NAME, Doc},
#define NITRO_DETAIL_DOC_OF_FACT(KW_NAME, Type, Resolver, Doc, ...) {#KW_NAME, Doc},
#define NITRO_DETAIL_DOC_OF_DATA(Doc) {"data", Doc},
inline constexpr std::pair<std::string_view, std::string_view> run_keyword_docs[] = {NITRO_DETAIL_RUN_KEYWORDS(
    NITRO_DETAIL_DOC_OF_TYPED, NITRO_DETAIL_DOC_OF_GENERIC, NITRO_DETAIL_DOC_OF_FACT, NITRO_DETAIL_DOC_OF_DATA)};
#undef NITRO_DETAIL_DOC_OF_TYPED
#undef NITRO_DETAIL_DOC_OF_GENERIC
#undef NITRO_DETAIL_DOC_OF_FACT
#undef NITRO_DETAIL_DOC_OF_DATA

}  // namespace detail

// What a run keyword is, in one line (explain's doc column); "" for a name that is none.
constexpr std::string_view run_keyword_doc(std::string_view name) noexcept {
  for (auto const& [n, d] : detail::run_keyword_docs)
    if (n == name) return d;
  return {};
}

namespace detail {

constexpr bool known_keyword_name(std::string_view n) noexcept {
  for (auto k : run_keyword_names)
    if (k == n) return true;
  return false;
}

template <class Arg, std::size_t Position, class... Args>
constexpr bool check_keyword_arg() {
  if constexpr (!is_keyword_arg<Arg>::value) {
    return not_a_run_keyword<Arg, Position>::ok;
  } else if constexpr (!known_keyword_name(Arg::name.view())) {
    return unknown_run_keyword<keyword<Arg::name, typename Arg::value_type>, Position>::ok;
  } else if constexpr (count_keyword<Arg::name, Args...>() > 1) {
    return run_keyword_given_twice<keyword<Arg::name, typename Arg::value_type>, keyword<Arg::name, typename Arg::value_type>>::ok;
  } else {
    return true;
  }
}

template <class V>
constexpr bool value_is_default() noexcept {
  return std::is_same_v<V, framework_default> || std::is_same_v<V, not_given>;
}

// The data fact's source, mirroring the handle: the keyword, else build_data(), else a field.
template <class E, class... Args>
keyword_record data_record(E const& e, Args const&... args) {
  if constexpr (has_keyword<"data", Args...>()) return {"data", keyword_text(get_keyword<"data">(args...)), keyword_source::keyword, true, {}};
  else if constexpr (requires { e.build_data(); }) return {"data", "build_data()", keyword_source::accessor, true, {}};
  else if constexpr (requires { e.data.splits; }) return {"data", keyword_text(e.data), keyword_source::field, true, {}};
  else return {"data", "none", keyword_source::fallback, true, {}};
}

}  // namespace detail

// Every run keyword and construction fact of one handle, resolved.
template <class E, class... Args>
struct run_keywords {
  static_assert([]<std::size_t... I>(std::index_sequence<I...>) {
    return (detail::check_keyword_arg<std::remove_cvref_t<Args>, I + 2, Args...>() && ...);
  }(std::index_sequence_for<Args...>{}));

#define NITRO_DETAIL_MEMBER_TYPED(KW_NAME, Type, ...) resolved<Type> KW_NAME;
#define NITRO_DETAIL_MEMBER_GENERIC(KW_NAME, ...) decltype(resolve_##KW_NAME(std::declval<E const&>(), std::declval<Args const&>()...)) KW_NAME;
#define NITRO_DETAIL_MEMBER_FACT(KW_NAME, Type, Resolver, ...) decltype(Resolver(std::declval<Args const&>()...)) KW_NAME;
#define NITRO_DETAIL_MEMBER_DATA(Doc) keyword_record data;
  NITRO_DETAIL_RUN_KEYWORDS(NITRO_DETAIL_MEMBER_TYPED, NITRO_DETAIL_MEMBER_GENERIC, NITRO_DETAIL_MEMBER_FACT, NITRO_DETAIL_MEMBER_DATA)
#undef NITRO_DETAIL_MEMBER_TYPED
#undef NITRO_DETAIL_MEMBER_GENERIC
#undef NITRO_DETAIL_MEMBER_FACT
#undef NITRO_DETAIL_MEMBER_DATA
  bool checkpoint_spelling = false;  // weights came as the deprecated `checkpoint`

#define NITRO_DETAIL_INIT_TYPED(KW_NAME, ...) KW_NAME(resolve_##KW_NAME(e, args...)),
#define NITRO_DETAIL_INIT_GENERIC(KW_NAME, ...) KW_NAME(resolve_##KW_NAME(e, args...)),
#define NITRO_DETAIL_INIT_FACT(KW_NAME, Type, Resolver, ...) KW_NAME(Resolver(args...)),
#define NITRO_DETAIL_INIT_DATA(Doc) data(detail::data_record(e, args...)),
  explicit run_keywords(E const& e, Args const&... args)
      : NITRO_DETAIL_RUN_KEYWORDS(NITRO_DETAIL_INIT_TYPED, NITRO_DETAIL_INIT_GENERIC, NITRO_DETAIL_INIT_FACT, NITRO_DETAIL_INIT_DATA)
        checkpoint_spelling(has_keyword<"checkpoint", Args...>()) {}
#undef NITRO_DETAIL_INIT_TYPED
#undef NITRO_DETAIL_INIT_GENERIC
#undef NITRO_DETAIL_INIT_FACT
#undef NITRO_DETAIL_INIT_DATA

  // Values a type cannot rule out: E-KW-007 (and the options' own codes).
  void validate() const {
    auto bad = [](char const* name, std::string const& value, keyword_source src, char const* need) {
      throw error("E-KW-007", std::string("the run keyword ") + name + " is " + value + " (from the " + to_string(src) + ")",
                  std::string("use ") + need);
    };
    // accum and gradient_clip_norm are checked where they are used: the optimizer program (E-OPT-015, E-OPT-014)
    if (n_devs.value < 1) bad("n_devs", std::to_string(n_devs.value), n_devs.source, "1 or more devices");
    if (max_epochs.value < 0) bad("max_epochs", std::to_string(max_epochs.value), max_epochs.source, "0 or more epochs");
    if (max_steps.value < 0) bad("max_steps", std::to_string(max_steps.value), max_steps.source, "0 (max_epochs decides) or a number of steps");
    if (eval_every.value < 0) bad("eval_every", std::to_string(eval_every.value), eval_every.source, "0 (at the end of each epoch only) or a number of steps");
    if (log_every_n_steps.value < 1) bad("log_every_n_steps", std::to_string(log_every_n_steps.value), log_every_n_steps.source, "1 or more steps");
    if (batch_size.value < 1) bad("batch_size", std::to_string(batch_size.value), batch_size.source, "1 or more samples");
    if (run_dir.value.empty()) bad("run_dir", "empty", run_dir.source, "a directory such as \"runs\"");
    if (monitor.value.name().empty()) bad("monitor", "\"" + monitor.value.metric + "\"", monitor.source, "a metric such as \"valid.loss\"");
    ema.value.validate();
    early_stop.value.validate();
  }

  // One record per keyword, in the table's order: the sixteen of the note, batch_size, max_steps,
  // eval_every, diagnostics, then data and the facts.
  std::vector<keyword_record> records() const {
    std::vector<keyword_record> r;
    auto add = [&](char const* name, auto const& res, bool fact = false, std::string note = {}) {
      r.push_back({name, keyword_text(res.value), res.source, fact, std::move(note)});
    };
    const std::string weights_note = checkpoint_spelling ? "given as `checkpoint`, the deprecated spelling of weights" : "";
#define NITRO_DETAIL_RECORD_TYPED(KW_NAME, ...) add(#KW_NAME, KW_NAME);
#define NITRO_DETAIL_RECORD_GENERIC(KW_NAME, ...) add(#KW_NAME, KW_NAME);
#define NITRO_DETAIL_RECORD_FACT(KW_NAME, ...) add(#KW_NAME, KW_NAME, true, std::string_view(#KW_NAME) == "weights" ? weights_note : "");
#define NITRO_DETAIL_RECORD_DATA(Doc) r.push_back(data);
    NITRO_DETAIL_RUN_KEYWORDS(NITRO_DETAIL_RECORD_TYPED, NITRO_DETAIL_RECORD_GENERIC, NITRO_DETAIL_RECORD_FACT, NITRO_DETAIL_RECORD_DATA)
#undef NITRO_DETAIL_RECORD_TYPED
#undef NITRO_DETAIL_RECORD_GENERIC
#undef NITRO_DETAIL_RECORD_FACT
#undef NITRO_DETAIL_RECORD_DATA
    return r;
  }
};
template <class E, class... Args>
run_keywords(E const&, Args const&...) -> run_keywords<E, Args...>;

// The records as an aligned table (show, explain).
inline std::string keyword_table(std::vector<keyword_record> const& records, std::string const& indent = "  ") {
  std::size_t w = 0, v = 0;
  for (auto const& k : records) {
    w = std::max(w, k.name.size());
    v = std::max(v, k.value.size());
  }
  v = std::min<std::size_t>(v, 48);
  std::string s;
  for (auto const& k : records) {
    std::string line = indent + k.name + std::string(w - k.name.size() + 2, ' ') + k.value;
    if (k.value.size() < v) line += std::string(v - k.value.size(), ' ');
    line += "  " + std::string(to_string(k.source));
    if (!k.note.empty()) line += "  (" + k.note + ")";
    s += line + "\n";
  }
  return s;
}

}  // namespace nitro
