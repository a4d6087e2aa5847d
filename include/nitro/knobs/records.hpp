// nitro/knobs/records.hpp — a run's record: <run_dir>/<slug>/ with manifest.json, status.json,
// metrics.jsonl (first line: metadata with the selection), binding_report.txt, checkpoints/.
//
//   auto rec = nitro::run_record::create("runs", slug);        // the folder, made exclusively
//   rec.write_manifest(nitro::manifest_json(cat, sel, info));   // once, at the start
//   rec.append_metrics(nitro::metrics_metadata_json(cat, sel, info));   // the metadata line, first
//   rec.write_status(st.json());                                // atomically, whenever it changes
//
// The selection lands in all four places (manifest, metadata line, status, slug). The JSON objects
// are built here so that every writer (the CLI's run driver today, the trainer's JSONL logger
// tomorrow) writes the same thing. `find_run` resolves what a user types (a path, a slug, a unique
// prefix, `latest`) to a run folder; `latest_run_with` finds the newest run of a selection.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/core/error.hpp"
#include "nitro/record/loggers/jsonl.hpp"
#include "nitro/record/record_file.hpp"
#include "nitro/knobs/catalog.hpp"
#include "nitro/knobs/detail/did_you_mean.hpp"
#include "nitro/knobs/selection.hpp"
#include "nitro/knobs/slug.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>    // sort
#include <cerrno>       // errno
#include <chrono>       // times
#include <cstdio>       // snprintf
#include <cstdint>      // int64_t
#include <ctime>        // gmtime_r
#include <filesystem>   // folders
#include <map>          // metrics
#include <optional>     // best
#include <string>       // paths
#include <vector>       // listings

#include <sys/stat.h>   // mkdir
#include <unistd.h>     // gethostname, getpid

namespace nitro {

using ordered_json = nlohmann::ordered_json;

// "2025-01-07T14:15:02.123Z": UTC with milliseconds, sortable as text.
NITRO_RUNTIME_INLINE std::string iso_time_now();

NITRO_RUNTIME_INLINE std::string host_name();

// What a run is, beyond its selection: filled by whoever starts it.
struct run_identity {
  std::string slug;
  std::string id;
  std::string program;           // "FashionMLP<width=128>"
  std::string started;           // iso_time_now() at the start
  std::string command;           // the command line, for the record
  ordered_json run_keywords = ordered_json::object();  // name -> {value, source}
  ordered_json data = ordered_json::object();          // name, fingerprint, splits
  ordered_json backend;                                // device, name: the handle's backend (null until it is built)
};

// Every knob with its value and source (and doc): the manifest's and explain's view.
NITRO_RUNTIME_INLINE ordered_json knobs_json(catalog const& c, selection const& s, bool with_doc = true);

// The overrides (--steps, --eval-every, --diagnostics) with source `override`.
NITRO_RUNTIME_INLINE ordered_json overrides_json(selection_request const& r);

// The selection as every record carries it: what was asked, and what every knob became.
NITRO_RUNTIME_INLINE ordered_json selection_json(catalog const& c, selection const& s);

inline ordered_json build_json() {
  ordered_json b;
#if defined(__clang__)
  b["compiler"] = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  b["compiler"] = std::string("g++ ") + __VERSION__;
#else
  b["compiler"] = "unknown";
#endif
  b["cxx"] = static_cast<long>(__cplusplus);
#ifdef NDEBUG
  b["ndebug"] = true;
#else
  b["ndebug"] = false;
#endif
#if defined(__OPTIMIZE__)
  b["optimized"] = true;
#else
  b["optimized"] = false;
#endif
#if defined(__AVX512F__)
  b["simd"] = "avx512";
#elif defined(__AVX2__)
  b["simd"] = "avx2";
#elif defined(__SSE2__)
  b["simd"] = "sse2";
#else
  b["simd"] = "none";
#endif
#if defined(__SANITIZE_ADDRESS__)
  b["sanitize"] = "address";
#endif
  return b;
}

NITRO_RUNTIME_INLINE ordered_json versions_json();

inline ordered_json manifest_json(catalog const& c, selection const& s, run_identity const& id) {
  ordered_json m;
  m["format"] = "nitro.manifest/1";
  m["slug"] = id.slug;
  m["id"] = id.id;
  m["experiment"] = c.experiment;
  m["program"] = {{"name", c.programs[s.program]}, {"index", s.program}, {"compiled", c.programs}};
  m["selection"] = s.request.json();
  m["knobs"] = knobs_json(c, s);
  m["overrides"] = overrides_json(s.request);
  m["run_keywords"] = id.run_keywords;
  m["seed"] = s.seed(c);
  m["versions"] = versions_json();
  m["build"] = build_json();
  m["data"] = id.data;
  if (!id.backend.is_null()) m["backend"] = id.backend;
  m["times"] = {{"started", id.started}};
  m["command"] = id.command;
  m["host"] = host_name();
  m["pid"] = static_cast<long>(::getpid());
  return m;
}

// The first line of metrics.jsonl (hand it to any JSONL logger as its header).
NITRO_RUNTIME_INLINE ordered_json metrics_metadata_json(catalog const& c, selection const& s, run_identity const& id);

// status.json (status_record): rewritten atomically whenever it changes; `heartbeat` tells a watcher it is alive.
struct status_record {
  std::string state = "running";  // running, finished, failed, diverged, stopped
  std::string slug;
  ordered_json selection;
  std::int64_t step = 0;
  int epoch = 0;
  std::int64_t horizon_steps = 0;
  int horizon_epochs = 0;
  std::map<std::string, double> last;  // "valid/acc" -> 0.81, "train/loss" -> 0.52
  std::optional<double> best_value;
  std::string best_metric;              // "valid/loss"
  bool best_minimize = true;
  std::int64_t best_step = 0;
  std::string started, finished, error;
  std::string reason;  // why a run stopped or diverged (early stop, a stop asked, the loss)

