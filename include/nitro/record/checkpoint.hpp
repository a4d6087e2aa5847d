// nitro/record/checkpoint.hpp — checkpoints of a run: what one holds, when they are written, which are kept.
//
//   nitro::checkpointer ck(run_dir / "checkpoints",
//                          {.every = nitro::every_epochs(1), .keep_last = 3, .keep_best = 1,
//                           .monitor = "valid.loss", .mode = nitro::monitor_mode::min});
//   if (ck.due_after_epoch(epochs_done)) {
//     nitro::safetensors_writer w;
//     nitro::add_store(w, "params.", params);     // every leaf, keyed by keypath
//     ck.save(w, {.step = s, .epoch = e, .seed = seed, .metrics = {{"valid.loss", 0.41}}});
//   }
//   nitro::load_store(nitro::safetensors_file::read(file), "params.", params);   // all or nothing
//   auto avg = nitro::average_checkpoints({f1, f2, f3});                         // a safetensors_file
//
// A checkpoint is a safetensors file (record/safetensors.hpp) with "format" = "nitro.checkpoint" and the
// run's position in its metadata: step, epoch, batch_in_epoch, seed, metrics, selection, groups and
// `extra` (schedule position and whatever else the trainer records), plus a write sequence number.
// Tensors are keyed by prefix and keypath: params.*, state.*, optim.*, ema.*. nitro's random
// streams are pure functions of (seed, purpose, step or epoch), so the seed and the position are
// all a resume needs besides the buffers.
//
// The checkpoints directory holds `step-<step>.safetensors` files and `index.json`, the list of the
// retained checkpoints with their step, epoch and metrics, in the order they were written. Every
// file is written atomically (record/atomic_file.hpp) and the index only after its checkpoint, so a
// process killed at any moment leaves a consistent directory: opening it again adopts a
// checkpoint that was written but not yet indexed, and removes leftovers.
#pragma once

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

inline constexpr int checkpoint_format_version = 1;

// ---- what a checkpoint records besides its tensors ----------------------------------------------
struct checkpoint_info {
  std::int64_t step = 0;            // optimizer steps taken
  std::int64_t epoch = 0;           // the epoch in progress (0-based), or the next one when batch_in_epoch = 0
  std::int64_t batch_in_epoch = 0;  // batches of `epoch` already trained: the loader's start_epoch(epoch, this)
  std::uint64_t seed = 0;           // the run's seed: with the position, every random stream
  std::int64_t batch_size = 0;      // the loader's batch size (the position counts its batches); 0: not recorded
  std::map<std::string, double> metrics;                     // the latest evaluation ("valid.loss", ...)
  nlohmann::json selection = nlohmann::json::object();        // experiment, variant, --set values
  nlohmann::json groups = nlohmann::json::object();           // parameter-group layout
  nlohmann::json extra = nlohmann::json::object();            // schedule position, EMA step, ...
  std::int64_t seq = 0;             // write order within the run (set by the checkpointer)
};

namespace detail {
inline std::string metrics_json(std::map<std::string, double> const& m) {
  nlohmann::json j = nlohmann::json::object();
  for (auto const& [k, v] : m) j[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  return j.dump();
}
inline std::map<std::string, double> metrics_from(nlohmann::json const& j) {
  std::map<std::string, double> m;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it->is_number()) m[it.key()] = it->get<double>();
    else if (it->is_null()) m[it.key()] = std::numeric_limits<double>::quiet_NaN();
    else throw error("E-CKPT-015", "metric '" + it.key() + "' is not a number", "");
  }
  return m;
}
template <class I>
I parse_integer(std::string const& text, std::string const& what, std::string const& source) {
  I v{};
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty())
    throw error("E-CKPT-015", "'" + source + "' records " + what + " = \"" + text + "\", which is not an integer",
                "the checkpoint was not written by nitro, or its metadata was edited");
  return v;
}
}  // namespace detail

