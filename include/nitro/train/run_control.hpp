// nitro/train/run_control.hpp — what the training loop consults between steps.
//
// The handle's loop owns one run_control, made from the resolved run keywords, and calls it at four
// places; everything the run keywords ema, early_stop, monitor, check_divergence,
// log_every_n_steps, autolog_schedules and logger ask for happens there:
//
//   nitro::run_control rc(nitro::run_control_options_from(kw), loggers);
//   auto eta = rc.schedules().declare("eta");          // before begin: the values autolog_schedules logs
//   rc.begin(info, params, n);                          // loggers' on_setup (binding report), EMA buffer
//   for each step:
//     rc.schedules().set(eta, current_eta);             // the optimizer's values for this step
//     if (!rc.after_step(step, epoch, batch, loss, params, samples)) break;   // diverged
//   for each evaluated split:
//     if (!rc.after_eval(step, epoch, "valid", metrics)) stop;               // early stop
//   rc.end();                                           // finished, or stopped / diverged with the reason
//
// after_step checks divergence (NaN/Inf, blow-up over a running baseline), folds the weights into
// the EMA, reports progress to every logger (on_batch) and, every log_every_n_steps steps, the
// mean loss since the last report and each scheduled value (on_step; also a history row).
// after_eval logs the split and feeds the monitor: the early stopper tracks the best value and
// says when patience has run out. Nothing here allocates per step after begin, logged steps
// included: the history reserves its rows for the whole horizon (again after each evaluation).
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/core/error.hpp"
#include "nitro/train/divergence.hpp"
#include "nitro/train/early_stop.hpp"
#include "nitro/train/ema.hpp"
#include "nitro/record/history.hpp"
#include "nitro/train/keywords.hpp"
#include "nitro/record/logger.hpp"
#include "nitro/nn/metrics.hpp"

#include <algorithm>    // max
#include <chrono>       // throughput
#include <cstdint>      // int64_t
#include <string>       // names, reasons
#include <string_view>  // lookups
#include <utility>      // move
#include <vector>       // slots

namespace nitro {

// The scheduled values of the current step, by name: the optimizer (or whatever computes the
// schedules) declares each key once before the run begins, then sets its value every step.
// autolog_schedules logs them; setting a value allocates nothing.
class scheduled_values {
 public:
  std::size_t declare(std::string_view name);
  void set(std::size_t slot, double value) noexcept {
    m_values[slot] = value;
    m_set[slot] = true;
  }
  // By name (no allocation); false when the name was never declared.
  bool set(std::string_view name, double value) noexcept {
    for (std::size_t i = 0; i < m_names.size(); ++i)
      if (m_names[i] == name) { set(i, value); return true; }
    return false;
  }
  std::size_t size() const noexcept { return m_names.size(); }
  std::string const& name(std::size_t i) const noexcept { return m_names[i]; }
  double value(std::size_t i) const noexcept { return m_values[i]; }
  bool has_value(std::size_t i) const noexcept { return m_set[i]; }
  void freeze() noexcept { m_frozen = true; }

 private:
  std::vector<std::string> m_names;
  std::vector<double> m_values;
  std::vector<bool> m_set;
  bool m_frozen = false;
};

struct run_control_options {
  ema_options ema{};
  early_stopping early_stop{};
  monitor_spec monitor{};
  bool monitor_given = false;        // the monitor came from a keyword, accessor or field (not the default)
  divergence_check divergence{};
  int log_every_n_steps = 50;
  bool autolog_schedules = true;
};

// The options as the run keywords resolved them.
template <class E, class... Args>
run_control_options run_control_options_from(run_keywords<E, Args...> const& kw) {
  run_control_options o;
  o.ema = kw.ema.value;
  o.early_stop = kw.early_stop.value;
  o.monitor = kw.monitor.value;
  o.monitor_given = kw.monitor.source != keyword_source::fallback;
  o.divergence.enabled = kw.check_divergence.value;
  o.log_every_n_steps = kw.log_every_n_steps.value;
  o.autolog_schedules = kw.autolog_schedules.value;
  return o;
}

class run_control {
 public:
  run_control() = default;
  run_control(run_control_options opt, logger_set loggers);

  scheduled_values& schedules() noexcept { return m_schedules; }
  // Values logged with every logged step whatever autolog_schedules says (the diagnostics keyword's
  // gradient and parameter norms): declared before begin, set before after_step.
  scheduled_values& extras() noexcept { return m_extras; }
  logger_set& loggers() noexcept { return m_loggers; }
  run_control_options const& options() const noexcept { return m_opt; }

  // The run begins: loggers receive the run's description; the EMA starts from `params`.
  void begin(run_info info, float const* params, std::int64_t n_params);

  // After optimizer step `step` (1-based) of epoch `epoch` (1-based), batch `batch` of the epoch
  // (1-based). False when the run must stop: the loss diverged (status diverged; the weights
  // after this step are not folded into the EMA).
  bool after_step(std::int64_t step, int epoch, std::int64_t batch, double loss, float const* params, std::int64_t samples);

