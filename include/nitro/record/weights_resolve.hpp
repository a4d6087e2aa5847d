// nitro/record/weights_resolve.hpp — the files a weights, resume or restore_best reference names.
//
//   auto w = nitro::resolve(nitro::to_weights_ref(nitro::latest >> nitro::Average(nitro::Last(10))),
//                           {.runs_dir = "runs"});
//   nitro::safetensors_file f = w.load();    // the one file, or the mean of several
//
// resolve(ref, context) turns a reference (record/weights_ref.hpp) into the files it names, reading
// the runs directory (DESIGN.md §4: <run_dir>/<slug>/checkpoints/index.json); every failure is a coded
// error (no such run, no checkpoints yet, n larger than what is kept, ...). resolved_weights::load()
// reads the one file, or averages several, into a validated safetensors_file; load_for_resume(found, ref,
// skipped) reads a resume's, passing over a damaged latest checkpoint to the newest whole one.
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/core/error.hpp"
#include "nitro/record/checkpoint.hpp"
#include "nitro/record/safetensors.hpp"
#include "nitro/record/weights_ref.hpp"

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

// ---- resolution ------------------------------------------------------------------------------------
struct resolve_context {
  std::filesystem::path runs_dir = "runs";
  std::filesystem::path own_run;  // the handle's own run directory: excluded from `latest`
  bool bare_is_own = false;       // a bare checkpoint names the own run (restore_best, eval_weights)
};

struct resolved_checkpoint {
  std::filesystem::path file;
  std::filesystem::path run;  // empty for a path reference
  checkpoint_entry entry;     // step, epoch, metrics (empty for a path reference)
};

struct resolved_weights {
  std::vector<resolved_checkpoint> checkpoints;  // one; several (in write order) when averaging
  bool average = false;
  std::string reference;  // the reference as written

  // The single file, or the average of several, validated.
  safetensors_file load() const {
    if (!average) return safetensors_file::read(checkpoints.at(0).file);
    std::vector<std::filesystem::path> files;
    for (auto const& c : checkpoints) files.push_back(c.file);
    return average_checkpoints(files);
  }
};

// The file a resume reads. A resume of a run's latest checkpoint (Last(1): `--resume RUN`) whose
// file is damaged (a bad sector, a file clobbered outside nitro) continues from the newest whole one
// before it, and says which it passed over in `skipped`: a damaged file costs one checkpoint
// interval, not the run. Any other pick names one checkpoint, and a damaged one is refused.
inline safetensors_file load_for_resume(resolved_weights const& found, resume_ref const& ref, std::vector<std::string>& skipped) {
  weights_ref const& r = ref.ref();
  const bool latest = r.which() == weights_ref::kind::checkpoint && !r.pick().best && r.pick().n == 1 && found.checkpoints.size() == 1 &&
                      !found.checkpoints[0].run.empty();
  if (!latest) return found.load();
  const std::filesystem::path dir = found.checkpoints[0].run / "checkpoints";
  const checkpoint_index idx = checkpoint_index::load(dir);
  std::string why;
  for (auto it = idx.entries.rbegin(); it != idx.entries.rend(); ++it) {
    try {
      safetensors_file file = safetensors_file::read(dir / it->file);
      (void)read_checkpoint_info(file);  // a file that is whole but not a nitro checkpoint is passed over too
      return file;
    } catch (error const& e) {
      skipped.push_back(it->file + ": " + e.code() + " " + e.sentence());
      why += "\n  " + skipped.back();
    }
  }
  throw error("E-CKPT-035", "no checkpoint of run '" + found.checkpoints[0].run.string() + "' can be read, so none can be resumed:" + why,
              "restore the files from a backup, or start the run again (weights = one of its files that an older backup keeps)");
}