// Sets a writer's metadata from the info (format "nitro.checkpoint").
inline void write_checkpoint_metadata(safetensors_writer& w, checkpoint_info const& info) {
  w.metadata("format", "nitro.checkpoint");
  w.metadata("format_version", std::to_string(checkpoint_format_version));
  w.metadata("layout", "column-major: each shape is nitro's extents reversed");
  w.metadata("step", std::to_string(info.step));
  w.metadata("epoch", std::to_string(info.epoch));
  w.metadata("batch_in_epoch", std::to_string(info.batch_in_epoch));
  w.metadata("seed", std::to_string(info.seed));
  w.metadata("batch_size", std::to_string(info.batch_size));
  w.metadata("seq", std::to_string(info.seq));
  w.metadata("metrics", detail::metrics_json(info.metrics));
  w.metadata("selection", info.selection.dump());
  w.metadata("groups", info.groups.dump());
  w.metadata("extra", info.extra.dump());
}

// Reads the info back; a file that is not a nitro checkpoint, or one from a newer format, is an error.
inline checkpoint_info read_checkpoint_info(safetensors_file const& f) {
  auto const* fmt = f.meta("format");
  if (!fmt || *fmt != "nitro.checkpoint")
    throw error("E-CKPT-015", "'" + f.source() + "' is not a nitro checkpoint (its metadata \"format\" is " + (fmt ? "\"" + *fmt + "\"" : std::string("absent")) + ")",
                "resume from a checkpoint nitro wrote; to load only weights from another file use nitro::weights = \"path\"");
  auto need = [&](char const* key) -> std::string const& {
    auto const* v = f.meta(key);
    if (!v) throw error("E-CKPT-015", "'" + f.source() + "' is a nitro checkpoint without \"" + key + "\" in its metadata", "write it again with this version of nitro");
    return *v;
  };
  const int version = detail::parse_integer<int>(need("format_version"), "format_version", f.source());
  if (version < 1 || version > checkpoint_format_version)
    throw error("E-CKPT-015", "'" + f.source() + "' has checkpoint format version " + std::to_string(version) + "; this nitro reads version 1 to " +
                                  std::to_string(checkpoint_format_version),
                "load it with the nitro version that wrote it");
  checkpoint_info info;
  info.step = detail::parse_integer<std::int64_t>(need("step"), "step", f.source());
  info.epoch = detail::parse_integer<std::int64_t>(need("epoch"), "epoch", f.source());
  info.batch_in_epoch = detail::parse_integer<std::int64_t>(need("batch_in_epoch"), "batch_in_epoch", f.source());
  info.seed = detail::parse_integer<std::uint64_t>(need("seed"), "seed", f.source());
  info.batch_size = detail::parse_integer<std::int64_t>(need("batch_size"), "batch_size", f.source());
  info.seq = detail::parse_integer<std::int64_t>(need("seq"), "seq", f.source());
  try {
    info.metrics = detail::metrics_from(nlohmann::json::parse(need("metrics")));
    info.selection = nlohmann::json::parse(need("selection"));
    info.groups = nlohmann::json::parse(need("groups"));
    info.extra = nlohmann::json::parse(need("extra"));
  } catch (nlohmann::json::exception const& e) {
    throw error("E-CKPT-015", "'" + f.source() + "' has metadata that is not valid JSON (" + e.what() + ")", "write it again");
  }
  return info;
}

// ---- a flat store's leaves in and out ------------------------------------------------------------
// Store: anything with a static `leaves` table (keypath, shape(), offset, numel) and values(), as
// nitro::param_store. Each leaf becomes tensor `prefix + keypath` with nitro's extents.
template <class Store>
void add_store(safetensors_writer& w, std::string const& prefix, Store const& s) {
  for (auto const& li : Store::leaves) w.add(prefix + std::string(li.keypath), s.values() + li.offset, li.shape());
}