  // After evaluating `split` at step `step`. False when early stopping ends the run (status
  // stopped). The monitored metric must be among the split's metrics when early stopping is on or
  // the monitor was named explicitly (E-METRIC-001 otherwise names what the split has).
  bool after_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m);

  // Logs an evaluation that is no part of the training's decisions (a test split after the run):
  // loggers and history, but not the monitor.
  void record_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m);

  // Ends the run at the next check as `stopped` with `reason` (a stop requested from outside: Ctrl-C).
  void request_stop(std::string reason);

  // Will after_step(step, ...) log a row? (The loop computes costly extras only then.)
  bool logs_step(std::int64_t step) const noexcept { return step % m_opt.log_every_n_steps == 0; }

  // The run ends: finished, unless it diverged or stopped early. Loggers receive the status.
  void end() { end(m_status == run_status::running ? run_status::finished : m_status, m_reason); }
  // Ends with a given status (failed, with the error's text).
  void end(run_status status, std::string reason);

  bool begun() const noexcept { return m_begun; }
  bool ended() const noexcept { return m_ended; }
  bool should_stop() const noexcept { return m_status == run_status::diverged || m_status == run_status::stopped; }
  run_status status() const noexcept { return m_status; }
  std::string const& reason() const noexcept { return m_reason; }
  bool last_eval_improved() const noexcept { return m_last_improved; }

  ema_weights& ema() noexcept { return m_ema; }
  ema_weights const& ema() const noexcept { return m_ema; }
  early_stopper const& monitor() const noexcept { return m_stopper; }
  early_stopper& monitor() noexcept { return m_stopper; }  // a resume restores its best and patience
  divergence_detector const& divergence() const noexcept { return m_divergence; }
  run_history const& history() const noexcept { return m_history; }
  run_info const& info() const noexcept { return m_info; }

 private:
  void require_begun(char const* what) const;
  // Room in the history for every row the remaining steps will log (evaluations add their rows
  // outside the steps, and reserve again after).
  void reserve_history();
  void log_step(std::int64_t step, int epoch);
  // An evaluation to the loggers and the history (both after_eval and record_eval).
  void log_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m);

  // At most this many logged rows are reserved ahead; a longer run's table grows (amortised) once
  // per that many logged steps.
  static constexpr std::int64_t max_reserved_rows = 1 << 16;
  run_control_options m_opt{};
  logger_set m_loggers;
  scheduled_values m_schedules;
  scheduled_values m_extras;
  ema_weights m_ema;
  divergence_detector m_divergence;
  early_stopper m_stopper;
  run_history m_history;
  run_info m_info;
  std::vector<std::string> m_names;  // the step row's names; m_row views them
  std::vector<scalar> m_row;
  std::chrono::steady_clock::time_point m_started{};
  std::int64_t m_samples = 0;
  double m_window_sum = 0;
  std::int64_t m_window_n = 0;
  std::int64_t m_last_step = 0, m_last_logged = 0;
  int m_last_epoch = 0;
  run_status m_status = run_status::running;
  std::string m_reason;
  bool m_begun = false, m_ended = false, m_last_improved = false;
};

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE std::size_t scheduled_values::declare(std::string_view name) {
  for (std::size_t i = 0; i < m_names.size(); ++i)
    if (m_names[i] == name) return i;
  if (m_frozen)
    throw error("E-LOG-003", "the scheduled value '" + std::string(name) + "' was declared after the run began",
                "declare every scheduled value (run_control::schedules().declare) before run_control::begin");
  m_names.emplace_back(name);
  m_values.push_back(0.0);
  m_set.push_back(false);
  return m_names.size() - 1;
}

NITRO_RUNTIME_INLINE run_control::run_control(run_control_options opt, logger_set loggers) : m_opt(std::move(opt)), m_loggers(std::move(loggers)), m_divergence(m_opt.divergence), m_stopper(m_opt.early_stop, m_opt.monitor) {
  m_opt.ema.validate();
  if (m_opt.log_every_n_steps < 1)
    throw error("E-KW-007", "the run keyword log_every_n_steps is " + std::to_string(m_opt.log_every_n_steps), "use 1 or more steps");
}

NITRO_RUNTIME_INLINE void run_control::begin(run_info info, float const* params, std::int64_t n_params) {
  m_info = std::move(info);
  m_info.log_every_n_steps = m_opt.log_every_n_steps;
  m_schedules.freeze();
  m_extras.freeze();
  if (m_opt.ema.enabled()) m_ema = ema_weights(m_opt.ema, params, n_params);
  m_names.clear();
  m_names.push_back("loss");
  if (m_opt.autolog_schedules)
    for (std::size_t i = 0; i < m_schedules.size(); ++i) m_names.push_back(m_schedules.name(i));
  for (std::size_t i = 0; i < m_extras.size(); ++i) m_names.push_back(m_extras.name(i));
  m_row.clear();
  for (auto const& n : m_names) m_row.push_back({n, 0.0});
  reserve_history();
  m_status = run_status::running;
  m_reason.clear();
  m_started = std::chrono::steady_clock::now();
  m_samples = 0;
  m_window_sum = 0;
  m_window_n = 0;
  m_begun = true;
  m_loggers.on_setup(m_info);
}