namespace detail {

NITRO_RUNTIME_INLINE std::filesystem::path checkpoints_of(std::filesystem::path const& run);

NITRO_RUNTIME_INLINE bool same_dir(std::filesystem::path const& a, std::filesystem::path const& b);

NITRO_RUNTIME_INLINE void require_runs_dir(resolve_context const& ctx);

// Every run directory under the runs directory (sorted by name).
NITRO_RUNTIME_INLINE std::vector<std::filesystem::path> run_directories(resolve_context const& ctx);
NITRO_RUNTIME_INLINE bool has_index(std::filesystem::path const& run);
NITRO_RUNTIME_INLINE std::string list_names(std::vector<std::filesystem::path> const& runs);

NITRO_RUNTIME_INLINE std::filesystem::path find_run(run_pick const& run, resolve_context const& ctx);

struct candidate {
  std::filesystem::path run;
  checkpoint_entry entry;
};

NITRO_RUNTIME_INLINE std::vector<candidate> choose(std::vector<candidate> all, std::string const& monitor, monitor_mode mode, checkpoint_pick const& pick,
                                     std::string const& where, std::string const& ref);

}  // namespace detail

// The files a reference names. Path references must exist; run references read the runs' indexes.
NITRO_RUNTIME_INLINE resolved_weights resolve(weights_ref const& ref, resolve_context const& ctx);
template <std::same_as<resume_ref> R>  // only a resume_ref itself: other values convert to weights_ref
resolved_weights resolve(R const& ref, resolve_context const& ctx) {
  return resolve(ref.ref(), ctx);
}

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::detail {

NITRO_RUNTIME_INLINE std::filesystem::path checkpoints_of(std::filesystem::path const& run) { return run / "checkpoints"; }

NITRO_RUNTIME_INLINE bool same_dir(std::filesystem::path const& a, std::filesystem::path const& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec);
}

NITRO_RUNTIME_INLINE void require_runs_dir(resolve_context const& ctx) {
  std::error_code ec;
  if (!std::filesystem::is_directory(ctx.runs_dir, ec))
    throw error("E-CKPT-020", "the runs directory '" + ctx.runs_dir.string() + "' does not exist, so it holds no run to take weights from",
                "train a run first, or pass run_dir = the directory that holds your runs");
}

NITRO_RUNTIME_INLINE std::vector<std::filesystem::path> run_directories(resolve_context const& ctx) {
  require_runs_dir(ctx);
  std::vector<std::filesystem::path> r;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(ctx.runs_dir, ec); !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    if (it->is_directory(ec)) r.push_back(it->path());
  std::sort(r.begin(), r.end());
  return r;
}

NITRO_RUNTIME_INLINE bool has_index(std::filesystem::path const& run) {
  std::error_code ec;
  return std::filesystem::exists(checkpoints_of(run) / checkpoint_index::file_name, ec);
}

NITRO_RUNTIME_INLINE std::string list_names(std::vector<std::filesystem::path> const& runs) {
  std::string s;
  std::size_t shown = 0;
  for (auto const& r : runs) {
    if (shown == 8) { s += ", ..."; break; }
    s += (shown++ ? ", " : "") + r.filename().string();
  }
  return s.empty() ? "none" : s;
}