// Loads every leaf from `prefix + keypath`: all present, each of the leaf's shape and a floating
// dtype, and no other tensor under the prefix — checked before anything is copied, so a failure
// leaves the store as it was.
namespace detail {
// The file's tensor for each leaf (checked: present, the leaf's shape, a loadable dtype).
template <class Store>
std::vector<safetensors_entry const*> match_leaves(safetensors_file const& f, std::string const& prefix) {
  std::vector<safetensors_entry const*> found;
  for (auto const& li : Store::leaves) {
    const std::string name = prefix + std::string(li.keypath);
    auto const* e = &f.at(name);  // E-CKPT-011, listing the file's names, when absent
    const nitro::shape want = li.shape();
    if (!(e->shape() == want))
      throw error("E-CKPT-012", "tensor '" + name + "' of '" + f.source() + "' has nitro shape " + e->shape().to_string() + " but the model's leaf is " + want.to_string(),
                  "load a checkpoint of this model; a PyTorch [out, in] matrix is nitro's [in, out] reversed, so save its transpose");
    if (!is_floating(e->dtype))
      throw error("E-CKPT-013", "tensor '" + name + "' of '" + f.source() + "' is " + std::string(to_string(e->dtype)) + ", which does not load into a floating leaf",
                  "save it as F32, F64, F16 or BF16");
    found.push_back(e);
  }
  return found;
}
template <class Store>
bool is_leaf_name(std::string const& name, std::string const& prefix) {
  for (auto const& li : Store::leaves)
    if (name.size() == prefix.size() + li.keypath.size() && name.rfind(prefix, 0) == 0 && name.compare(prefix.size(), std::string::npos, li.keypath) == 0) return true;
  return false;
}
[[noreturn]] inline void unknown_tensor(safetensors_file const& f, std::string const& name) {
  throw error("E-CKPT-014", "'" + f.source() + "' has tensor '" + name + "', which the model does not have",
              "load a checkpoint of this model (the same build_model and GraphConst values)");
}
template <class Store>
void copy_leaves(safetensors_file const& f, std::vector<safetensors_entry const*> const& found, Store& s) {
  std::size_t i = 0;
  for (auto const& li : Store::leaves) f.copy_to(*found[i++], s.values() + li.offset, li.numel);
}
}  // namespace detail

template <class Store>
void load_store(safetensors_file const& f, std::string const& prefix, Store& s) {
  auto found = detail::match_leaves<Store>(f, prefix);
  for (auto const& e : f.entries())
    if (e.name.rfind(prefix, 0) == 0 && !detail::is_leaf_name<Store>(e.name, prefix)) detail::unknown_tensor(f, e.name);
  detail::copy_leaves(f, found, s);
}

// The weights of a model from any file: a nitro file keys them params.<keypath> and
// state.<keypath>; a file from elsewhere (PyTorch users, say) by the bare keypaths. Every leaf must
// be there and nothing else of the model's kind may be; all is checked before anything is copied.
template <class Params, class State>
void load_model(safetensors_file const& f, Params& ps, State& st) {
  const bool prefixed = std::any_of(f.entries().begin(), f.entries().end(), [](auto const& e) { return e.name.rfind("params.", 0) == 0; });
  if (prefixed) {
    auto p = detail::match_leaves<Params>(f, "params.");
    auto s = detail::match_leaves<State>(f, "state.");
    for (auto const& e : f.entries()) {
      if (e.name.rfind("params.", 0) == 0 && !detail::is_leaf_name<Params>(e.name, "params.")) detail::unknown_tensor(f, e.name);
      if (e.name.rfind("state.", 0) == 0 && !detail::is_leaf_name<State>(e.name, "state.")) detail::unknown_tensor(f, e.name);
    }
    detail::copy_leaves(f, p, ps);
    detail::copy_leaves(f, s, st);
    return;
  }
  auto p = detail::match_leaves<Params>(f, "");
  auto s = detail::match_leaves<State>(f, "");
  for (auto const& e : f.entries())
    if (!detail::is_leaf_name<Params>(e.name, "") && !detail::is_leaf_name<State>(e.name, "")) detail::unknown_tensor(f, e.name);
  detail::copy_leaves(f, p, ps);
  detail::copy_leaves(f, s, st);
}

// ---- named tensors in and out (an optimizer's state_tensors()) -------------------------------------
// Entries: a range of {name, value} where value is a nitro tensor or a std::variant of tensors
// viewing the owner's memory (optim::program::state_tensors() gives optim.step, optim.<group>.<state>, ...).
namespace detail {
template <class V, class F>
void visit_tensor(V&& v, F&& f) {
  if constexpr (requires { v.index(); std::visit(f, v); }) std::visit(f, v);
  else f(v);
}
}  // namespace detail

