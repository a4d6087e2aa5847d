// nitro/record/checkpoint_index.hpp — when checkpoints are written (the policy) and which are kept
// (the index of a checkpoints directory).
//
// The checkpoints directory holds `step-<step>.safetensors` files and `index.json`, the list of the
// retained checkpoints with their step, epoch and metrics, in the order they were written; the
// policy says every how many epochs or steps a checkpoint is due and how many of the latest and of
// the best (by the monitor) are kept.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/record/checkpoint_file.hpp"

#include "nitro/core/error.hpp"
#include "nitro/record/atomic_file.hpp"
#include "nitro/record/safetensors.hpp"
#include "nitro/core/monitor.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>    // sort
#include <charconv>     // from_chars: exact integers from metadata
#include <chrono>       // write times
#include <cmath>        // isnan
#include <cstdint>      // int64_t
#include <cstdio>       // snprintf
#include <filesystem>   // directories
#include <fstream>      // the index
#include <iterator>     // istreambuf_iterator
#include <limits>       // quiet_NaN
#include <map>          // metrics
#include <optional>     // latest
#include <set>          // retention
#include <string>       // names
#include <type_traits>  // tensor scalars
#include <utility>      // move
#include <variant>      // named tensors
#include <vector>       // entries

namespace nitro {

// ---- the policy ----------------------------------------------------------------------------------
// monitor_mode (min, max) is the early stopper's type too (core/monitor.hpp).

struct checkpoint_interval {
  std::int64_t n = 1;
  bool epochs = true;  // false: steps
};
constexpr checkpoint_interval every_steps(std::int64_t n) noexcept { return {n, false}; }
constexpr checkpoint_interval every_epochs(std::int64_t n) noexcept { return {n, true}; }

struct checkpoint_policy {
  checkpoint_interval every = every_epochs(1);
  std::int64_t keep_last = 1;   // Last(k): the k written most recently (-1: every one)
  std::int64_t keep_best = 0;   // Best(k): the k best by the monitor (-1: every one)
  std::string monitor;          // the metric Best ranks by ("valid.loss"); required when keep_best != 0
  monitor_mode mode = monitor_mode::min;

  // For show, explain and the manifest: "every 1 epochs, keep last 1, best 1 by valid.loss (min)".
  std::string describe() const;

  void validate() const;
};

// ---- the index -----------------------------------------------------------------------------------
struct checkpoint_entry {
  std::string file;  // relative to the checkpoints directory
  std::int64_t step = 0, epoch = 0, batch_in_epoch = 0, seq = 0;
  std::int64_t time_ns = 0;  // when it was written (system clock)
  std::map<std::string, double> metrics;
};

struct checkpoint_index {
  static constexpr char const* file_name = "index.json";
  std::string monitor;
  monitor_mode mode = monitor_mode::min;
  std::int64_t updated_ns = 0;
  std::int64_t next_seq = 1;
  std::vector<checkpoint_entry> entries;  // in write order (seq)

  std::optional<checkpoint_entry> latest() const {
    if (entries.empty()) return std::nullopt;
    return entries.back();
  }
  // The n written most recently, newest first.
  std::vector<checkpoint_entry> last(std::int64_t n) const;
  // The n best by the monitor, best first; ties keep the earlier. Entries without the metric (or NaN) do not rank.
  std::vector<checkpoint_entry> best(std::int64_t n) const { return best_of(entries, monitor, mode, n); }

  static std::vector<checkpoint_entry> best_of(std::vector<checkpoint_entry> const& all, std::string const& monitor, monitor_mode mode, std::int64_t n);

  nlohmann::json to_json() const;

