// nitro/record/weights_ref.hpp — the grammar that names a record: weights = ..., resume = ..., restore_best = ...
//
//   nitro::weights = "model.safetensors"                          // a file
//   nitro::weights = nitro::latest >> nitro::best                  // the latest run's best checkpoint
//   nitro::weights = nitro::run_id("fashion_mlp-lr=0.002-7f3a") >> nitro::Best(1)
//   nitro::weights = nitro::all >> nitro::best                     // the best checkpoint of every run
//   nitro::weights = other_handle >> nitro::latest                 // another handle's run
//   nitro::weights = nitro::latest >> nitro::Average(nitro::Last(10))   // the mean of the latest 10
//   nitro::resume  = nitro::latest >> nitro::latest                // continue where the latest run stopped
//   nitro::restore_best = nitro::Average(nitro::Last(10))          // a bare checkpoint: this run's own
//
// A reference is a path, or run >> checkpoint (the note's `run => checkpoint`):
//   run        = nitro::latest (the run whose checkpoints were written most recently) |
//                nitro::run_id("slug or part of it, or a directory") | nitro::all (every run) |
//                any object with run_directory() (another nitro::Nitro handle)
//   checkpoint = nitro::best (= Best(1)) | nitro::latest (= Last(1)) | nitro::Best(n) | nitro::Last(n)
//                Best(n) is the n-th best by the run's monitor, Last(n) the n-th most recent;
//                weights (not resume) also takes nitro::Average(Best(n)) and Average(Last(n)): the
//                mean of the n best / n most recent.
// A bare checkpoint (no run) means the latest run for weights and resume, and the handle's own run
// for restore_best and eval_weights. resume takes one checkpoint: resume = ... >> Average(...) is
// a compile error (E-CKPT-101); a value that is not a reference is one too (E-CKPT-102).
//
// What a reference names on disk is record/weights_resolve.hpp's resolve(ref, context).
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/core/error.hpp"
#include "nitro/core/meta.hpp"

#include <algorithm>    // sort
#include <concepts>     // same_as
#include <cstdint>      // int64_t
#include <cstdio>       // the deprecation warning
#include <filesystem>   // runs directory
#include <functional>   // warning sink
#include <optional>     // restore_best, eval_weights
#include <string>       // ids
#include <string_view>  // warnings
#include <type_traits>  // conversions
#include <utility>      // move
#include <vector>       // resolved files