template <class Entries>
void add_named(safetensors_writer& w, Entries const& entries) {
  for (auto const& e : entries) detail::visit_tensor(e.value, [&](auto const& t) { w.add(e.name, t); });
}

// The entries of `like` (same names, element types and sizes) with values from the file, in owned
// memory. Each must be present with exactly its element type (optimizer state is never converted)
// and size; a tensor under `prefix` that `like` lacks is an error too. Checked before anything is
// returned; hand the result to the owner's load (program.load_state(...)).
template <class Entry>
std::vector<Entry> read_named(safetensors_file const& f, std::vector<Entry> const& like, std::string const& prefix) {
  std::vector<Entry> out;
  out.reserve(like.size());
  for (auto const& m : like) {
    auto const& e = f.at(m.name);
    Entry copy = m;
    detail::visit_tensor(copy.value, [&](auto& t) {
      using T = typename std::remove_cvref_t<decltype(t)>::scalar;
      if (e.dtype != dtype_of<T>::value)
        throw error("E-CKPT-013", "tensor '" + m.name + "' of '" + f.source() + "' is " + std::string(to_string(e.dtype)) + " but the state it restores is " +
                                      std::string(to_string(dtype_of<T>::value)),
                    "resume from a checkpoint written by this program (optimizer state is restored exactly, never converted)");
      if (e.numel() != t.numel())
        throw error("E-CKPT-012", "tensor '" + m.name + "' of '" + f.source() + "' holds " + std::to_string(e.numel()) + " values; the state it restores holds " +
                                      std::to_string(t.numel()),
                    "resume with the same model, groups and rules as the run that wrote it");
      auto owned = std::remove_cvref_t<decltype(t)>::owned(t.shape());
      f.copy_to(e, owned.data(), owned.numel());
      t = owned;
    });
    out.push_back(std::move(copy));
  }
  for (auto const& e : f.entries()) {
    if (e.name.rfind(prefix, 0) != 0) continue;
    if (std::none_of(like.begin(), like.end(), [&](auto const& m) { return m.name == e.name; }))
      throw error("E-CKPT-014", "'" + f.source() + "' has tensor '" + e.name + "', which this run's state does not have",
                  "resume with the same model, groups and rules as the run that wrote it");
  }
  return out;
}