  ordered_json json() const;
};

// A run's folder and its files.
class run_record {
 public:
  // Makes <run_dir>/<slug>/ (and run_dir when missing); E-REC-001 when the slug is taken.
  static run_record create(std::string const& run_dir, std::string const& slug);
  explicit run_record(std::string dir) : m_dir(std::move(dir)) {}

  std::string const& dir() const noexcept { return m_dir; }
  std::string path(std::string const& name) const { return (std::filesystem::path(m_dir) / name).string(); }

  void write_manifest(ordered_json const& m) const { write_record_atomic(path("manifest.json"), m.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"); }
  void write_status(ordered_json const& s) const { write_record_atomic(path("status.json"), s.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"); }
  void write_text(std::string const& name, std::string const& text) const { write_record_atomic(path(name), text); }
  void append_metrics(ordered_json const& line, bool sync = false) const { append_record_line(path("metrics.jsonl"), line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), sync); }

 private:
  std::string m_dir;
};

// ---- reading records back ----------------------------------------------------------------------
NITRO_RUNTIME_INLINE ordered_json read_json(std::string const& path);
// A record's text field, or `fallback` when the record is not an object or the field is not text: a
// record edited by hand must not end a command with the JSON library's exception.
inline std::string text_field(ordered_json const& j, char const* key, std::string const& fallback) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

// Every line of a metrics.jsonl that parses (a torn last line of a crashed run is skipped).
NITRO_RUNTIME_INLINE std::vector<ordered_json> read_jsonl(std::string const& path);

struct run_entry {
  std::string dir;
  std::string slug;
  std::string started;
  ordered_json manifest;
};

// Runs under run_dir (folders with a readable manifest), oldest first.
NITRO_RUNTIME_INLINE std::vector<run_entry> list_runs(std::string const& run_dir);

// A run folder from what a user typed: a path to a run folder, a slug under run_dir, a unique
// prefix of one, or `latest`. E-CLI-004 when nothing (or more than one) matches.
NITRO_RUNTIME_INLINE std::string find_run(std::string const& run_dir, std::string const& ref);

// The newest run of this experiment whose recorded variant and --set values equal `r`'s.
NITRO_RUNTIME_INLINE std::string latest_run_with(std::string const& run_dir, std::string const& experiment, selection_request const& r);

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE std::string iso_time_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms));
  return out;
}

NITRO_RUNTIME_INLINE std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

NITRO_RUNTIME_INLINE ordered_json overrides_json(selection_request const& r) {
  ordered_json j = ordered_json::object();
  if (r.steps) j["steps"] = {{"value", *r.steps}, {"source", "override"}};
  if (r.eval_every) j["eval_every"] = {{"value", *r.eval_every}, {"source", "override"}};
  if (r.diagnostics) j["diagnostics"] = {{"value", true}, {"source", "override"}};
  if (r.device) j["device"] = {{"value", *r.device}, {"source", "override"}};
  return j;
}

NITRO_RUNTIME_INLINE ordered_json selection_json(catalog const& c, selection const& s) {
  ordered_json j = s.request.json();
  j["knobs"] = knobs_json(c, s, false);
  j["program"] = c.programs[s.program];
  return j;
}

NITRO_RUNTIME_INLINE ordered_json versions_json() {
  ordered_json v;
  v["nitro"] = "0.1.0";
  v["nlohmann_json"] = std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." + std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                       std::to_string(NLOHMANN_JSON_VERSION_PATCH);
  return v;
}

NITRO_RUNTIME_INLINE ordered_json metrics_metadata_json(catalog const& c, selection const& s, run_identity const& id) {
  ordered_json m;
  m["type"] = "metadata";
  m["format"] = metrics_jsonl_format;  // what the JSONL logger writes
  m["slug"] = id.slug;
  m["experiment"] = c.experiment;
  m["program"] = c.programs[s.program];
  m["selection"] = selection_json(c, s);
  m["seed"] = s.seed(c);
  m["started"] = id.started;
  return m;
}

NITRO_RUNTIME_INLINE ordered_json read_json(std::string const& path) {
  std::string text = read_record_file(path);
  ordered_json j = ordered_json::parse(text, nullptr, false);
  if (j.is_discarded())
    throw error("E-REC-002", "the record " + path + " is not valid JSON (damaged or cut short)",
                "the run's other files are still readable; rerun the run to get a complete record");
  return j;
}

NITRO_RUNTIME_INLINE std::vector<ordered_json> read_jsonl(std::string const& path) {
  std::vector<ordered_json> lines;
  std::string text = read_record_file(path);
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) break;  // no newline: a line still being written
    ordered_json j = ordered_json::parse(text.substr(at, nl - at), nullptr, false);
    if (!j.is_discarded()) lines.push_back(std::move(j));
    at = nl + 1;
  }
  return lines;
}