NITRO_RUNTIME_INLINE std::filesystem::path find_run(run_pick const& run, resolve_context const& ctx) {
  using K = run_pick::kind;
  if (run.k == K::directory) {
    std::error_code ec;
    if (!std::filesystem::is_directory(run.directory, ec))
      throw error("E-CKPT-021", "the run directory '" + run.directory.string() + "' does not exist", "name a run that has been trained");
    return run.directory;
  }
  if (run.k == K::id) {
    if (run.id.find('/') != std::string::npos) {
      std::error_code ec;
      if (!std::filesystem::is_directory(run.id, ec))
        throw error("E-CKPT-021", "no run directory '" + run.id + "'", "pass an existing run directory, or a run's slug under the runs directory");
      return run.id;
    }
    auto runs = run_directories(ctx);
    std::vector<std::filesystem::path> hits;
    for (auto const& r : runs)
      if (r.filename().string() == run.id) return r;
    for (auto const& r : runs)
      if (r.filename().string().find(run.id) != std::string::npos) hits.push_back(r);
    if (hits.size() == 1) return hits[0];
    if (hits.empty())
      throw error("E-CKPT-021", "no run in '" + ctx.runs_dir.string() + "' is called '" + run.id + "' (its runs: " + list_names(runs) + ")",
                  "pass a run's directory name (or a part of it that only one run has)");
    throw error("E-CKPT-022", "'" + run.id + "' names several runs in '" + ctx.runs_dir.string() + "': " + list_names(hits),
                "pass more of the name, so that only one run matches");
  }
  // latest: the run whose checkpoint index was written most recently (not this handle's own)
  auto runs = run_directories(ctx);
  std::filesystem::path chosen;
  std::int64_t when = -1;
  for (auto const& r : runs) {
    if (same_dir(r, ctx.own_run) || !has_index(r)) continue;
    auto idx = checkpoint_index::load(checkpoints_of(r));
    if (idx.entries.empty()) continue;
    if (idx.updated_ns > when) { when = idx.updated_ns; chosen = r; }
  }
  if (chosen.empty())
    throw error("E-CKPT-023", "no run in '" + ctx.runs_dir.string() + "' has checkpoints yet (its runs: " + list_names(runs) + ")",
                "train a run with a checkpointer first (nitro::checkpointer = ...), or name a file: nitro::weights = \"path.safetensors\"");
  return chosen;
}

NITRO_RUNTIME_INLINE std::vector<candidate> choose(std::vector<candidate> all, std::string const& monitor, monitor_mode mode, checkpoint_pick const& pick,
                                     std::string const& where, std::string const& ref) {
  if (all.empty())
    throw error("E-CKPT-023", where + " has no checkpoints yet", "train it with a checkpointer first, or name a file: nitro::weights = \"path.safetensors\"");
  std::vector<candidate> ranked;
  if (pick.best) {
    if (monitor.empty())
      throw error("E-CKPT-026", ref + ": " + where + " has no monitor, so no checkpoint is best",
                  "use Last(n) / nitro::latest, or train with a checkpointer whose .monitor names a metric");
    std::vector<checkpoint_entry> entries;
    for (auto const& c : all) entries.push_back(c.entry);
    for (auto const& e : checkpoint_index::best_of(entries, monitor, mode, -1))
      for (auto const& c : all)
        if (c.entry.seq == e.seq && c.entry.time_ns == e.time_ns && c.entry.file == e.file) { ranked.push_back(c); break; }
    if (ranked.empty())
      throw error("E-CKPT-026", ref + ": no checkpoint of " + where + " recorded the monitor '" + monitor + "'",
                  "use Last(n) / nitro::latest, or evaluate the monitored split before each checkpoint");
  } else {
    ranked = std::move(all);
    // newest first: within one run by write order, across runs by write time
    std::stable_sort(ranked.begin(), ranked.end(), [](auto const& a, auto const& b) {
      if (a.run == b.run) return a.entry.seq > b.entry.seq;
      return a.entry.time_ns != b.entry.time_ns ? a.entry.time_ns > b.entry.time_ns : a.entry.seq > b.entry.seq;
    });
  }
  if (static_cast<std::size_t>(pick.n) > ranked.size())
    throw error("E-CKPT-024", ref + " asks for " + (pick.average ? "the " + std::string(pick.best ? "best " : "latest ") + std::to_string(pick.n) : "checkpoint " + std::to_string(pick.n)) + " but " +
                                  where + " keeps " + std::to_string(ranked.size()) + (pick.best ? " ranked by '" + monitor + "'" : ""),
                "ask for at most " + std::to_string(ranked.size()) + ", or keep more (the checkpointer's keep_last / keep_best)");
  std::vector<candidate> out;
  if (pick.average) {
    out.assign(ranked.begin(), ranked.begin() + pick.n);
    std::stable_sort(out.begin(), out.end(), [](auto const& a, auto const& b) {  // write order
      if (a.run == b.run) return a.entry.seq < b.entry.seq;
      return a.entry.time_ns != b.entry.time_ns ? a.entry.time_ns < b.entry.time_ns : a.entry.seq < b.entry.seq;
    });
  } else {
    out.push_back(ranked[static_cast<std::size_t>(pick.n - 1)]);
  }
  return out;
}

}  // namespace nitro::detail