// Where a resumed run starts, after checking that the checkpoint can continue it exactly: the same
// seed (every random stream derives from it) and the same batch size (the position counts batches).
struct resume_point {
  std::int64_t step = 0, epoch = 0, batch_in_epoch = 0;
};
inline resume_point resume_point_of(checkpoint_info const& info, std::uint64_t seed, std::int64_t batch_size, std::string const& source) {
  if (info.seed != seed)
    throw error("E-CKPT-030", "'" + source + "' was written by a run with seed " + std::to_string(info.seed) + ", and this one has seed " + std::to_string(seed) +
                                  ": resuming would not continue that run",
                "pass nitro::seed = " + std::to_string(info.seed) + " (or leave seed to the checkpoint), or load only its weights: nitro::weights = ...");
  if (info.batch_size != 0 && info.batch_size != batch_size)
    throw error("E-CKPT-030", "'" + source + "' was written with batch_size " + std::to_string(info.batch_size) + ", and this run has " + std::to_string(batch_size) +
                                  ": its position (epoch " + std::to_string(info.epoch) + ", batch " + std::to_string(info.batch_in_epoch) + ") means other samples here",
                "resume with batch_size = " + std::to_string(info.batch_size) + ", or load only its weights: nitro::weights = ...");
  return {info.step, info.epoch, info.batch_in_epoch};
}

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
  std::string describe() const {
    std::string s = "every " + std::to_string(every.n) + (every.epochs ? " epochs" : " steps") + ", keep last " +
                    (keep_last < 0 ? std::string("all") : std::to_string(keep_last));
    if (keep_best != 0)
      s += ", best " + (keep_best < 0 ? std::string("all") : std::to_string(keep_best)) + " by " +
           (monitor.empty() ? std::string("the run's monitor") : monitor) + " (" + to_string(mode) + ")";
    return s;
  }

  void validate() const {
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
  std::vector<checkpoint_entry> last(std::int64_t n) const {
    std::vector<checkpoint_entry> r(entries.rbegin(), entries.rend());
    if (n >= 0 && static_cast<std::size_t>(n) < r.size()) r.resize(static_cast<std::size_t>(n));
    return r;
  }
  // The n best by the monitor, best first; ties keep the earlier. Entries without the metric (or NaN) do not rank.
  std::vector<checkpoint_entry> best(std::int64_t n) const { return best_of(entries, monitor, mode, n); }

  static std::vector<checkpoint_entry> best_of(std::vector<checkpoint_entry> const& all, std::string const& monitor, monitor_mode mode, std::int64_t n) {
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

  nlohmann::json to_json() const {
    nlohmann::json list = nlohmann::json::array();
    for (auto const& e : entries)
      list.push_back({{"file", e.file}, {"step", e.step}, {"epoch", e.epoch}, {"batch_in_epoch", e.batch_in_epoch}, {"seq", e.seq},
                      {"time_ns", e.time_ns}, {"metrics", nlohmann::json::parse(detail::metrics_json(e.metrics))}});
    return {{"format", "nitro.checkpoint-index"}, {"version", 1},        {"monitor", monitor}, {"mode", to_string(mode)},
            {"updated_ns", updated_ns},           {"next_seq", next_seq}, {"checkpoints", list}};
  }

  // Reads `dir/index.json`; a damaged index is an error naming what is wrong.
  static checkpoint_index load(std::filesystem::path const& dir) {
    const auto path = dir / file_name;
    std::ifstream in(path, std::ios::binary);
    if (!in) throw error("E-CKPT-023", "'" + dir.string() + "' has no checkpoint index (index.json): no checkpoint was written there yet",
                         "train with a checkpointer first, or name a checkpoint file by its path");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return parse(text, path.string());
  }
  // The same from text; `source` names it in errors.
  static checkpoint_index parse(std::string const& text, std::string const& source) {
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
  void store(std::filesystem::path const& dir) const { atomic_write(dir / file_name, to_json().dump(2) + "\n", "checkpoint index"); }
};

namespace detail {
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}
inline std::string checkpoint_file_name(std::int64_t step) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "step-%012lld.safetensors", static_cast<long long>(step));
  return buf;
}
inline bool is_checkpoint_file_name(std::string const& n) {
  return n.size() > 17 && n.rfind("step-", 0) == 0 && n.ends_with(".safetensors");
}
}  // namespace detail

// ---- the checkpointer ------------------------------------------------------------------------------
class checkpointer {
 public:
  // Opens (creating it if needed) a run's checkpoints directory. An existing index is read; a
  // checkpoint written after the index's last update is adopted; leftovers are removed.
  checkpointer(std::filesystem::path dir, checkpoint_policy policy) : m_dir(std::move(dir)), m_policy(std::move(policy)) {
    m_policy.validate();
    std::error_code ec;
    std::filesystem::create_directories(m_dir, ec);
    if (ec) throw error("E-CKPT-010", "cannot create the checkpoints directory '" + m_dir.string() + "' (" + ec.message() + ")", "check the run directory's permissions");
    remove_stale_temporaries(m_dir);
    if (std::filesystem::exists(m_dir / checkpoint_index::file_name)) m_index = checkpoint_index::load(m_dir);
    m_index.monitor = m_policy.monitor;
    m_index.mode = m_policy.mode;
    recover();
  }

  std::filesystem::path const& directory() const noexcept { return m_dir; }
  checkpoint_policy const& policy() const noexcept { return m_policy; }
  checkpoint_index const& index() const noexcept { return m_index; }
  std::filesystem::path path_of(checkpoint_entry const& e) const { return m_dir / e.file; }

  // Whether the policy asks for a checkpoint after `steps_done` optimizer steps / `epochs_done`
  // epochs. No allocation: call them every step.
  bool due_after_step(std::int64_t steps_done) const noexcept { return !m_policy.every.epochs && steps_done > 0 && steps_done % m_policy.every.n == 0; }
  bool due_after_epoch(std::int64_t epochs_done) const noexcept { return m_policy.every.epochs && epochs_done > 0 && epochs_done % m_policy.every.n == 0; }

