// nitro/train/early_stop.hpp — the monitored metric, and stopping when it stops improving.
//
//   nitro::Nitro h(e, nitro::monitor = nitro::maximize("valid.acc"),
//                     nitro::early_stop = nitro::early_stopping{.patience = 3, .min_delta = 1e-3});
//   nitro::Nitro h(e, nitro::early_stop = 5);   // patience 5 on the default monitor, valid.loss (min)
//
// `monitor_spec` (core/monitor.hpp) names a metric as "split.name" ("acc" alone means "valid.acc") and a direction;
// the checkpointer's "best" and early stopping read the same one. `early_stopper` follows
// PyTorch Lightning's EarlyStopping: an evaluation improves when it beats the best so far by more
// than min_delta (value < best - min_delta when minimising, value > best + min_delta when
// maximising); after `patience` evaluations in a row without improvement the run stops. A
// monitored value that is NaN or infinite stops the run at once (Lightning's check_finite).
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/core/error.hpp"
#include "nitro/core/monitor.hpp"

#include <cmath>        // isfinite
#include <cstdint>      // int64_t
#include <cstdio>       // snprintf
#include <limits>       // infinity
#include <string>       // names, reasons
#include <string_view>  // split/name
#include <utility>      // move

namespace nitro {

struct early_stopping {
  int patience = 0;        // evaluations without improvement before stopping; 0: never stop early
  double min_delta = 0.0;  // the smallest change that counts as an improvement

  bool enabled() const noexcept { return patience > 0; }
  void validate() const;
  std::string describe() const;
};

// Tracks the monitored metric across evaluations: the best value, and whether to stop.
class early_stopper {
 public:
  early_stopper() = default;
  early_stopper(early_stopping opt, monitor_spec monitor);

  struct verdict {
    bool improved = false;  // a new best
    bool stop = false;      // the run should end here
  };

  // One evaluation of the monitored metric at `step`.
  verdict update(double value, std::int64_t step);

  bool enabled() const noexcept { return m_opt.enabled(); }
  monitor_spec const& monitor() const noexcept { return m_monitor; }
  early_stopping const& options() const noexcept { return m_opt; }
  double best() const noexcept { return m_best; }
  std::int64_t best_step() const noexcept { return m_best_step; }  // -1 before the first finite value
  int wait() const noexcept { return m_wait; }
  int evaluations() const noexcept { return m_evaluations; }
  bool stopped() const noexcept { return m_stopped; }
  std::string const& reason() const noexcept { return m_reason; }

  // For a resume: the tracker's state as a checkpoint stores it.
  void restore(double best, std::int64_t best_step, int wait) noexcept {
    m_best = best;
    m_best_step = best_step;
    m_wait = wait;
  }

 private:
  static std::string format(double v);
  early_stopping m_opt{};
  monitor_spec m_monitor{};
  double m_best = std::numeric_limits<double>::infinity();
  std::int64_t m_best_step = -1;
  int m_wait = 0;
  int m_evaluations = 0;
  bool m_stopped = false;
  std::string m_reason;
};

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE void early_stopping::validate() const {
  if (patience < 0)
    throw error("E-STOP-001", "early_stop patience " + std::to_string(patience) + " is negative", "use 0 (off) or a positive patience");
  if (!(min_delta >= 0.0))
    throw error("E-STOP-001", "early_stop min_delta " + std::to_string(min_delta) + " is negative or NaN", "use a min_delta of 0 or more");
}

NITRO_RUNTIME_INLINE std::string early_stopping::describe() const {
  if (!enabled()) return "off";
  char buf[96];
  std::snprintf(buf, sizeof buf, "patience=%d min_delta=%g", patience, min_delta);
  return buf;
}

NITRO_RUNTIME_INLINE early_stopper::early_stopper(early_stopping opt, monitor_spec monitor) : m_opt(opt), m_monitor(std::move(monitor)) {
  m_opt.validate();
  m_best = m_monitor.worst();
}

NITRO_RUNTIME_INLINE early_stopper::verdict early_stopper::update(double value, std::int64_t step) {
  verdict v;
  ++m_evaluations;
  if (!std::isfinite(value)) {
    v.stop = m_opt.enabled();
    if (v.stop) {
      m_stopped = true;
      m_reason = "early stop: " + m_monitor.qualified() + " is " + format(value) + " at step " + std::to_string(step);
    }
    ++m_wait;
    return v;
  }
  if (m_best_step < 0 || m_monitor.improves(value, m_best, m_opt.min_delta)) {
    m_best = value;
    m_best_step = step;
    m_wait = 0;
    v.improved = true;
    return v;
  }
  ++m_wait;
  if (m_opt.enabled() && m_wait >= m_opt.patience) {
    v.stop = true;
    m_stopped = true;
    m_reason = "early stop: " + m_monitor.qualified() + " did not improve on " + format(m_best) + " (step " +
               std::to_string(m_best_step) + ") by more than " + format(m_opt.min_delta) + " for " + std::to_string(m_wait) +
               " evaluations";
  }
  return v;
}

NITRO_RUNTIME_INLINE std::string early_stopper::format(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
