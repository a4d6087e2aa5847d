// nitro/train/loop.hpp — the handle's run: epochs of steps to the horizon, and what happens
// between them.
//
// After each optimizer step the run control (train/run_control.hpp) sees the step's loss —
// divergence, the EMA of the weights, the logged rows for every logger — then, every eval_every
// steps and after each epoch, the valid split is evaluated (feeding early stopping, the monitor and
// the checkpoints' ranking) and the checkpointer writes when its policy says so. A run ends
// finished, stopped (early stop, or asked to by a signal), diverged (the last good checkpoint kept)
// or failed (the façade records the error and rethrows it); restore_best then decides the weights it
// ends with. Under data parallel every rank runs this loop on its shard, and the step's loss and
// the stop are agreed after each step (dist::step_control, dist/gradients.hpp), so all ranks end at
// the same step.
#pragma once

#include "nitro/data/loader.hpp"
#include "nitro/dist/shard.hpp"
#include "nitro/record/atomic_file.hpp"
#include "nitro/record/loggers/defaults.hpp"
#include "nitro/train/checkpointing.hpp"
#include "nitro/train/evaluation.hpp"
#include "nitro/train/handle_state.hpp"
#include "nitro/train/step.hpp"

#include <algorithm>   // copy, max
#include <chrono>      // throughput
#include <cmath>       // sqrt
#include <cstdint>     // int64_t
#include <filesystem>  // the binding report's copy
#include <string>      // texts
#include <utility>     // move
#include <vector>      // summaries