namespace nitro {

// ---- checkpoints ---------------------------------------------------------------------------------
namespace detail {
NITRO_RUNTIME_INLINE std::int64_t checked_count(std::int64_t n, char const* what);
}  // namespace detail

struct Best {
  std::int64_t n = 1;
  explicit Best(std::int64_t count = 1) : n(detail::checked_count(count, "Best")) {}
};
struct Last {
  std::int64_t n = 1;
  explicit Last(std::int64_t count = 1) : n(detail::checked_count(count, "Last")) {}
};
struct best_t { explicit constexpr best_t() = default; };
struct latest_t { explicit constexpr latest_t() = default; };
struct all_t { explicit constexpr all_t() = default; };
inline constexpr best_t best{};      // the best checkpoint by the run's monitor: Best(1)
inline constexpr latest_t latest{};  // as a run: the latest run; as a checkpoint: Last(1)
inline constexpr all_t all{};        // as a run: every run of the runs directory

// The mean of several checkpoints' weights (for weights, restore_best and eval_weights; not resume).
struct Average {
  bool best;  // Best(n) when true, else Last(n)
  std::int64_t n;
  explicit Average(Best b) : best(true), n(b.n) {}
  explicit Average(Last l) : best(false), n(l.n) {}
};

// A run named by its directory's name under the runs directory (or a unique part of it), or by a
// path containing '/'.
struct run_id {
  std::string id;
  explicit run_id(std::string s) : id(std::move(s)) {
    if (id.empty()) throw error("E-CKPT-021", "run_id(\"\") names no run", "pass the run's slug (its directory name under the runs directory) or its path");
  }
};

// What a checkpoint part says, at run time.
struct checkpoint_pick {
  bool best = false;     // rank by the monitor; else by write order
  std::int64_t n = 1;    // the n-th, or the first n when averaging
  bool average = false;
  std::string to_string() const {
    std::string s = std::string(best ? "Best(" : "Last(") + std::to_string(n) + ")";
    return average ? "Average(" + s + ")" : s;
  }
};
NITRO_RUNTIME_INLINE checkpoint_pick to_pick(Best b);
NITRO_RUNTIME_INLINE checkpoint_pick to_pick(Last l);
NITRO_RUNTIME_INLINE checkpoint_pick to_pick(best_t);
NITRO_RUNTIME_INLINE checkpoint_pick to_pick(latest_t);
NITRO_RUNTIME_INLINE checkpoint_pick to_pick(Average a);

template <class P>
concept checkpoint_part = std::same_as<P, Best> || std::same_as<P, Last> || std::same_as<P, best_t> || std::same_as<P, latest_t> || std::same_as<P, Average>;

// ---- runs ----------------------------------------------------------------------------------------
struct run_pick {
  enum class kind { unspecified, latest, id, all, directory };
  kind k = kind::unspecified;
  std::string id;                   // kind::id
  std::filesystem::path directory;  // kind::directory
  std::string to_string() const {
    switch (k) {
      case kind::unspecified: return "";
      case kind::latest: return "latest";
      case kind::id: return "run_id(\"" + id + "\")";
      case kind::all: return "all";
      case kind::directory: return "run(" + directory.string() + ")";
    }
    return "";
  }
};

// The hook for "another handle": anything that says where its run lives.
template <class H>
concept has_run_directory = requires(H const& h) { std::filesystem::path(h.run_directory()); };

template <class R>
concept run_part = std::same_as<R, latest_t> || std::same_as<R, all_t> || std::same_as<R, run_id> || has_run_directory<R>;

template <run_part R>
run_pick to_run(R const& r) {
  if constexpr (std::same_as<R, latest_t>) return {run_pick::kind::latest, {}, {}};
  else if constexpr (std::same_as<R, all_t>) return {run_pick::kind::all, {}, {}};
  else if constexpr (std::same_as<R, run_id>) return {run_pick::kind::id, r.id, {}};
  else return {run_pick::kind::directory, {}, std::filesystem::path(r.run_directory())};
}

// run >> checkpoint (the note's `run => checkpoint`). The checkpoint part keeps its type, so resume
// can refuse an average at compile time.
template <class P>
struct run_checkpoint {
  run_pick run;
  P pick;
};
template <run_part R, checkpoint_part P>
run_checkpoint<P> operator>>(R const& r, P const& p) {
  return {to_run(r), p};
}

// ---- compile-time mistakes -----------------------------------------------------------------------
template <class Value>
struct resume_takes_one_checkpoint {
  static_assert(always_false<Value>,
                "E-CKPT-101: nitro::resume continues from one checkpoint, but Average(...) names several. Fix: "
                "resume = run >> nitro::latest (or Best(n) / Last(n)); to start from an average, use nitro::weights = run >> Average(...).");
  static constexpr bool ok = false;
};
template <class Value>
struct not_a_weights_reference {
  static_assert(always_false<Value>,
                "E-CKPT-102: this value does not name weights. Fix: a path (\"model.safetensors\"), run >> checkpoint "
                "(nitro::latest >> nitro::best, nitro::run_id(\"...\") >> nitro::Last(1)), or a bare checkpoint (nitro::Average(nitro::Last(10))).");
  static constexpr bool ok = false;
};

// ---- the references --------------------------------------------------------------------------------
class weights_ref {
 public:
  enum class kind { path, checkpoint };

  weights_ref(char const* path) : weights_ref(std::filesystem::path(path)) {}          // NOLINT: implicit on purpose
  weights_ref(std::string const& path) : weights_ref(std::filesystem::path(path)) {}   // NOLINT
  weights_ref(std::filesystem::path path) : m_kind(kind::path), m_path(std::move(path)) {  // NOLINT
    if (m_path.empty()) throw error("E-CKPT-001", "weights = \"\" names no file", "pass the path of a .safetensors file");
  }
  template <checkpoint_part P>
  weights_ref(run_checkpoint<P> const& rc) : m_kind(kind::checkpoint), m_run(rc.run), m_pick(to_pick(rc.pick)) {}  // NOLINT
  template <checkpoint_part P>
  weights_ref(P const& p) : m_kind(kind::checkpoint), m_pick(to_pick(p)) {}  // NOLINT: a bare checkpoint