namespace nitro {

NITRO_RUNTIME_INLINE resolved_weights resolve(weights_ref const& ref, resolve_context const& ctx) {
  resolved_weights out;
  out.reference = ref.to_string();
  if (ref.which() == weights_ref::kind::path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(ref.path(), ec))
      throw error("E-CKPT-001", "weights = " + out.reference + ": " + (std::filesystem::is_directory(ref.path(), ec) ? "it is a directory, not a file" : std::string("no such file")),
                  "pass the path of a .safetensors file, or name a run: nitro::run_id(\"...\") >> nitro::best");
    out.checkpoints.push_back({ref.path(), {}, {}});
    return out;
  }
  using K = run_pick::kind;
  run_pick run = ref.run();
  if (run.k == K::unspecified) {
    if (ctx.bare_is_own) {
      if (ctx.own_run.empty()) throw error("E-CKPT-023", out.reference + " names this run's own checkpoints, but the handle has no run directory", "give the handle a run directory (run_dir) and a checkpointer");
      run = {K::directory, {}, ctx.own_run};
    } else run.k = K::latest;
  }
  std::vector<detail::candidate> all;
  std::string monitor, where;
  monitor_mode mode = monitor_mode::min;
  if (run.k == K::all) {
    auto runs = detail::run_directories(ctx);
    bool first = true;
    for (auto const& r : runs) {
      if (!detail::has_index(r)) continue;
      auto idx = checkpoint_index::load(detail::checkpoints_of(r));
      if (idx.entries.empty()) continue;
      if (ref.pick().best) {
        if (first) { monitor = idx.monitor; mode = idx.mode; first = false; }
        else if (idx.monitor != monitor || idx.mode != mode)
          throw error("E-CKPT-027", out.reference + ": the runs rank by different monitors ('" + monitor + "' " + to_string(mode) + " and '" + idx.monitor + "' " + to_string(idx.mode) + " in " +
                                        r.filename().string() + "), so no checkpoint is best of all",
                      "name one run (nitro::run_id(\"...\") >> nitro::best), or use Last(n)");
      }
      for (auto const& e : idx.entries) all.push_back({r, e});
    }
    where = "no run in '" + ctx.runs_dir.string() + "'";
    if (!all.empty()) where = "the runs of '" + ctx.runs_dir.string() + "'";
  } else {
    const auto dir = detail::find_run(run, ctx);
    where = "run '" + dir.filename().string() + "'";
    if (!detail::has_index(dir))
      throw error("E-CKPT-023", out.reference + ": " + where + " has no checkpoints yet (no " + (detail::checkpoints_of(dir) / checkpoint_index::file_name).string() + ")",
                  "train it with a checkpointer (nitro::checkpointer = ...), or name a file: nitro::weights = \"path.safetensors\"");
    auto idx = checkpoint_index::load(detail::checkpoints_of(dir));
    monitor = idx.monitor;
    mode = idx.mode;
    for (auto const& e : idx.entries) all.push_back({dir, e});
  }
  for (auto const& c : detail::choose(std::move(all), monitor, mode, ref.pick(), where, out.reference)) {
    auto file = detail::checkpoints_of(c.run) / c.entry.file;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec))
      throw error("E-CKPT-029", out.reference + ": the index of run '" + c.run.filename().string() + "' lists " + c.entry.file + ", which is not there",
                  "the checkpoints directory was edited by hand: restore the file, or open the run with a checkpointer to rebuild its index");
    out.checkpoints.push_back({file, c.run, c.entry});
  }
  out.average = ref.pick().average;
  return out;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