NITRO_RUNTIME_INLINE bool run_control::after_step(std::int64_t step, int epoch, std::int64_t batch, double loss, float const* params, std::int64_t samples) {
  require_begun("after_step");
  m_samples += samples;
  m_last_step = step;
  m_last_epoch = epoch;
  const bool diverged = m_opt.divergence.enabled && m_divergence.check(loss, step);
  if (!diverged && m_ema.enabled()) m_ema.update(params, step);
  m_window_sum += loss;
  ++m_window_n;

  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count();
  step_progress p;
  p.step = step;
  p.total_steps = m_info.total_steps;
  p.epoch = epoch;
  p.max_epochs = m_info.max_epochs;
  p.batch = batch;
  p.steps_per_epoch = m_info.steps_per_epoch;
  p.loss = loss;
  p.elapsed_seconds = elapsed;
  p.samples_per_second = elapsed > 0 ? double(m_samples) / elapsed : 0.0;
  const std::int64_t done = step - m_info.start_step;
  p.eta_seconds = (done > 0 && m_info.total_steps > step) ? elapsed / double(done) * double(m_info.total_steps - step) : 0.0;
  m_loggers.on_batch(p);

  if (diverged || step % m_opt.log_every_n_steps == 0) log_step(step, epoch);
  if (diverged) {
    m_status = run_status::diverged;
    m_reason = m_divergence.reason();
    return false;
  }
  return true;
}

NITRO_RUNTIME_INLINE bool run_control::after_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m) {
  require_begun("after_eval");
  log_eval(step, epoch, split, m);
  if (split != m_opt.monitor.split()) return true;
  const std::string name = m_opt.monitor.name();
  if (!m.has(name)) {
    if (m_stopper.enabled() || m_opt.monitor_given) (void)m.at(name);  // E-METRIC-001, naming the metrics there are
    return true;
  }
  auto v = m_stopper.update(m.at(name), step);
  m_last_improved = v.improved;
  if (v.stop) {
    m_status = run_status::stopped;
    m_reason = m_stopper.reason();
    return false;
  }
  return true;
}

NITRO_RUNTIME_INLINE void run_control::record_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m) {
  require_begun("record_eval");
  log_eval(step, epoch, split, m);
}

NITRO_RUNTIME_INLINE void run_control::log_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m) {
  m_loggers.on_eval(step, epoch, split, m);
  m_history.add(step, epoch, split, m);
  reserve_history();
}

NITRO_RUNTIME_INLINE void run_control::request_stop(std::string reason) {
  if (m_status != run_status::running) return;
  m_status = run_status::stopped;
  m_reason = std::move(reason);
}

NITRO_RUNTIME_INLINE void run_control::require_begun(char const* what) const {
  if (!m_begun)
    throw error("E-LOG-003", std::string("run_control::") + what + " before run_control::begin", "call begin once the run's description is known");
}

NITRO_RUNTIME_INLINE void run_control::reserve_history() {
  const std::int64_t left = m_info.total_steps - std::max(m_last_step, m_info.start_step);
  const std::int64_t rows = std::min<std::int64_t>(left > 0 ? left / m_opt.log_every_n_steps + 2 : 2, max_reserved_rows);
  m_history.reserve(static_cast<std::size_t>(rows), std::max(m_history.columns().size(), m_row.size()));
}

NITRO_RUNTIME_INLINE void run_control::log_step(std::int64_t step, int epoch) {
  m_row[0].value = m_window_n > 0 ? m_window_sum / double(m_window_n) : 0.0;
  std::size_t at = 1;
  if (m_opt.autolog_schedules)
    for (std::size_t i = 0; i < m_schedules.size(); ++i) m_row[at++].value = m_schedules.value(i);
  for (std::size_t i = 0; i < m_extras.size(); ++i) m_row[at++].value = m_extras.value(i);
  m_window_sum = 0;
  m_window_n = 0;
  m_last_logged = step;
  const scalars row(m_row.data(), m_row.size());
  m_loggers.on_step(step, epoch, row);
  m_history.add(step, epoch, "train", row);
}

NITRO_RUNTIME_INLINE void run_control::end(run_status status, std::string reason) {
  if (m_ended) return;
  if (m_window_n > 0 && m_last_step > 0 && m_last_logged != m_last_step) log_step(m_last_step, m_last_epoch);
  m_status = status;
  m_reason = std::move(reason);
  m_ended = true;
  m_loggers.on_end(m_status, m_reason);
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
