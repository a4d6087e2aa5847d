// nitro/train/ema.hpp — an exponential moving average of the weights, over one flat buffer.
//
//   nitro::Nitro h(e, nitro::ema = 0.999);                                  // constant decay (timm ModelEmaV2)
//   nitro::Nitro h(e, nitro::ema = nitro::ema_options{.decay = 0.9999, .warmup = true});  // timm ModelEmaV3
//   nitro::Nitro h(e, nitro::ema = nitro::ema_options{.decay = 0.999, .debias = true});   // optax.ema(debias=True)
//
// `ema_options` says how (the run keyword `ema` carries it); `ema_weights` keeps the average: one
// 64-byte-aligned buffer the size of the parameter buffer, allocated once, updated after each
// optimizer step with one pass (ema = d * ema + (1 - d) * w), swapped into the live buffer for an
// evaluation with the averaged weights and swapped back. Nothing here allocates after construction.
//
// The decay of update t (t = 1, 2, ... counts updates after `start_step`):
//   plain    d                                        the average starts as a copy of the weights
//   warmup   min(d, max(min_decay, 1 - (1 + (t-1)/gamma)^-power))   timm ModelEmaV3 (t = 1 copies)
//   debias   d (1 - d^(t-1)) / (1 - d^t)              equals Optax's zero-initialised, debiased ema
// Steps up to `start_step` copy the weights (timm's update_after_step).
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/core/error.hpp"

#include <algorithm>  // min, max, swap_ranges, copy_n
#include <cmath>      // pow
#include <cstdint>    // int64_t
#include <cstdlib>    // aligned_alloc, free
#include <cstdio>     // snprintf for describe()
#include <memory>     // unique_ptr
#include <new>        // bad_alloc
#include <string>     // describe()

namespace nitro {

struct ema_options {
  double decay = 0.0;                // 0: no average; otherwise in (0, 1)
  bool warmup = false;               // timm ModelEmaV3's warmup of the decay
  double warmup_gamma = 1.0;         // timm's defaults
  double warmup_power = 2.0 / 3.0;
  double min_decay = 0.0;
  bool debias = false;               // Optax's bias correction (as a decay schedule; one buffer)
  std::int64_t start_step = 0;       // steps up to this one copy the weights
  int every = 1;                     // update after every `every`-th optimizer step

  bool enabled() const noexcept { return decay > 0.0; }

  // Throws E-EMA-001 when the options cannot describe an average.
  void validate() const;

  // The decay of update t (1-based), as in the header comment.
  double decay_at(std::int64_t t) const noexcept {
    if (t <= 0) return 0.0;
    if (warmup) {
      const double w = 1.0 - std::pow(1.0 + double(t - 1) / warmup_gamma, -warmup_power);
      return std::max(std::min(w, decay), min_decay);
    }
    if (debias) return decay * (1.0 - std::pow(decay, double(t - 1))) / (1.0 - std::pow(decay, double(t)));
    return decay;
  }

  std::string describe() const;
};

// The average itself.
class ema_weights {
 public:
  ema_weights() = default;
  // Allocates the buffer and starts it as a copy of `params` (n floats).
  ema_weights(ema_options opt, float const* params, std::int64_t n);

  bool enabled() const noexcept { return m_values != nullptr && m_opt.enabled(); }
  ema_options const& options() const noexcept { return m_opt; }

  // After optimizer step `step` (1-based): folds the weights into the average when due.
  // Returns whether it did.
  bool update(float const* params, std::int64_t step) noexcept;

  // Exchanges the average with the live weights (call again to swap back): an evaluation with the
  // averaged weights costs two passes and no memory.
  void swap_with(float* params) noexcept {
    if (m_values) std::swap_ranges(params, params + m_n, m_values.get());
  }
  // Copies the average into `params` (restore the averaged weights for good).
  void copy_to(float* params) const noexcept {
    if (m_values) std::copy_n(m_values.get(), m_n, params);
  }

  float const* values() const noexcept { return m_values.get(); }
  float* values() noexcept { return m_values.get(); }
  std::int64_t size() const noexcept { return m_n; }
  std::int64_t updates() const noexcept { return m_updates; }
  double last_decay() const noexcept { return m_last_decay; }
  // For a resume: the update count the buffer corresponds to.
  void set_updates(std::int64_t t) noexcept { m_updates = t; }

 private:
  struct free_deleter { void operator()(float* p) const noexcept { std::free(p); } };
  ema_options m_opt{};
  std::int64_t m_n = 0;
  std::unique_ptr<float, free_deleter> m_values;
  std::int64_t m_updates = 0;
  double m_last_decay = 0.0;
};

// Evaluates with the averaged weights for the lifetime of the scope, then swaps back.
class ema_scope {
 public:
  ema_scope(ema_weights& ema, float* params) noexcept : m_ema(&ema), m_params(params) { m_ema->swap_with(m_params); }
  ~ema_scope() { m_ema->swap_with(m_params); }
  ema_scope(ema_scope const&) = delete;
  ema_scope& operator=(ema_scope const&) = delete;

 private:
  ema_weights* m_ema;
  float* m_params;
};

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE void ema_options::validate() const {
  if (decay < 0.0 || decay >= 1.0)
    throw error("E-EMA-001", "ema decay " + std::to_string(decay) + " is outside [0, 1)",
                "use a decay such as 0.999 (0 turns the average off)");
  if (every < 1) throw error("E-EMA-001", "ema every = " + std::to_string(every) + " is not positive", "update every 1 or more steps");
  if (warmup && debias)
    throw error("E-EMA-001", "ema warmup and debias are both on; each is a schedule of the decay", "choose one of them");
  if (warmup && (warmup_gamma <= 0.0 || warmup_power <= 0.0))
    throw error("E-EMA-001", "ema warmup_gamma and warmup_power must be positive", "keep timm's defaults (1 and 2/3)");
  if (start_step < 0) throw error("E-EMA-001", "ema start_step is negative", "start at step 0 or later");
}

NITRO_RUNTIME_INLINE std::string ema_options::describe() const {
  if (!enabled()) return "off";
  char buf[160];
  std::snprintf(buf, sizeof buf, "decay=%g%s%s", decay, warmup ? " warmup" : "", debias ? " debias" : "");
  std::string s = buf;
  if (start_step > 0) s += " start_step=" + std::to_string(start_step);
  if (every > 1) s += " every=" + std::to_string(every);
  return s;
}

NITRO_RUNTIME_INLINE ema_weights::ema_weights(ema_options opt, float const* params, std::int64_t n) : m_opt(opt), m_n(n) {
  opt.validate();
  const std::size_t bytes = ((static_cast<std::size_t>(n > 0 ? n : 1) * sizeof(float) + 63) / 64) * 64;
  m_values.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
  if (!m_values) throw std::bad_alloc();
  if (n > 0) std::copy_n(params, n, m_values.get());
}

NITRO_RUNTIME_INLINE bool ema_weights::update(float const* params, std::int64_t step) noexcept {
  if (!enabled()) return false;
  if (step <= m_opt.start_step) {  // before the average starts: follow the weights
    std::copy_n(params, m_n, m_values.get());
    m_last_decay = 0.0;
    return true;
  }
  if ((step - m_opt.start_step) % m_opt.every != 0) return false;
  ++m_updates;
  const double d = m_opt.decay_at(m_updates);
  m_last_decay = d;
  const float a = static_cast<float>(d), b = static_cast<float>(1.0 - d);
  float* v = m_values.get();
  for (std::int64_t i = 0; i < m_n; ++i) v[i] = a * v[i] + b * params[i];
  return true;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