  // Writes the checkpoint (the writer's tensors plus the info's metadata), then the index, then
  // removes what the retention no longer keeps. A checkpoint of a step already indexed replaces it.
  checkpoint_entry save(safetensors_writer& w, checkpoint_info info) {
    // A checkpoint without metrics (a step before the first evaluation) does not rank; metrics that
    // lack the monitor mean the monitor is misspelt or never evaluated.
    if (m_policy.keep_best != 0 && !info.metrics.empty() && !info.metrics.count(m_policy.monitor)) {
      std::string have;
      for (auto const& [k, v] : info.metrics) have += (have.empty() ? "" : ", ") + k;
      throw error("E-CKPT-019", "the checkpointer ranks by '" + m_policy.monitor + "' but the metrics given to this checkpoint are {" + have + "}",
                  "evaluate the split the monitor names before saving, or monitor a metric the run reports");
    }
    info.seq = m_index.next_seq;
    write_checkpoint_metadata(w, info);
    checkpoint_entry e{detail::checkpoint_file_name(info.step), info.step, info.epoch, info.batch_in_epoch, info.seq, detail::now_ns(), info.metrics};
    w.write(m_dir / e.file);
    std::erase_if(m_index.entries, [&](auto const& x) { return x.file == e.file; });
    m_index.entries.push_back(e);
    m_index.next_seq = info.seq + 1;
    commit_index();
    return e;
  }

 private:
  std::vector<checkpoint_entry> retained() const {
    std::set<std::int64_t> keep;
    for (auto const& e : m_index.last(m_policy.keep_last)) keep.insert(e.seq);
    if (m_policy.keep_best != 0)
      for (auto const& e : m_index.best(m_policy.keep_best)) keep.insert(e.seq);
    std::vector<checkpoint_entry> r;
    for (auto const& e : m_index.entries)
      if (keep.count(e.seq)) r.push_back(e);
    return r;
  }
  // Index first (atomically), then the files it no longer lists.
  void commit_index() {
    auto keep = retained();
    std::vector<std::string> drop;
    for (auto const& e : m_index.entries)
      if (std::none_of(keep.begin(), keep.end(), [&](auto const& k) { return k.seq == e.seq; })) drop.push_back(e.file);
    m_index.entries = std::move(keep);
    m_index.updated_ns = std::max(detail::now_ns(), m_index.updated_ns + 1);
    m_index.store(m_dir);
    for (auto const& f : drop) {
      std::error_code ec;
      std::filesystem::remove(m_dir / f, ec);
    }
    if (!drop.empty()) fsync_directory(m_dir);
  }
  // Checkpoint files the index does not list: adopt one written after the index's last update
  // (the process died between the two writes), remove the rest (pruned before a crash).
  void recover() {
    bool changed = false;
    std::vector<std::filesystem::path> unlisted;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(m_dir, ec); !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (!detail::is_checkpoint_file_name(n)) continue;
      if (std::none_of(m_index.entries.begin(), m_index.entries.end(), [&](auto const& e) { return e.file == n; })) unlisted.push_back(it->path());
    }
    std::sort(unlisted.begin(), unlisted.end());
    for (auto const& p : unlisted) {
      std::optional<checkpoint_info> info;
      try {
        info = read_checkpoint_info(safetensors_file::read(p));
      } catch (error const&) {
      }
      if (info && info->seq >= m_index.next_seq && detail::checkpoint_file_name(info->step) == p.filename().string()) {
        m_index.entries.push_back({p.filename().string(), info->step, info->epoch, info->batch_in_epoch, info->seq, detail::now_ns(), info->metrics});
        m_index.next_seq = info->seq + 1;
      } else {
        std::error_code rm;
        std::filesystem::remove(p, rm);
      }
      changed = true;
    }
    std::sort(m_index.entries.begin(), m_index.entries.end(), [](auto const& a, auto const& b) { return a.seq < b.seq; });
    if (changed) commit_index();
  }

  std::filesystem::path m_dir;
  checkpoint_policy m_policy;
  checkpoint_index m_index;
};