NITRO_RUNTIME_INLINE std::vector<run_entry> list_runs(std::string const& run_dir) {
  std::vector<run_entry> runs;
  std::error_code ec;
  if (!std::filesystem::is_directory(run_dir, ec)) return runs;
  for (auto const& d : std::filesystem::directory_iterator(run_dir, ec)) {
    if (!d.is_directory()) continue;
    auto mpath = d.path() / "manifest.json";
    if (!std::filesystem::exists(mpath)) continue;
    ordered_json m = ordered_json::parse(read_record_file(mpath.string()), nullptr, false);
    if (m.is_discarded() || !m.is_object()) continue;
    run_entry e;
    e.dir = d.path().string();
    e.slug = d.path().filename().string();
    e.started = m.contains("times") ? text_field(m["times"], "started", "") : "";
    e.manifest = std::move(m);
    runs.push_back(std::move(e));
  }
  std::sort(runs.begin(), runs.end(), [](run_entry const& a, run_entry const& b) {
    return a.started != b.started ? a.started < b.started : a.slug < b.slug;
  });
  return runs;
}

NITRO_RUNTIME_INLINE std::string find_run(std::string const& run_dir, std::string const& ref) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(fs::path(ref) / "manifest.json", ec)) return ref;
  if (fs::exists(fs::path(run_dir) / ref / "manifest.json", ec)) return (fs::path(run_dir) / ref).string();
  auto runs = list_runs(run_dir);
  if (ref == "latest") {
    if (runs.empty()) throw error("E-CLI-004", "there are no runs under " + run_dir + " yet", "start one with `run`, or point --run-dir at the runs");
    return runs.back().dir;
  }
  std::vector<std::string> matches, slugs;
  for (auto const& r : runs) {
    slugs.push_back(r.slug);
    if (r.slug.compare(0, ref.size(), ref) == 0) matches.push_back(r.dir);
  }
  if (matches.size() == 1) return matches[0];
  if (matches.size() > 1)
    throw error("E-CLI-004", "'" + ref + "' names " + std::to_string(matches.size()) + " runs under " + run_dir,
                "give more of the slug (or the folder's path); `latest` names the newest");
  std::string near = detail::did_you_mean(ref, slugs);
  throw error("E-CLI-004", "no run called '" + ref + "' under " + run_dir + (near.empty() ? "" : "; did you mean '" + near + "'?"),
              "give a run folder, a slug (or its unique start) under --run-dir, or `latest`");
}