  // `checkpoint = ...`: the deprecated spelling of `weights = ...`, a path or a run reference alike
  // (`checkpoint = latest >> best`). Warns once per call; the reference is kept as it was written.
  static weights_ref deprecated_checkpoint(weights_ref r, std::function<void(std::string_view)> const& warn = {}) {
    r.m_deprecated = true;
    const std::string as_written = r.to_string();
    const std::string text = "W-CKPT-001: `checkpoint = " + as_written + "` is the deprecated spelling of `weights = " + as_written +
                             "`; it still works. Fix: write nitro::weights = " + as_written + ".";
    if (warn) warn(text);
    else std::fprintf(stderr, "%s\n", text.c_str());
    return r;
  }

  // The grammar as text, for command lines and config files: a path, or [run >>] checkpoint with
  // run = latest | all | a run's slug (or part of it) or folder, and checkpoint = best | latest |
  // Best(n) | Last(n) | Average(Best(n)) | Average(Last(n)). "latest >> Average(Last(10))",
  // "best", "fashion_mlp-small-7f3a >> Best(2)". A malformed checkpoint part is E-CKPT-033.
  static weights_ref from_text(std::string_view text);

  // A bare checkpoint (no run) made to name one in the run at `dir`; anything else unchanged.
  weights_ref in_run_directory(std::filesystem::path dir) const {
    weights_ref r = *this;
    if (r.m_kind == kind::checkpoint && r.m_run.k == run_pick::kind::unspecified) r.m_run = {run_pick::kind::directory, {}, std::move(dir)};
    return r;
  }

  kind which() const noexcept { return m_kind; }
  std::filesystem::path const& path() const noexcept { return m_path; }
  run_pick const& run() const noexcept { return m_run; }
  checkpoint_pick const& pick() const noexcept { return m_pick; }
  bool deprecated_spelling() const noexcept { return m_deprecated; }
  bool averages() const noexcept { return m_kind == kind::checkpoint && m_pick.average; }

  // As the user wrote it, for manifests, show and errors: "latest >> Best(1)".
  std::string to_string() const {
    if (m_kind == kind::path) return "\"" + m_path.string() + "\"";
    const std::string r = m_run.to_string();
    return r.empty() ? m_pick.to_string() : r + " >> " + m_pick.to_string();
  }

 private:
  weights_ref(run_pick run, checkpoint_pick pick) : m_kind(kind::checkpoint), m_run(std::move(run)), m_pick(pick) {}

  kind m_kind;
  std::filesystem::path m_path;
  run_pick m_run;
  checkpoint_pick m_pick;
  bool m_deprecated = false;
};

// A reference that names exactly one checkpoint (resume): the same forms without Average.
class resume_ref {
 public:
  resume_ref(char const* path) : m_ref(path) {}                            // NOLINT
  resume_ref(std::string const& path) : m_ref(path) {}                     // NOLINT
  resume_ref(std::filesystem::path path) : m_ref(std::move(path)) {}       // NOLINT
  template <checkpoint_part P>
  resume_ref(run_checkpoint<P> const& rc) : m_ref(rc) {  // NOLINT
    if constexpr (std::same_as<P, Average>) (void)resume_takes_one_checkpoint<run_checkpoint<P>>::ok;
  }
  template <checkpoint_part P>
  resume_ref(P const& p) : m_ref(p) {  // NOLINT
    if constexpr (std::same_as<P, Average>) (void)resume_takes_one_checkpoint<P>::ok;
  }
  // The same text as weights_ref::from_text, without Average (E-CKPT-034: resume needs one checkpoint).
  static resume_ref from_text(std::string_view text) { return of(weights_ref::from_text(text)); }
  static resume_ref of(weights_ref r) {
    if (r.averages())
      throw error("E-CKPT-034", "resume = " + r.to_string() + " names an average of several checkpoints; a run continues from one",
                  "resume from one checkpoint (latest, best, Last(n), Best(n)); start from an average with weights = ... instead");
    return resume_ref(std::move(r));
  }
  weights_ref const& ref() const noexcept { return m_ref; }
  std::string to_string() const { return m_ref.to_string(); }

