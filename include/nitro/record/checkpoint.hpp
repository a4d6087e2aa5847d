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
// What a file holds is record/checkpoint_file.hpp, the policy and the index record/checkpoint_index.hpp;
// this header is the checkpointer that writes and prunes them, and averaging.
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

#include "nitro/core/runtime.hpp"
#include "nitro/record/checkpoint_file.hpp"
#include "nitro/record/checkpoint_index.hpp"
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

// ---- the checkpointer ------------------------------------------------------------------------------
class checkpointer {
 public:
  // Opens (creating it if needed) a run's checkpoints directory. An existing index is read; a
  // checkpoint written after the index's last update is adopted; leftovers are removed.
  checkpointer(std::filesystem::path dir, checkpoint_policy policy);

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
  checkpoint_entry save(safetensors_writer& w, checkpoint_info info);

 private:
  std::vector<checkpoint_entry> retained() const;
  // Index first (atomically), then the files it no longer lists.
  void commit_index();
  // Checkpoint files the index does not list: adopt one written after the index's last update
  // (the process died between the two writes), remove the rest (pruned before a crash).
  void recover();

  std::filesystem::path m_dir;
  checkpoint_policy m_policy;
  checkpoint_index m_index;
};

// ---- averaging -------------------------------------------------------------------------------------
// The mean of several checkpoints' floating tensors under `prefixes` (params., state., ema.),
// computed in double in the order given and rounded to each tensor's dtype. Every file must hold
// the same tensors (names, dtypes, shapes) under those prefixes; integer tensors must be equal in
// all. The result is an in-memory, validated safetensors_file ("format" = "nitro.average").
NITRO_RUNTIME_INLINE safetensors_file average_checkpoints(std::vector<std::filesystem::path> const& files,
                                                          std::vector<std::string> const& prefixes = {"params.", "state.", "ema."});

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE checkpointer::checkpointer(std::filesystem::path dir, checkpoint_policy policy) : m_dir(std::move(dir)), m_policy(std::move(policy)) {
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

NITRO_RUNTIME_INLINE checkpoint_entry checkpointer::save(safetensors_writer& w, checkpoint_info info) {
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

NITRO_RUNTIME_INLINE std::vector<checkpoint_entry> checkpointer::retained() const {
  std::set<std::int64_t> keep;
  for (auto const& e : m_index.last(m_policy.keep_last)) keep.insert(e.seq);
  if (m_policy.keep_best != 0)
    for (auto const& e : m_index.best(m_policy.keep_best)) keep.insert(e.seq);
  std::vector<checkpoint_entry> r;
  for (auto const& e : m_index.entries)
    if (keep.count(e.seq)) r.push_back(e);
  return r;
}

NITRO_RUNTIME_INLINE void checkpointer::commit_index() {
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

NITRO_RUNTIME_INLINE void checkpointer::recover() {
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

NITRO_RUNTIME_INLINE safetensors_file average_checkpoints(std::vector<std::filesystem::path> const& files, std::vector<std::string> const& prefixes) {
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
#endif  // !NITRO_RUNTIME_EXTERN
