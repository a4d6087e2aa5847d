// nitro/record/checkpoint_file.hpp — what one checkpoint file holds, and how its parts go in and out.
//
//   nitro::safetensors_writer w;
//   nitro::add_store(w, "params.", params);                  // every leaf of a flat store, by keypath
//   nitro::write_checkpoint_metadata(w, {.step = s, .epoch = e, .seed = seed});
//   nitro::load_store(nitro::safetensors_file::read(file), "params.", params);   // all or nothing
//
// A checkpoint is a safetensors file (record/safetensors.hpp) with "format" = "nitro.checkpoint" and the
// run's position in its metadata: step, epoch, batch_in_epoch, seed, metrics, selection, groups and
// `extra` (schedule position and whatever else the trainer records), plus a write sequence number.
// Tensors are keyed by prefix and keypath: params.*, state.*, optim.*, ema.*. nitro's random
// streams are pure functions of (seed, purpose, step or epoch), so the seed and the position are
// all a resume needs besides the buffers (resume_point_of checks that they fit the run).
#pragma once

#include "nitro/core/runtime.hpp"
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

// What a checkpoint records beside its tensors, its position and its metrics, in plain values: the
// handle fills it, and checkpoint_info's JSON members are made from it once (nitro::runtime), not
// in every trainer.
struct checkpoint_notes {
  std::string metadata_json = "{}";  // the record's metadata: an object with a "selection", or the selection
  std::string program;               // the program key, when the selection has none
  struct group {
    std::string name, rule, anchor;
    std::size_t leaves = 0;
    std::int64_t params = 0;
  };
  std::vector<group> groups;               // the parameter-group layout
  std::optional<std::int64_t> ema_updates;  // with an EMA
  struct monitor_state {
    double best = 0;
    std::int64_t best_step = -1;
    std::int64_t wait = 0;
  };
  std::optional<monitor_state> monitor;  // once the monitor has a best
};
// info.selection, .groups and .extra from the notes (a selection that is not an object: {}).
NITRO_RUNTIME_INLINE void note_checkpoint(checkpoint_info& info, checkpoint_notes const& notes);

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
NITRO_RUNTIME_INLINE void write_checkpoint_metadata(safetensors_writer& w, checkpoint_info const& info);

// Reads the info back; a file that is not a nitro checkpoint, or one from a newer format, is an error.
NITRO_RUNTIME_INLINE checkpoint_info read_checkpoint_info(safetensors_file const& f);

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
NITRO_RUNTIME_INLINE resume_point resume_point_of(checkpoint_info const& info, std::uint64_t seed, std::int64_t batch_size, std::string const& source);

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE void note_checkpoint(checkpoint_info& info, checkpoint_notes const& notes) {
  try {
    auto meta = nlohmann::json::parse(notes.metadata_json);
    info.selection = meta.is_object() && meta.contains("selection") ? meta["selection"] : meta;
  } catch (nlohmann::json::exception const&) {
    info.selection = nlohmann::json::object();
  }
  if (!info.selection.is_object()) info.selection = nlohmann::json::object();
  if (!info.selection.contains("program")) info.selection["program"] = notes.program;
  for (auto const& g : notes.groups)
    info.groups[g.name] = {{"leaves", g.leaves}, {"params", g.params}, {"rule", g.rule}, {"anchor", g.anchor}};
  if (notes.ema_updates) info.extra["ema_updates"] = *notes.ema_updates;
  if (notes.monitor) {
    info.extra["monitor_best"] = notes.monitor->best;
    info.extra["monitor_best_step"] = notes.monitor->best_step;
    info.extra["monitor_wait"] = notes.monitor->wait;
  }
}

NITRO_RUNTIME_INLINE void write_checkpoint_metadata(safetensors_writer& w, checkpoint_info const& info) {
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

NITRO_RUNTIME_INLINE checkpoint_info read_checkpoint_info(safetensors_file const& f) {
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

NITRO_RUNTIME_INLINE resume_point resume_point_of(checkpoint_info const& info, std::uint64_t seed, std::int64_t batch_size, std::string const& source) {
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

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