 private:
  explicit resume_ref(weights_ref r) : m_ref(std::move(r)) {}
  weights_ref m_ref;
};

namespace detail {
NITRO_RUNTIME_INLINE std::string_view trim_ws(std::string_view s);
// "Best(3)" -> 3 (for fn = "Best"); nullopt when s is not fn(...). A non-number count is E-CKPT-033.
NITRO_RUNTIME_INLINE std::optional<std::int64_t> count_of(std::string_view s, std::string_view fn, std::string_view whole);
NITRO_RUNTIME_INLINE std::optional<checkpoint_pick> checkpoint_part_of(std::string_view s, std::string_view whole);
}  // namespace detail

// What the handle calls on a keyword's value: a reference, or a compile error naming the value.
template <class V>
weights_ref to_weights_ref(V const& v) {
  if constexpr (std::is_convertible_v<V const&, weights_ref>) return weights_ref(v);
  else {
    (void)not_a_weights_reference<V>::ok;
    return weights_ref("");
  }
}
template <class V>
resume_ref to_resume_ref(V const& v) {
  if constexpr (std::is_same_v<V, Average> || std::is_same_v<V, run_checkpoint<Average>>) {
    (void)resume_takes_one_checkpoint<V>::ok;
    return resume_ref("");
  } else if constexpr (std::is_convertible_v<V const&, resume_ref>) return resume_ref(v);
  else {
    (void)not_a_weights_reference<V>::ok;
    return resume_ref("");
  }
}

// ---- restore_best, eval_weights, w0 ------------------------------------------------------------------
namespace detail {
// A keyword object (nitro::weights, nitro::ema, ...) given as a value: `w0 = nitro::weights`.
template <class V>
constexpr bool is_keyword_object_named(std::string_view name) {
  if constexpr (requires { V::name.view(); }) return V::name.view() == name;
  else return false;
}
}  // namespace detail

// w0 = nitro::weights: the decay anchor is the weights loaded by `weights`, not build_model's init.
template <class V>
inline constexpr bool is_weights_keyword_v = detail::is_keyword_object_named<V>("weights");

template <class W0Value, class WeightsGiven>
struct w0_names_weights_not_given {
  static_assert(always_false<W0Value, WeightsGiven>,
                "E-CKPT-103: w0 = nitro::weights anchors decay at the weights the handle loads, but no weights keyword is given. "
                "Fix: add nitro::weights = \"path\" (or run >> checkpoint), or drop w0 to anchor at build_model's init.");
  static constexpr bool ok = false;
};
// The handle's check: `w0 = nitro::weights` needs `weights` (or its deprecated spelling).
template <class W0Value, bool WeightsGiven>
constexpr bool check_w0_weights() {
  if constexpr (is_weights_keyword_v<W0Value> && !WeightsGiven) return w0_names_weights_not_given<W0Value, std::bool_constant<WeightsGiven>>::ok;
  else return true;
}

// restore_best = true (this run's best checkpoint), false (nothing), or a reference (a bare one
// names this run: Average(Last(10))). nullopt: nothing to restore.
template <class V>
std::optional<weights_ref> to_restore_ref(V const& v) {
  if constexpr (std::is_same_v<V, bool>) {
    if (!v) return std::nullopt;
    return weights_ref(best);
  } else return to_weights_ref(v);
}

// eval_weights = nitro::ema (the run's EMA of the weights), or a reference (nitro::best, an
// Average(Last(n)), a file, another run's checkpoint; a bare checkpoint names this run).
struct eval_weights_ref {
  bool ema = false;
  std::optional<weights_ref> ref;
  std::string to_string() const { return ema ? "ema" : ref ? ref->to_string() : "the live weights"; }
};
template <class V>
eval_weights_ref to_eval_weights_ref(V const& v) {
  if constexpr (detail::is_keyword_object_named<V>("ema")) return {true, std::nullopt};
  else return {false, to_weights_ref(v)};
}

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::detail {

NITRO_RUNTIME_INLINE std::int64_t checked_count(std::int64_t n, char const* what) {
  if (n < 1)
    throw error("E-CKPT-025", std::string(what) + "(" + std::to_string(n) + ") names no checkpoint", std::string("use ") + what + "(n) with n >= 1");
  return n;
}

}  // namespace nitro::detail

namespace nitro {

NITRO_RUNTIME_INLINE checkpoint_pick to_pick(Best b) { return {true, b.n, false}; }

NITRO_RUNTIME_INLINE checkpoint_pick to_pick(Last l) { return {false, l.n, false}; }

NITRO_RUNTIME_INLINE checkpoint_pick to_pick(best_t) { return {true, 1, false}; }

NITRO_RUNTIME_INLINE checkpoint_pick to_pick(latest_t) { return {false, 1, false}; }

NITRO_RUNTIME_INLINE checkpoint_pick to_pick(Average a) { return {a.best, a.n, true}; }

}  // namespace nitro

namespace nitro::detail {

NITRO_RUNTIME_INLINE std::string_view trim_ws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

NITRO_RUNTIME_INLINE std::optional<std::int64_t> count_of(std::string_view s, std::string_view fn, std::string_view whole) {
  if (!(s.size() > fn.size() + 1 && s.substr(0, fn.size()) == fn && s[fn.size()] == '(' && s.back() == ')')) return std::nullopt;
  const std::string_view digits = trim_ws(s.substr(fn.size() + 1, s.size() - fn.size() - 2));
  std::int64_t n = 0;
  if (digits.empty() || digits.size() > 12 || digits.find_first_not_of("0123456789") != std::string_view::npos)
    throw error("E-CKPT-033", "\"" + std::string(whole) + "\": " + std::string(fn) + "(...) takes a count, got \"" + std::string(digits) + "\"",
                "write " + std::string(fn) + "(n) with n a whole number >= 1, e.g. " + std::string(fn) + "(3)");
  for (char c : digits) n = n * 10 + (c - '0');
  return checked_count(n, fn == "Best" ? "Best" : "Last");
}

NITRO_RUNTIME_INLINE std::optional<checkpoint_pick> checkpoint_part_of(std::string_view s, std::string_view whole) {
  s = trim_ws(s);
  if (s == "best") return checkpoint_pick{true, 1, false};
  if (s == "latest") return checkpoint_pick{false, 1, false};
  if (auto n = count_of(s, "Best", whole)) return checkpoint_pick{true, *n, false};
  if (auto n = count_of(s, "Last", whole)) return checkpoint_pick{false, *n, false};
  constexpr std::string_view avg = "Average(";
  if (s.size() > avg.size() && s.substr(0, avg.size()) == avg && s.back() == ')') {
    const std::string_view inner = trim_ws(s.substr(avg.size(), s.size() - avg.size() - 1));
    if (auto n = count_of(inner, "Best", whole)) return checkpoint_pick{true, *n, true};
    if (auto n = count_of(inner, "Last", whole)) return checkpoint_pick{false, *n, true};
    throw error("E-CKPT-033", "\"" + std::string(whole) + "\": Average(...) takes Best(n) or Last(n)",
                "write Average(Last(n)) for the mean of the n latest checkpoints, Average(Best(n)) for the n best");
  }
  return std::nullopt;
}

}  // namespace nitro::detail

namespace nitro {

NITRO_RUNTIME_INLINE weights_ref weights_ref::from_text(std::string_view text) {
  const std::string_view t = detail::trim_ws(text);
  const auto bad = [&](std::string const& what) {
    return error("E-CKPT-033", "\"" + std::string(text) + "\" " + what,
                 "write a path, or [run >>] checkpoint: run = latest | all | a run's slug; checkpoint = best | latest | Best(n) | "
                 "Last(n) | Average(Best(n)) | Average(Last(n))");
  };
  if (t.empty()) throw bad("names no weights");
  if (const auto arrow = t.find(">>"); arrow != std::string_view::npos) {
    const std::string_view run_text = detail::trim_ws(t.substr(0, arrow));
    auto pick = detail::checkpoint_part_of(t.substr(arrow + 2), text);
    if (!pick) throw bad("has no checkpoint after >>");
    if (run_text.empty()) throw bad("has no run before >>");
    run_pick run;
    if (run_text == "latest") run.k = run_pick::kind::latest;
    else if (run_text == "all") run.k = run_pick::kind::all;
    else {
      run.k = run_pick::kind::id;
      run.id = std::string(run_text);
    }
    return weights_ref(std::move(run), *pick);
  }
  if (auto pick = detail::checkpoint_part_of(t, text)) return weights_ref(run_pick{}, *pick);
  return weights_ref(std::filesystem::path(std::string(t)));
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