  // Reads `dir/index.json`; a damaged index is an error naming what is wrong.
  static checkpoint_index load(std::filesystem::path const& dir);
  // The same from text; `source` names it in errors.
  static checkpoint_index parse(std::string const& text, std::string const& source);
  void store(std::filesystem::path const& dir) const;
};

namespace detail {
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
NITRO_RUNTIME_INLINE std::string checkpoint_file_name(std::int64_t step);
inline bool is_checkpoint_file_name(std::string const& n) {
  return n.size() > 17 && n.rfind("step-", 0) == 0 && n.ends_with(".safetensors");
}
}  // namespace detail

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
#include <algorithm>  // stable_sort
#include <cmath>      // isnan
#include <cstdio>     // snprintf
#include <fstream>    // the index
#include <iterator>   // istreambuf_iterator

namespace nitro {

NITRO_RUNTIME_INLINE std::string checkpoint_policy::describe() const {
  std::string s = (every.n == 1 ? std::string("every ") : "every " + std::to_string(every.n) + " ") + (every.epochs ? "epoch" : "step") +
                  (every.n == 1 ? "" : "s") + ", keep last " +
                  (keep_last < 0 ? std::string("all") : std::to_string(keep_last));
  if (keep_best != 0)
    s += ", best " + (keep_best < 0 ? std::string("all") : std::to_string(keep_best)) + " by " +
         (monitor.empty() ? std::string("the run's monitor") : monitor) + " (" + to_string(mode) + ")";
  return s;
}

NITRO_RUNTIME_INLINE void checkpoint_policy::validate() const {
  if (every.n < 1)
    throw error("E-CKPT-017", "the checkpointer's interval is " + std::to_string(every.n) + (every.epochs ? " epochs" : " steps"),
                "use nitro::every_epochs(n) or nitro::every_steps(n) with n >= 1");
  if (keep_last == 0 || keep_last < -1)
    throw error("E-CKPT-017", "keep_last = " + std::to_string(keep_last) + ": a run must keep its latest checkpoint, or a resume has nothing to start from",
                "keep_last >= 1, or -1 to keep every checkpoint");
  if (keep_best < -1) throw error("E-CKPT-017", "keep_best = " + std::to_string(keep_best), "keep_best >= 0, or -1 for every one");
  if (keep_best != 0 && monitor.empty())
    throw error("E-CKPT-017", "keep_best = " + std::to_string(keep_best) + " but no monitor names the metric that ranks checkpoints",
                "set .monitor = \"valid.loss\" (and .mode) or the run keyword nitro::monitor");
}

NITRO_RUNTIME_INLINE std::vector<checkpoint_entry> checkpoint_index::last(std::int64_t n) const {
  std::vector<checkpoint_entry> r(entries.rbegin(), entries.rend());
  if (n >= 0 && static_cast<std::size_t>(n) < r.size()) r.resize(static_cast<std::size_t>(n));
  return r;
}

NITRO_RUNTIME_INLINE std::vector<checkpoint_entry> checkpoint_index::best_of(std::vector<checkpoint_entry> const& all, std::string const& monitor, monitor_mode mode, std::int64_t n) {
  std::vector<checkpoint_entry> r;
  for (auto const& e : all) {
    auto it = e.metrics.find(monitor);
    if (it != e.metrics.end() && !std::isnan(it->second)) r.push_back(e);
  }
  std::stable_sort(r.begin(), r.end(), [&](auto const& a, auto const& b) {
    const double x = a.metrics.at(monitor), y = b.metrics.at(monitor);
    return mode == monitor_mode::min ? x < y : x > y;
  });
  if (n >= 0 && static_cast<std::size_t>(n) < r.size()) r.resize(static_cast<std::size_t>(n));
  return r;
}

NITRO_RUNTIME_INLINE nlohmann::json checkpoint_index::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (auto const& e : entries)
    list.push_back({{"file", e.file}, {"step", e.step}, {"epoch", e.epoch}, {"batch_in_epoch", e.batch_in_epoch}, {"seq", e.seq},
                    {"time_ns", e.time_ns}, {"metrics", nlohmann::json::parse(detail::metrics_json(e.metrics))}});
  return {{"format", "nitro.checkpoint-index"}, {"version", 1},        {"monitor", monitor}, {"mode", to_string(mode)},
          {"updated_ns", updated_ns},           {"next_seq", next_seq}, {"checkpoints", list}};
}

NITRO_RUNTIME_INLINE checkpoint_index checkpoint_index::load(std::filesystem::path const& dir) {
  const auto path = dir / file_name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error("E-CKPT-023", "'" + dir.string() + "' has no checkpoint index (index.json): no checkpoint was written there yet",
                       "train with a checkpointer first, or name a checkpoint file by its path");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse(text, path.string());
}

NITRO_RUNTIME_INLINE checkpoint_index checkpoint_index::parse(std::string const& text, std::string const& source) {
  auto bad = [&](std::string const& what) {
    return error("E-CKPT-018", "the checkpoint index '" + source + "' is damaged: " + what,
                 "restore it from a backup, or delete it: opening the directory with a checkpointer rebuilds it from the checkpoint files");
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (nlohmann::json::exception const& e) {
    throw bad(std::string("not JSON (") + e.what() + ")");
  }
  // A whole number that fits int64 (JSON numbers beyond it parse as floats: converting those is UB).
  auto whole = [&](nlohmann::json const& v, char const* name) -> std::int64_t {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX)))
      throw bad(std::string(name) + " is " + v.dump() + ", not a whole number of at most 19 digits");
    return v.get<std::int64_t>();
  };
  checkpoint_index x;
  try {
    if (!j.is_object() || j.value("format", "") != "nitro.checkpoint-index") throw bad("it is not a nitro checkpoint index");
    if (whole(j.at("version"), "version") != 1) throw bad("it has version " + j.at("version").dump() + "; this nitro reads version 1");
    x.monitor = j.at("monitor").get<std::string>();
    const std::string mode = j.at("mode").get<std::string>();
    if (mode != "min" && mode != "max") throw bad("mode is \"" + mode + "\", not \"min\" or \"max\"");
    x.mode = mode == "min" ? monitor_mode::min : monitor_mode::max;
    x.updated_ns = whole(j.at("updated_ns"), "updated_ns");
    x.next_seq = whole(j.at("next_seq"), "next_seq");
    for (auto const& e : j.at("checkpoints")) {
      checkpoint_entry c;
      c.file = e.at("file").get<std::string>();
      if (c.file.empty() || c.file.find('/') != std::string::npos || c.file[0] == '.') throw bad("it lists the file name \"" + c.file + "\"");
      c.step = whole(e.at("step"), "step");
      c.epoch = whole(e.at("epoch"), "epoch");
      c.batch_in_epoch = whole(e.at("batch_in_epoch"), "batch_in_epoch");
      c.seq = whole(e.at("seq"), "seq");
      c.time_ns = whole(e.at("time_ns"), "time_ns");
      c.metrics = detail::metrics_from(e.at("metrics"));
      if (!x.entries.empty() && c.seq <= x.entries.back().seq) throw bad("its checkpoints are not in write order");
      x.entries.push_back(std::move(c));
    }
  } catch (nlohmann::json::exception const& e) {
    throw bad(std::string("a field is missing or has the wrong type (") + e.what() + ")");
  } catch (error const& e) {
    if (e.code() == "E-CKPT-015") throw bad(e.sentence());
    throw;
  }
  return x;
}

NITRO_RUNTIME_INLINE void checkpoint_index::store(std::filesystem::path const& dir) const { atomic_write(dir / file_name, to_json().dump(2) + "\n", "checkpoint index"); }

NITRO_RUNTIME_INLINE std::string detail::checkpoint_file_name(std::int64_t step) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "step-%012lld.safetensors", static_cast<long long>(step));
  return buf;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
