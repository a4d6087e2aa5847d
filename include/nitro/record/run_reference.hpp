// nitro/record/run_reference.hpp — where a handle keeps its run's record: the run_ref construction fact.
//
//   nitro::Nitro h(e, nitro::run_ref = "baseline");                 // <run_dir>/baseline
//   nitro::Nitro h(e, nitro::run_ref = "/scratch/runs/baseline");   // a path (it has a '/')
//   nitro::Nitro h(e, nitro::run_ref = nitro::run_reference{.dir = d, .metadata_json = sel});  // the command line's
//
// A handle with a run directory writes its record there: the default loggers' metrics.jsonl,
// metrics.csv and TensorBoard events, binding_report.txt, and checkpoints/ when it has a
// checkpointer. Without run_ref, a handle with a checkpointer makes <run_dir>/<experiment>-<time>-<id>;
// a handle with neither keeps no record (the console is its only logger). metadata_json is a JSON
// object (the selection, seed, ...) that becomes the first line of metrics.jsonl and each
// checkpoint's "selection". An empty std::optional is "not given".
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/core/error.hpp"
#include "nitro/core/meta.hpp"

#include <chrono>       // the directory's time stamp
#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <ctime>        // localtime_r
#include <filesystem>   // paths
#include <optional>     // not given
#include <random>       // random_device: the directory's id
#include <string>       // names
#include <string_view>  // names
#include <type_traits>  // the keyword's value types

namespace nitro {

struct run_reference {
  std::filesystem::path dir;          // the run directory
  std::string metadata_json = "{}";   // a JSON object for the record's metadata
  std::string describe() const { return dir.string(); }
};

namespace detail {

// "FashionMLP<256>" -> "FashionMLP-256": a directory name from a program key.
inline std::string run_stem(std::string_view key) {
  std::string s;
  for (char c : key) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (keep) s += c;
    else if (!s.empty() && s.back() != '-') s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  if (s.size() > 48) s.resize(48);
  return s.empty() ? std::string("run") : s;
}

// <run_dir>/<stem>-<yyyymmdd-hhmmss>-<4 hex>, made here (never an existing one).
NITRO_RUNTIME_INLINE std::filesystem::path make_run_directory(std::filesystem::path const& run_dir, std::string const& stem);

template <class V> struct is_std_optional : std::false_type {};
template <class V> struct is_std_optional<std::optional<V>> : std::true_type {};

}  // namespace detail

template <class V>
struct run_ref_value_is_not_a_run {
  static_assert(always_false<V>,
                "E-REC-005: run_ref names the run's record: a name under run_dir (\"baseline\"), a path, or a "
                "nitro::run_reference{.dir = ..., .metadata_json = ...}. Fix: pass one of those.");
  static constexpr bool ok = false;
};

// The run_ref keyword's value as a reference: a name (under run_dir), a path, a run_reference, or
// an optional of these (empty: none). A value of any other type is E-REC-005 at compile time.
template <class V>
std::optional<run_reference> to_run_reference(V const& v, std::filesystem::path const& run_dir) {
  if constexpr (detail::is_std_optional<V>::value) {
    if (!v) return std::nullopt;
    return to_run_reference(*v, run_dir);
  } else if constexpr (std::is_same_v<V, run_reference>) {
    if (v.dir.empty()) throw error("E-REC-005", "run_ref = run_reference{} names no directory", "set .dir");
    return v;
  } else if constexpr (std::is_convertible_v<V const&, std::string_view> || std::is_same_v<V, std::filesystem::path>) {
    const std::filesystem::path p(v);
    if (p.empty()) throw error("E-REC-005", "run_ref = \"\" names no run", "pass a run name (a directory under run_dir) or a path");
    const bool is_path = p.is_absolute() || p.native().find('/') != std::string::npos;
    return run_reference{is_path ? p : run_dir / p, "{}"};
  } else {
    (void)run_ref_value_is_not_a_run<V>::ok;
    return std::nullopt;
  }
}

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE std::filesystem::path detail::make_run_directory(std::filesystem::path const& run_dir, std::string const& stem) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec)
    throw error("E-REC-004", "cannot create the runs directory '" + run_dir.string() + "' (" + ec.message() + ")",
                "pass a writable run_dir");
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y%m%d-%H%M%S", &tm);
  std::random_device rd;
  for (int attempt = 0; attempt < 64; ++attempt) {
    char id[8];
    std::snprintf(id, sizeof id, "%04x", static_cast<unsigned>(rd() & 0xffff));
    const auto dir = run_dir / (stem + "-" + when + "-" + id);
    if (std::filesystem::create_directory(dir, ec)) return dir;
    if (ec)
      throw error("E-REC-004", "cannot create the run directory '" + dir.string() + "' (" + ec.message() + ")", "pass a writable run_dir");
  }
  throw error("E-REC-004", "no free run directory name under '" + run_dir.string() + "'", "pass nitro::run_ref = \"a-name\"");
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