NITRO_RUNTIME_INLINE std::string latest_run_with(std::string const& run_dir, std::string const& experiment, selection_request const& r) {
  auto runs = list_runs(run_dir);
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    auto const& m = it->manifest;
    if (!m.contains("experiment") || m["experiment"] != experiment || !m.contains("selection")) continue;
    selection_request rec = selection_request::from_json(m["selection"]);
    if (rec.variant == r.variant && rec.sets == r.sets) return it->dir;
  }
  std::string what = r.variant ? "--variant " + *r.variant : "the default selection";
  for (auto const& [k, v] : r.sets) what += " --set " + k + "=" + v;
  throw error("E-CLI-004", "no run under " + run_dir + " was made with " + what, "start one with `run` and the same flags, or name the run");
}

NITRO_RUNTIME_INLINE ordered_json knobs_json(catalog const& c, selection const& s, bool with_doc) {
  ordered_json j = ordered_json::object();
  for (std::size_t i = 0; i < c.knobs.size(); ++i) {
    ordered_json k;
    k["value"] = s.knobs[i].value.json();
    k["source"] = to_string(s.knobs[i].source);
    if (with_doc && !c.knobs[i].doc.empty()) k["doc"] = c.knobs[i].doc;
    j[c.knobs[i].name] = k;
  }
  return j;
}

NITRO_RUNTIME_INLINE ordered_json status_record::json() const {
  ordered_json j;
  j["format"] = "nitro.status/1";
  j["state"] = state;
  j["slug"] = slug;
  j["selection"] = selection;
  j["step"] = step;
  j["epoch"] = epoch;
  j["horizon"] = {{"steps", horizon_steps}, {"epochs", horizon_epochs}};
  ordered_json l = ordered_json::object();
  for (auto const& [k, v] : last) l[k] = v;
  j["last"] = l;
  if (best_value) j["best"] = {{"metric", best_metric}, {"mode", best_minimize ? "min" : "max"}, {"value", *best_value}, {"step", best_step}};
  else j["best"] = nullptr;
  j["heartbeat"] = iso_time_now();
  j["pid"] = static_cast<long>(::getpid());
  j["host"] = host_name();
  j["started"] = started;
  if (!finished.empty()) j["finished"] = finished;
  if (!error.empty()) j["error"] = error;
  if (!reason.empty()) j["reason"] = reason;
  return j;
}

NITRO_RUNTIME_INLINE run_record run_record::create(std::string const& run_dir, std::string const& slug) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) { errno = ec.value(); detail::record_io_error("create the run folder", run_dir); }
  std::string dir = (std::filesystem::path(run_dir) / slug).string();
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno == EEXIST)
      throw error("E-REC-001", "the run folder " + dir + " exists already", "choose another --id, or leave --id out for a fresh one");
    detail::record_io_error("create", dir);
  }
  return run_record(dir);
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
