// nitro/train/divergence.hpp — noticing that a run has diverged.
//
//   nitro::Nitro h(e, nitro::check_divergence = false);                                   // off
//   nitro::Nitro h(e, nitro::check_divergence = nitro::divergence_check{.blowup = 20});   // stricter
//
// A step's loss diverges when it is NaN or infinite, or — once `warmup_steps` finite losses have
// set a baseline — when it exceeds `blowup` times the baseline: an exponential moving average of
// the finite losses so far (beta `baseline_beta`, bias-corrected as Adam's moments are). A
// diverged loss does not enter the baseline. The blow-up test applies while the baseline is
// positive (a loss that can go negative is checked for NaN/Inf only). The run then ends with the
// status `diverged`; its last good checkpoint is kept.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/core/error.hpp"

#include <cmath>    // isfinite, pow
#include <cstdint>  // int64_t
#include <cstdio>   // snprintf
#include <string>   // reason
#include <utility>  // move

namespace nitro {

struct divergence_check {
  bool enabled = true;
  double blowup = 100.0;       // loss > blowup * baseline diverges; 0 turns the blow-up test off
  int warmup_steps = 20;       // finite losses seen before the blow-up test starts
  double baseline_beta = 0.98; // the baseline's moving-average coefficient

  explicit operator bool() const noexcept { return enabled; }
  void validate() const;
  std::string describe() const;
};

class divergence_detector {
 public:
  divergence_detector() = default;
  explicit divergence_detector(divergence_check opt) : m_opt(opt) { m_opt.validate(); }

  // The loss of step `step`; true when it diverges (the first time it does, the reason is kept).
  bool check(double loss, std::int64_t step);

  // The bias-corrected moving average of the finite losses seen (0 before any).
  double baseline() const noexcept {
    if (m_seen == 0) return 0.0;
    return m_ema / (1.0 - std::pow(m_opt.baseline_beta, double(m_seen)));
  }
  bool diverged() const noexcept { return m_diverged; }
  std::int64_t diverged_at() const noexcept { return m_step; }
  std::string const& reason() const noexcept { return m_reason; }
  divergence_check const& options() const noexcept { return m_opt; }

 private:
  void diverge(std::int64_t step, std::string reason);
  divergence_check m_opt{};
  double m_ema = 0.0;
  std::int64_t m_seen = 0;
  bool m_diverged = false;
  std::int64_t m_step = -1;
  std::string m_reason;
};

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE void divergence_check::validate() const {
  if (blowup != 0.0 && !(blowup > 1.0))
    throw error("E-DIVERGE-001", "check_divergence blowup " + std::to_string(blowup) + " is not above 1",
                "use a factor above 1 (such as 100), or 0 to check for NaN/Inf only");
  if (warmup_steps < 0) throw error("E-DIVERGE-001", "check_divergence warmup_steps is negative", "use 0 or more steps");
  if (!(baseline_beta >= 0.0 && baseline_beta < 1.0))
    throw error("E-DIVERGE-001", "check_divergence baseline_beta " + std::to_string(baseline_beta) + " is outside [0, 1)",
                "use a coefficient such as 0.98");
}

NITRO_RUNTIME_INLINE std::string divergence_check::describe() const {
  if (!enabled) return "off";
  if (blowup == 0.0) return "nan/inf";
  char buf[96];
  std::snprintf(buf, sizeof buf, "nan/inf, blowup=%g over %d steps", blowup, warmup_steps);
  return buf;
}

NITRO_RUNTIME_INLINE bool divergence_detector::check(double loss, std::int64_t step) {
  if (!m_opt.enabled) return false;
  if (!std::isfinite(loss)) {
    diverge(step, std::string("the loss is ") + (std::isnan(loss) ? "NaN" : (loss > 0 ? "+Inf" : "-Inf")) + " at step " +
                      std::to_string(step));
    return true;
  }
  const double base = baseline();
  if (m_opt.blowup > 0.0 && m_seen >= m_opt.warmup_steps && m_seen > 0 && base > 0.0 && loss > m_opt.blowup * base) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "the loss %.6g at step %lld is more than %g times its running baseline %.6g", loss,
                  static_cast<long long>(step), m_opt.blowup, base);
    diverge(step, buf);
    return true;
  }
  m_ema = m_opt.baseline_beta * m_ema + (1.0 - m_opt.baseline_beta) * loss;
  ++m_seen;
  return false;
}

NITRO_RUNTIME_INLINE void divergence_detector::diverge(std::int64_t step, std::string reason) {
  if (m_diverged) return;
  m_diverged = true;
  m_step = step;
  m_reason = std::move(reason);
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