// ---- averaging -------------------------------------------------------------------------------------
// The mean of several checkpoints' floating tensors under `prefixes` (params., state., ema.),
// computed in double in the order given and rounded to each tensor's dtype. Every file must hold
// the same tensors (names, dtypes, shapes) under those prefixes; integer tensors must be equal in
// all. The result is an in-memory, validated safetensors_file ("format" = "nitro.average").
inline safetensors_file average_checkpoints(std::vector<std::filesystem::path> const& files,
                                            std::vector<std::string> const& prefixes = {"params.", "state.", "ema."}) {
  if (files.empty()) throw error("E-CKPT-024", "averaging needs at least one checkpoint, and none was given", "Average(Last(n)) with n >= 1");
  auto selected = [&](std::string const& name) {
    return std::any_of(prefixes.begin(), prefixes.end(), [&](auto const& p) { return name.rfind(p, 0) == 0; });
  };
  std::vector<safetensors_file> in;
  in.reserve(files.size());
  for (auto const& f : files) in.push_back(safetensors_file::read(f));
  std::vector<safetensors_entry const*> names;
  for (auto const& e : in[0].entries())
    if (selected(e.name)) names.push_back(&e);
  auto mismatch = [&](std::size_t k, std::string const& what) {
    return error("E-CKPT-028", "cannot average '" + in[0].source() + "' with '" + in[k].source() + "': " + what,
                 "average checkpoints of one model (the same build_model and GraphConst values)");
  };
  for (std::size_t k = 1; k < in.size(); ++k) {
    std::size_t count = 0;
    for (auto const& e : in[k].entries()) {
      if (!selected(e.name)) continue;
      ++count;
      auto const* a = in[0].find(e.name);
      if (!a) throw mismatch(k, "tensor '" + e.name + "' is only in the second");
      if (a->dtype != e.dtype || a->file_shape != e.file_shape)
        throw mismatch(k, "tensor '" + e.name + "' is " + std::string(to_string(a->dtype)) + " " + detail::shape_text(a->file_shape) + " in the first and " +
                              std::string(to_string(e.dtype)) + " " + detail::shape_text(e.file_shape) + " in the second");
    }
    if (count != names.size()) {
      for (auto const* a : names)
        if (!in[k].contains(a->name)) throw mismatch(k, "tensor '" + a->name + "' is only in the first");
    }
  }
  // Averaged values live here until the writer has serialised them (a vector keeps its buffer when moved).
  std::vector<std::vector<double>> f64;
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<std::byte>> raw;
  safetensors_writer w;
  nlohmann::json from = nlohmann::json::array();
  for (auto const& f : in) from.push_back(f.source());
  w.metadata("format", "nitro.average");
  w.metadata("averaged_from", from.dump());
  w.metadata("layout", "column-major: each shape is nitro's extents reversed");
  for (auto const* a : names) {
    const std::size_t n = static_cast<std::size_t>(a->numel());
    if (is_floating(a->dtype)) {
      std::vector<double> sum(n, 0.0), v;
      for (auto const& f : in) {
        v = f.values<double>(*f.find(a->name));
        for (std::size_t i = 0; i < n; ++i) sum[i] += v[i];
      }
      for (auto& x : sum) x /= static_cast<double>(in.size());
      if (a->dtype == st_dtype::F64) {
        f64.push_back(std::move(sum));
        w.add_row_major(a->name, st_dtype::F64, a->file_shape, f64.back().data());
      } else {  // F32, and F16/BF16 widened to F32
        f32.emplace_back(sum.begin(), sum.end());
        w.add_row_major(a->name, st_dtype::F32, a->file_shape, f32.back().data());
      }
    } else {
      for (std::size_t k = 1; k < in.size(); ++k) {
        auto const& b = *in[k].find(a->name);
        if (!std::equal(a->bytes.begin(), a->bytes.end(), b.bytes.begin(), b.bytes.end()))
          throw mismatch(k, "integer tensor '" + a->name + "' differs, and integers are not averaged");
      }
      raw.emplace_back(a->bytes.begin(), a->bytes.end());
      w.add_row_major(a->name, a->dtype, a->file_shape, raw.back().data());
    }
  }
  return safetensors_file::parse(w.bytes(), "average of " + std::to_string(in.size()) + " checkpoints");
}

}  // namespace nitro
