// nitro/train/checkpointing.hpp — the handle's records of where a run is: its run directory, the
// checkpoints it writes, and what it reads before its first step (weights, resume, an EMA).
//
// A checkpoint (record/checkpoint.hpp) holds everything the next step depends on: parameters and
// model state, the optimizer's state (moments, step count, SAM's buffers, the w0 anchor), the EMA,
// the position (epoch, batch in the epoch, step), seed and batch size, and the valid metrics of its
// own step (which rank it for keep_best). A run resumed from one continues bit for bit. Only rank 0
// of a data-parallel job writes; every rank reads the same file. Every file is written atomically
// (record/atomic_file.hpp): a crash leaves the previous checkpoint and index loadable.
#pragma once

#include "nitro/dist/shard.hpp"
#include "nitro/record/checkpoint.hpp"
#include "nitro/record/run_lock.hpp"
#include "nitro/record/run_reference.hpp"
#include "nitro/record/weights_ref.hpp"
#include "nitro/record/weights_resolve.hpp"
#include "nitro/train/handle_state.hpp"

#include <algorithm>    // any_of
#include <cstdint>      // int64_t
#include <filesystem>   // the run directory
#include <optional>     // a policy given or not
#include <string>       // keypaths
#include <system_error> // create_directories

namespace nitro::detail::handle_ckpt {

// The checkpointer keyword's policy, when it gives one (a policy, or a non-empty optional of one).
template <class S>
std::optional<checkpoint_policy> checkpoint_policy_of(S const& s) {
  using CK = std::remove_cvref_t<decltype(s.m_kw.checkpointer.value)>;
  if constexpr (std::is_same_v<CK, checkpoint_policy>) return s.m_kw.checkpointer.value;
  else if constexpr (std::is_same_v<CK, std::optional<checkpoint_policy>>) return s.m_kw.checkpointer.value;
  else if constexpr (std::is_same_v<CK, framework_default>) return std::nullopt;
  else {
    (void)checkpointer_must_be_a_policy<CK>::ok;
    return std::nullopt;
  }
}
template <class S>
bool checkpoint_policy_given(S const& s) { return checkpoint_policy_of(s).has_value(); }
// The policy the checkpointer keeps: its monitor defaults to the run's monitor keyword.
template <class S>
std::optional<checkpoint_policy> checkpoint_policy_kept(S const& s) {
  auto p = checkpoint_policy_of(s);
  if (p && p->monitor.empty()) {
    p->monitor = s.m_kw.monitor.value.qualified();
    p->mode = s.m_kw.monitor.value.mode;
  }
  return p;
}

// run_ref, else (with a checkpointer) a new <run_dir>/<experiment>-<time>-<id>, else no record.
// Nothing is created here: a handle that only evaluates, predicts or is checked (the command
// line's `check` and `eval`) writes nothing. open_record() makes the folder when the run first writes.
template <class S>
void setup_run_directory(S& s) {
  using RR = std::remove_cvref_t<decltype(s.m_kw.run_ref.value)>;
  std::optional<run_reference> ref;
  if constexpr (!std::is_same_v<RR, not_given>) ref = to_run_reference(s.m_kw.run_ref.value, s.m_kw.run_dir.value);
  if (ref) {
    s.m_run_dir = ref->dir;
    s.m_metadata_json = ref->metadata_json.empty() ? std::string("{}") : ref->metadata_json;
  }
  s.m_new_record = !ref && checkpoint_policy_given(s);  // named when it opens
}

// The record opens when the run first writes (train() on every rank, save_checkpoint() on rank 0):
// the run directory (a new one is named and made now; a data-parallel job's ranks take rank 0's)
// and the checkpointer in it. Called again, it does nothing new.
template <class S>
void open_record(S& s, bool collective) {
  if (s.writes_records()) {
    if (s.m_new_record && s.m_run_dir.empty())
      s.m_run_dir = detail::make_run_directory(s.m_kw.run_dir.value, detail::run_stem(program_key<typename S::experiment_type>()));
    std::error_code ec;
    if (!s.m_run_dir.empty()) std::filesystem::create_directories(s.m_run_dir, ec);
    if (ec)
      throw error("E-REC-004", "cannot create the run directory '" + s.m_run_dir.string() + "' (" + ec.message() + ")",
                  "pass a writable run_dir or run_ref");
    if (!s.m_run_dir.empty() && !s.m_run_lock.held()) s.m_run_lock = run_lock(s.m_run_dir);  // E-REC-009: another process writes it
  }
  if (collective && s.m_dist && s.m_new_record) {  // rank 0's new directory is every rank's (restore_best reads its checkpoints)
    std::string d = s.m_run_dir.string();
    dist::broadcast_string(*s.m_dist, d, "the run directory");
    s.m_run_dir = d;
  }
  if (s.m_ckpt || !s.writes_records()) return;  // rank 0 writes the checkpoints
  if (auto policy = checkpoint_policy_kept(s)) s.m_ckpt.emplace(s.m_run_dir / "checkpoints", std::move(*policy));
}

// An EMA in the file (ema.<keypath>) is kept for the run's EMA when load_ema (default true).
// Given explicitly as true, a file without one is an error; by default it is simply absent.
template <class S>
void take_ema(S& s, safetensors_file const& file) {
  if (!s.m_kw.load_ema.value) return;
  const bool has = std::any_of(file.entries().begin(), file.entries().end(), [](auto const& e) { return e.name.rfind("ema.", 0) == 0; });
  if (!has) {
    if constexpr (!S::param_store_type::leaves.empty())
      if (s.m_kw.load_ema.source == keyword_source::keyword) (void)file.at("ema." + std::string(S::param_store_type::leaves[0].keypath));  // E-CKPT-011
    return;
  }
  typename S::param_store_type ema(false);
  load_store(file, "ema.", ema);
  s.m_loaded_ema.assign(ema.values(), ema.values() + S::param_store_type::size);
}

// Everything the next step depends on, from one checkpoint.
template <class S>
void resume_from(S& s, resume_ref const& ref) {
  const resolved_weights found = resolve(ref, s.checkpoint_context(false));
  for (auto const& c : found.checkpoints)  // a run another process still writes would fork under it
    if (!c.run.empty()) require_not_being_written(c.run, "resume from");  // E-REC-009
  safetensors_file file = load_for_resume(found, ref, s.m_resume_skipped);
  const checkpoint_info info = read_checkpoint_info(file);  // E-CKPT-015: not a nitro checkpoint
  const resume_point at = resume_point_of(info, s.m_kw.seed.value, s.m_kw.batch_size.value, file.source());  // E-CKPT-030
  load_store(file, "params.", s.m_params);
  load_store(file, "state.", s.m_state);
  if (s.m_kw.restore_optimizer.value)  // false: the optimizer and its schedules restart
    s.m_opt->load_state(read_named(file, s.m_opt->state_tensors(), "optim."));
  s.m_epoch = static_cast<int>(at.epoch);
  s.m_epoch_batch = at.batch_in_epoch;
  for (auto const& [key, v] : info.metrics)
    if (key.rfind("valid.", 0) == 0) s.m_last_valid.scalars[key.substr(6)] = v;
  if (!info.metrics.empty()) s.m_valid_step = info.step;
  take_ema(s, file);
  if (info.extra.contains("ema_updates")) s.m_loaded_ema_updates = info.extra["ema_updates"].get<std::int64_t>();
  if (info.extra.contains("monitor_best_step"))
    s.m_loaded_monitor = typename S::monitor_state{info.extra["monitor_best"].is_number() ? info.extra["monitor_best"].get<double>() : s.m_kw.monitor.value.worst(),
                                     info.extra["monitor_best_step"].get<std::int64_t>(), info.extra["monitor_wait"].get<int>()};
}

// The weights the run starts from, then a resume: what the handle reads before its first step.
template <class S>
void setup(S& s) {
  if (auto policy = checkpoint_policy_kept(s)) policy->validate();  // a bad policy is refused at construction, before the record opens
  // weights (or `checkpoint = ...`, its deprecated spelling: W-CKPT-001)
  using W = std::remove_cvref_t<decltype(s.m_kw.weights.value)>;
  if constexpr (!std::is_same_v<W, not_given>) {
    std::optional<weights_ref> ref;
    if constexpr (detail::is_optional_v<W>) {
      if (s.m_kw.weights.value) ref = to_weights_ref(*s.m_kw.weights.value);
    } else {
      ref = to_weights_ref(s.m_kw.weights.value);  // E-CKPT-102 when it names nothing
    }
    if (ref) {
      if (s.m_kw.checkpoint_spelling) ref = weights_ref::deprecated_checkpoint(std::move(*ref));
      safetensors_file file = resolve(*ref, s.checkpoint_context(false)).load();  // one file, or the average
      load_model(file, s.m_params, s.m_state);                                      // params./state. or a foreign file's keypaths
      take_ema(s, file);
      using W0 = std::remove_cvref_t<decltype(s.m_kw.w0.value)>;
      if constexpr (is_weights_keyword_v<W0>) s.m_opt->capture_w0();  // w0 = nitro::weights
    }
  }
  // resume: everything the next step depends on
  using R = std::remove_cvref_t<decltype(s.m_kw.resume.value)>;
  if constexpr (detail::is_optional_v<R>) {
    if (s.m_kw.resume.value) resume_from(s, to_resume_ref(*s.m_kw.resume.value));  // an empty optional: a fresh start
  } else if constexpr (!std::is_same_v<R, not_given>) {
    resume_from(s, to_resume_ref(s.m_kw.resume.value));
  }
}

// A checkpoint of where the run is: parameters, state, optimizer state, the EMA, the position and
// the metrics of its own step.
template <class S>
void write(S& s) {
  if (!s.m_ckpt) return;  // a rank other than 0
  safetensors_writer w;  // holds pointers: everything below stays alive until save()
  add_store(w, "params.", s.m_params);
  add_store(w, "state.", s.m_state);
  auto opt = s.m_opt->state_tensors();  // views of the program's buffers
  add_named(w, opt);
  const bool ema = s.m_run.begun() && s.m_run.ema().enabled();
  if (ema)
    for (auto const& li : S::param_store_type::leaves) w.add("ema." + std::string(li.keypath), s.m_run.ema().values() + li.offset, li.shape());
  // the position: a checkpoint after an epoch's last batch starts the next epoch
  const bool epoch_done = s.m_used_batches > 0 && s.m_epoch_batch >= s.m_used_batches;
  checkpoint_info info{.step = s.step(),
                       .epoch = epoch_done ? s.m_epoch + 1 : s.m_epoch,
                       .batch_in_epoch = epoch_done ? 0 : s.m_epoch_batch,
                       .seed = s.m_kw.seed.value,
                       .batch_size = s.m_kw.batch_size.value};
  if (s.m_valid_step == s.step())  // metrics rank a checkpoint only when they are its own step's
    for (auto const& [key, v] : s.m_last_valid.scalars) info.metrics["valid." + key] = v;
  checkpoint_notes notes;
  notes.metadata_json = s.m_metadata_json;
  notes.program = program_key<typename S::experiment_type>();
  for (auto const& g : s.m_opt->group_infos()) notes.groups.push_back({g.name, g.rule, g.anchor, g.leaves, g.params});
  if (ema) notes.ema_updates = s.m_run.ema().updates();
  if (s.m_run.begun() && s.m_run.monitor().best_step() >= 0)
    notes.monitor = checkpoint_notes::monitor_state{s.m_run.monitor().best(), s.m_run.monitor().best_step(), s.m_run.monitor().wait()};
  note_checkpoint(info, notes);
  s.m_ckpt->save(w, std::move(info));  // file, then index, then pruning; all atomic
}

// A checkpoint now, whatever the policy says (a user's own loop, a signal handler's aftermath).
template <class S>
void save(S& s) {
  if (!s.writes_records()) return;  // rank 0 writes it
  open_record(s, false);
  if (!s.m_ckpt)
    throw error("E-CKPT-017", "save_checkpoint() on a handle without a checkpointer",
                "pass nitro::kw::checkpointer = nitro::checkpoint_policy{...}");
  if (s.m_micro != 0)
    throw error("E-CKPT-032", "save_checkpoint() in the middle of an accumulated step (" + std::to_string(s.m_micro) + " of " +
                                  std::to_string(s.m_kw.accum.value) + " micro-batches done)",
                "save after a whole optimizer step: when micro_steps() is a multiple of accum");
  write(s);
}

// restore_best: where the handle ends — its own best checkpoint (true), or a reference (a bare
// one names this run: Average(Last(10))).
template <class S>
void restore_best(S& s) {
  using RB = std::remove_cvref_t<decltype(s.m_kw.restore_best.value)>;
  if constexpr (!std::is_same_v<RB, not_given>) {
    if (auto ref = to_restore_ref(s.m_kw.restore_best.value)) {
      safetensors_file file = resolve(*ref, s.checkpoint_context(true)).load();
      load_model(file, s.m_params, s.m_state);
    }
  }
}

}  // namespace nitro::detail::handle_ckpt