namespace nitro::detail::handle_loop {

// A replica of a data-parallel job: the same run on every rank (E-DIST-007), then rank 0's
// parameters, state, optimizer state and position everywhere (after weights or resume).
template <class S>
void join_replicas(S& s) {
  s.m_reducer.emplace(*s.m_dist, s.m_params);
  s.m_control.emplace(*s.m_dist);
  // Fields assigned one by one: nvcc's host pass (cudafe++) rewrote this as a braced argument wrongly.
  dist::run_fingerprint run;
  run.seed = s.m_kw.seed.value;
  run.global_batch = s.m_kw.batch_size.value;
  run.accum = s.m_kw.accum.value;
  run.parameters = S::param_store_type::size;
  run.train_samples = s.m_data.has("train") ? s.m_data.split("train").size() : 0;
  dist::require_same_run(*s.m_dist, run);
  dist::broadcast_store(*s.m_dist, s.m_params, "the broadcast of rank 0's parameters");
  if constexpr (S::state_store_type::size > 0) dist::broadcast_store(*s.m_dist, s.m_state, "the broadcast of rank 0's model state");
  dist::broadcast_entries(*s.m_dist, s.m_opt->state_tensors(), "the broadcast of rank 0's optimizer state");
  std::int64_t at[2] = {s.m_epoch, s.m_epoch_batch};
  s.m_dist->broadcast(at, sizeof at, "the broadcast of rank 0's position in the epochs");
  s.m_epoch = static_cast<int>(at[0]);
  s.m_epoch_batch = at[1];
}

// The global norms of the gradient (before clipping) and of the weights: the diagnostics keyword.
template <class S>
void note_diagnostics(S& s) {
  double g = 0, p = 0;
  float const* gr = s.m_params.grads();
  float const* w = s.m_params.values();
  for (std::int64_t i = 0; i < S::param_store_type::size; ++i) {
    g += double(gr[i]) * double(gr[i]);
    p += double(w[i]) * double(w[i]);
  }
  // the gradient the update used: the mean over micro-batches (and over the ranks, whose gradients were summed)
  const double scale = 1.0 / double(s.m_kw.accum.value) / double(s.ranks());
  s.m_run.extras().set(s.m_diag_grad, std::sqrt(g) * scale);
  s.m_run.extras().set(s.m_diag_param, std::sqrt(p));
}

// The run begins: loggers (with the binding report), the run control, scheduled values to log,
// and what a weights or resume file brought (the EMA, the monitor's best).
template <class S>
void begin_run(S& s, train_options const& opt, std::int64_t steps_per_epoch, std::int64_t horizon, std::string binding_report) {
  handle_ckpt::open_record(s, true);  // every rank: the record's folder and checkpointer, made on the first write
  run_info info;
  info.experiment = program_key<typename S::experiment_type>();
  info.binding_report = std::move(binding_report);
  info.metadata_json = s.m_metadata_json;
  info.dir = s.m_run_dir;
  info.steps_per_epoch = steps_per_epoch;
  info.total_steps = horizon;
  info.max_epochs = static_cast<int>(steps_per_epoch > 0 ? (horizon + steps_per_epoch - 1) / steps_per_epoch : 0);
  info.batch_size = s.m_kw.batch_size.value;
  info.start_step = s.step();
  if (!s.writes_records()) info.dir.clear();  // only rank 0 writes the record
  if (!info.dir.empty() && !std::filesystem::exists(s.m_run_dir / "binding_report.txt"))
    atomic_write(s.m_run_dir / "binding_report.txt", info.binding_report, "binding report");  // the record's copy (the CLI writes a longer one first)
  logger_set none;  // the other ranks log nothing: rank 0 reports the agreed values
  none.defaults_added();
  s.m_run = run_control(run_control_options_from(s.m_kw),
                      s.writes_records() ? with_default_loggers(to_logger_set(s.m_kw.logger.value), info, opt.console) : std::move(none));
  s.m_sched_slots.clear();
  for (std::size_t i = 0; i < S::optimizer_type::schedule_count; ++i) s.m_sched_slots.push_back(s.m_run.schedules().declare(s.m_opt->schedule_key(i)));
  if (s.m_kw.diagnostics.value) {
    s.m_diag_grad = s.m_run.extras().declare("grad_norm");
    s.m_diag_param = s.m_run.extras().declare("param_norm");
  }
  s.m_run.begin(info, s.m_params.values(), S::param_store_type::size);
  if (!s.m_loaded_ema.empty() && s.m_run.ema().enabled()) {
    std::copy(s.m_loaded_ema.begin(), s.m_loaded_ema.end(), s.m_run.ema().values());
    s.m_run.ema().set_updates(s.m_loaded_ema_updates);
  }
  s.m_loaded_ema = {};
  if (s.m_loaded_monitor) s.m_run.monitor().restore(s.m_loaded_monitor->best, s.m_loaded_monitor->best_step, s.m_loaded_monitor->wait);
}

// One loop for one process and for a rank of a data-parallel job: a shard_loader is a loader that
// reads its rank's columns, so the loop is compiled once per experiment.
template <class S, class Report>
std::vector<epoch_summary> train_loop(S& s, data::loader<typename S::batch_type>& ld, train_options const& opt, Report const& report) {
  auto const& split = s.m_data.split("train");
  const std::int64_t bs = s.m_kw.batch_size.value;
  if (ld.batches_per_epoch() == 0)
    throw error("E-DATA-008",
                "the train split has " + std::to_string(split.size()) + " samples, fewer than one batch of " + std::to_string(bs),
                "use a smaller batch_size or more data");
  const std::int64_t k = s.m_kw.accum.value;
  if (ld.batches_per_epoch() < k)
    throw error("E-OPT-016",
                "an epoch has " + std::to_string(ld.batches_per_epoch()) + " batches of " + std::to_string(bs) +
                    ", fewer than the accum = " + std::to_string(k) + " micro-batches one optimizer step needs",
                "use a smaller accum or batch_size, or more data");
  const std::int64_t used = ld.batches_per_epoch() / k * k;  // the last batches % accum are not used
  s.m_used_batches = used;
  const std::int64_t steps_per_epoch = used / k;
  const std::int64_t horizon = s.m_opt->horizon();
  const bool has_valid = s.m_data.has("valid");
  if (s.m_kw.early_stop.value.enabled()) {  // the monitor must be a split training evaluates: valid (or valid_ema)
    monitor_spec const& m = s.m_kw.monitor.value;
    const bool evaluated = has_valid && (m.split() == "valid" || (m.split() == "valid_ema" && s.m_kw.ema.value.enabled()));
    if (!evaluated)
      throw error("E-STOP-002",
                  "early_stop (from the " + std::string(to_string(s.m_kw.early_stop.source)) + ") watches " + m.qualified() + ", but " +
                      (has_valid ? "training evaluates only the valid split (and valid_ema with an EMA)" : "the data has no valid split"),
                  has_valid ? "monitor a metric of valid, such as nitro::monitor = \"valid.loss\""
                            : "hold out a valid split (fashion_mnist({.valid = 5000}) or --set valid=5000), or leave early_stop at 0");
  }
  if (!s.m_run.begun()) begin_run(s, opt, steps_per_epoch, horizon, report());
  const std::int64_t first_step = s.step();

  std::vector<epoch_summary> summaries;
  bool stop = s.m_run.should_stop();
  for (; !stop && s.step() < horizon; ++s.m_epoch, s.m_epoch_batch = 0) {
    ld.start_epoch(static_cast<std::uint64_t>(s.m_epoch), s.m_epoch_batch);  // a resume starts mid-epoch
    const auto t0 = std::chrono::steady_clock::now();
    std::int64_t batches = s.m_epoch_batch, samples = 0, trained = 0;
    double loss_sum = 0, step_loss = 0;
    while (batches < used && s.step() < horizon) {
      if (s.m_micro == 0 && (s.m_dist ? s.m_agreed_stop : opt.stop && *opt.stop)) {
        s.m_run.request_stop("stop requested (SIGINT or SIGTERM) after step " + std::to_string(s.step()));
        break;
      }
      auto b = ld.next();
      if (!b) break;
      const double loss = handle_step::train(s, *b);
      const std::int64_t n = detail::batch_samples(*b) * s.ranks();  // the global batch's samples
      loss_sum += loss;
      step_loss += loss;
      samples += n;
      ++trained;
      s.m_epoch_batch = ++batches;
      if (s.m_micro != 0) continue;  // mid-accumulation: no optimizer step yet
      if (s.m_dist) {  // every rank: the global batch's loss and the OR of the stop requests
        s.m_control->start(step_loss / double(k), opt.stop && *opt.stop);
        s.m_control->finish();
        const double global = s.m_control->loss() * double(k);
        loss_sum += global - step_loss;
        step_loss = global;
        s.m_agreed_stop = s.m_control->stop();
      }
      for (std::size_t i = 0; i < s.m_sched_slots.size(); ++i) s.m_run.schedules().set(s.m_sched_slots[i], s.m_opt->schedule_value(i));
      if (s.m_kw.diagnostics.value) note_diagnostics(s);  // every step: the run's last, partial window is logged too
      const bool go_on = s.m_run.after_step(s.step(), s.m_epoch + 1, batches / k, step_loss / double(k), s.m_params.values(), n * k);
      step_loss = 0;
      if (!go_on) break;  // diverged: no checkpoint of this step; the last good one stays
      // evaluate first, so a checkpoint of this step is ranked by this step's metrics
      const bool keep_on = !(has_valid && s.m_kw.eval_every.value > 0 && s.step() % s.m_kw.eval_every.value == 0) || handle_eval::valid(s);
      if (s.m_ckpt && s.m_ckpt->due_after_step(s.step())) handle_ckpt::write(s);
      if (!keep_on) break;  // early stop
    }
    stop = s.m_run.should_stop();
    if (batches < used) break;  // the horizon, a stop or a divergence ended the epoch early
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    epoch_summary summary{s.m_epoch + 1, trained ? loss_sum / double(trained) : 0.0, secs > 0 ? double(samples) / secs : 0.0, {}};
    bool go_on = !stop;
    if (has_valid && !stop) {
      if (s.m_valid_step != s.step()) go_on = handle_eval::valid(s);
      summary.valid = s.m_last_valid;
    }
    if (s.m_ckpt && !stop && s.m_ckpt->due_after_epoch(s.m_epoch + 1)) handle_ckpt::write(s);  // position: next epoch, batch 0
    summaries.push_back(std::move(summary));
    if (!go_on) {  // early stop after this epoch
      stop = true;
      ++s.m_epoch;
      s.m_epoch_batch = 0;
      break;
    }
  }
  const bool diverged = s.m_run.status() == run_status::diverged;
  if (!diverged && has_valid && s.step() > first_step && s.m_valid_step != s.step()) (void)handle_eval::valid(s);  // where the run ended
  if (s.m_ckpt && !diverged && s.step() > first_step) {
    auto latest = s.m_ckpt->index().latest();
    if (!latest || latest->step != s.step()) handle_ckpt::write(s);  // the end of the run is always a checkpoint
  }
  if (s.m_dist) s.m_dist->barrier("the end of training (rank 0's last checkpoint written)");  // restore_best reads it
  handle_ckpt::restore_best(s);
  const int epoch_now = std::max(1, s.m_epoch_batch > 0 ? s.m_epoch + 1 : s.m_epoch);
  for (auto const& name : opt.evaluate_after) s.m_run.record_eval(s.step(), epoch_now, name, handle_eval::evaluate(s, name));
  s.m_run.end();
  return summaries;
}

// The run: the train split through its loader (this rank's shard under data parallel), from
// where the handle is to the horizon. `report` makes the binding report the loggers receive.
template <class S, class Report>
std::vector<epoch_summary> train(S& s, train_options const& opt, Report const& report) {
  using batch_type = typename S::batch_type;
  auto const& split = s.m_data.split("train");
  const data::loader_options lo = s.loader_options_for("train");
  if (s.m_dist) {  // this rank's shard of every global batch of the same permutation
    dist::shard_loader<batch_type> ld(split, lo, s.m_dist->rank(), s.m_dist->size());
    return train_loop(s, static_cast<data::loader<batch_type>&>(ld), opt, report);
  }
  data::loader<batch_type> ld(split, lo);
  return train_loop(s, ld, opt, report);
}

}  // namespace nitro::detail::handle_loop
