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
// restore_optimizer, restore_best, eval_weights, load_ema, device (the backend) and replicas (the
// data-parallel job) — and checkpoint, the deprecated spelling of weights. They are spelled nitro::kw::<name> (also nitro::<name>, except data and
// checkpointer, whose plain names are the data-set namespace and the checkpointer class).
//
// Each keyword is one row of the table NITRO_DETAIL_RUN_KEYWORDS (train/keyword_table.hpp) (name, type, knob or not, doc,
// default), which generates the keyword objects, their resolvers, run_keywords' members and records,
// the names E-KW-003 accepts and run_keyword_doc(name): nothing else lists them.
//
// `nitro::run_keywords kw(e, args...)` resolves them all at once and checks the arguments: an
// unknown keyword, a keyword given twice, or a field/accessor of the right name but the wrong type
// is a compile error naming it (E-KW-001..006); `kw.validate()` checks values (E-KW-007, E-EMA-001,
// E-STOP-001); `kw.records()` is one (name, value as text, source) record per keyword, for the
// manifest, `explain` and `show`.
#pragma once

#include "nitro/train/keyword.hpp"
#include "nitro/train/keyword_table.hpp"

#include <optional>     // keywords given or not at run time
#include <string>       // texts
#include <string_view>  // names
#include <utility>      // index_sequence
#include <vector>       // records

namespace nitro {

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

// `checkpoint = ...` is the deprecated spelling of `weights = ...`: a path or a run reference.
namespace kw {
[[deprecated("nitro::kw::checkpoint is the deprecated spelling of nitro::weights: write nitro::weights = the same value")]]
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
  }(std::index_sequence_for<Args...>{}),
                "E-KW-001: an argument of the run keywords is wrong (the error above names it and its position). Fix: as it says.");

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

