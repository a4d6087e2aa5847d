// nitro/optim/schedule.hpp — schedules: factories of the horizon, and the library of common curves.
//
// A schedule is a factory: called once with the total number of optimizer steps (the horizon), it
// returns a curve, called once per step with the upcoming step counting from 1:
//   [](std::int64_t total) { return [total](std::int64_t t) { return 1e-3 * (1.0 - double(t - 1) / total); }; }
// A bare number is a constant. Curves must be pure functions of t (a resume re-enters them at any
// step). The library below returns factories that also describe themselves for show():
//   sched::constant(v)
//   sched::linear(from, to, {.steps})               torch LinearLR: from -> to over `steps` (default: the horizon)
//   sched::cosine(peak, {.min, .steps})             torch CosineAnnealingLR with T_max = steps (default: the horizon)
//   sched::warmup_cosine(peak, warmup, {.min, .start_factor})
//                                                   linear warm-up from start_factor*peak, then cosine to min
//                                                   (torch SequentialLR(LinearLR, CosineAnnealingLR))
//   sched::step(initial, every, gamma)              torch StepLR
//   sched::exponential(initial, gamma)              torch ExponentialLR
//   sched::one_cycle(max, {...})                    torch OneCycleLR's learning rate, same defaults
//   sched::one_cycle_momentum({...})                torch OneCycleLR's momentum (beta1 for Adam) curve
// Step t of ours is torch's scheduler index t - 1 (the value the t-th optimizer.step() uses).
// Past the horizon every library curve holds its last value.
#pragma once

#include <algorithm>    // min, max
#include <cmath>        // cos, pow
#include <cstdint>      // int64_t
#include <cstdio>       // snprintf for describe
#include <string>       // describe
#include <type_traits>  // traits
#include <utility>      // declval

namespace nitro::sched {

namespace detail {
inline constexpr double pi = 3.14159265358979323846;
inline std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}
inline double anneal_cos(double start, double end, double pct) { return end + (start - end) / 2.0 * (std::cos(pi * pct) + 1); }
inline double anneal_linear(double start, double end, double pct) { return (end - start) * pct + start; }
inline std::int64_t clamp_index(std::int64_t t, std::int64_t total) {  // t from 1 -> index from 0, held at the horizon
  std::int64_t i = t - 1;
  if (total > 0 && i > total - 1) i = total - 1;
  return i < 0 ? 0 : i;
}
}  // namespace detail

// ---- constant ------------------------------------------------------------------------------------
struct constant {
  double value;
  constexpr explicit constant(double v) noexcept : value(v) {}
  struct curve {
    double value;
    double operator()(std::int64_t) const noexcept { return value; }
  };
  curve operator()(std::int64_t) const noexcept { return {value}; }
  std::string describe() const { return detail::num(value); }
};

// ---- linear --------------------------------------------------------------------------------------
struct linear_options {
  std::int64_t steps = 0;  // 0: the horizon
};
struct linear {
  double from, to;
  linear_options options{};
  linear(double from_, double to_, linear_options o = {}) : from(from_), to(to_), options(o) {}
  struct curve {
    double from, to;
    std::int64_t n;
    double operator()(std::int64_t t) const noexcept {
      const std::int64_t i = std::max<std::int64_t>(t - 1, 0);
      return from + (to - from) * double(std::min(i, n)) / double(n);
    }
  };
  curve operator()(std::int64_t total) const noexcept {
    std::int64_t n = options.steps > 0 ? options.steps : total;
    return {from, to, n > 0 ? n : 1};
  }
  std::string describe() const { return "linear(" + detail::num(from) + " -> " + detail::num(to) + ")"; }
};

// ---- cosine --------------------------------------------------------------------------------------
struct cosine_options {
  double min = 0;
  std::int64_t steps = 0;  // T_max; 0: the horizon
};
struct cosine {
  double peak;
  cosine_options options{};
  cosine(double peak_, cosine_options o = {}) : peak(peak_), options(o) {}
  struct curve {
    double peak, min;
    std::int64_t n;
    double operator()(std::int64_t t) const noexcept {
      const std::int64_t i = std::min(std::max<std::int64_t>(t - 1, 0), n);
      return min + (peak - min) * (1 + std::cos(detail::pi * double(i) / double(n))) / 2;
    }
  };
  curve operator()(std::int64_t total) const noexcept {
    std::int64_t n = options.steps > 0 ? options.steps : total;
    return {peak, options.min, n > 0 ? n : 1};
  }
  std::string describe() const { return "cosine(" + detail::num(peak) + " -> " + detail::num(options.min) + ")"; }
};

// ---- warm-up then cosine -------------------------------------------------------------------------
struct warmup_cosine_options {
  double min = 0;
  double start_factor = 0;  // the first step's value is start_factor*peak; 0: 1/warmup
};
struct warmup_cosine {
  double peak;
  std::int64_t warmup;
  warmup_cosine_options options{};
  warmup_cosine(double peak_, std::int64_t warmup_, warmup_cosine_options o = {}) : peak(peak_), warmup(warmup_), options(o) {}
  struct curve {
    double peak, min, start;
    std::int64_t warmup, n;
    double operator()(std::int64_t t) const noexcept {
      const std::int64_t i = std::max<std::int64_t>(t - 1, 0);
      if (i < warmup) return peak * (start + (1 - start) * double(i) / double(warmup));
      const std::int64_t j = std::min(i - warmup, n);
      return min + (peak - min) * (1 + std::cos(detail::pi * double(j) / double(n))) / 2;
    }
  };
  curve operator()(std::int64_t total) const noexcept {
    const std::int64_t w = std::max<std::int64_t>(warmup, 0);
    const double s = options.start_factor > 0 ? options.start_factor : (w > 0 ? 1.0 / double(w) : 1.0);
    return {peak, options.min, s, w, std::max<std::int64_t>(total - w, 1)};
  }
  std::string describe() const {
    return "warmup_cosine(" + detail::num(peak) + ", warmup " + std::to_string(warmup) + " -> " + detail::num(options.min) + ")";
  }
};

// ---- step and exponential ------------------------------------------------------------------------
struct step {
  double initial;
  std::int64_t every;
  double gamma = 0.1;
  step(double initial_, std::int64_t every_, double gamma_ = 0.1) : initial(initial_), every(every_ > 0 ? every_ : 1), gamma(gamma_) {}
  struct curve {
    double initial, gamma;
    std::int64_t every;
    double operator()(std::int64_t t) const noexcept {
      return initial * std::pow(gamma, double(std::max<std::int64_t>(t - 1, 0) / every));
    }
  };
  curve operator()(std::int64_t) const noexcept { return {initial, gamma, every}; }
  std::string describe() const { return "step(" + detail::num(initial) + ", every " + std::to_string(every) + ", x" + detail::num(gamma) + ")"; }
};
struct exponential {
  double initial, gamma;
  exponential(double initial_, double gamma_) : initial(initial_), gamma(gamma_) {}
  struct curve {
    double initial, gamma;
    double operator()(std::int64_t t) const noexcept { return initial * std::pow(gamma, double(std::max<std::int64_t>(t - 1, 0))); }
  };
  curve operator()(std::int64_t) const noexcept { return {initial, gamma}; }
  std::string describe() const { return "exponential(" + detail::num(initial) + ", x" + detail::num(gamma) + ")"; }
};

// ---- OneCycle ------------------------------------------------------------------------------------
enum class anneal { cos, linear };
struct one_cycle_options {
  double pct_start = 0.3;
  double div_factor = 25;          // initial = max / div_factor
  double final_div_factor = 1e4;   // min = initial / final_div_factor
  bool three_phase = false;
  sched::anneal anneal = sched::anneal::cos;
  double base_momentum = 0.85;     // the momentum curve (one_cycle_momentum)
  double max_momentum = 0.95;
};
namespace detail {
struct one_cycle_curve {
  struct phase { double end_step, start, end; };
  phase phases[3];
  int count;
  std::int64_t total;
  sched::anneal how;
  double operator()(std::int64_t t) const noexcept {
    const double step_num = double(clamp_index(t, total));
    double start_step = 0;
    for (int i = 0; i < count; ++i) {
      phase const& p = phases[i];
      if (step_num <= p.end_step || i == count - 1) {
        const double pct = (step_num - start_step) / (p.end_step - start_step);
        return how == sched::anneal::cos ? anneal_cos(p.start, p.end, pct) : anneal_linear(p.start, p.end, pct);
      }
      start_step = p.end_step;
    }
    return phases[count - 1].end;
  }
};
// torch.optim.lr_scheduler.OneCycleLR's phases; `lr` picks the rate or the momentum column
inline one_cycle_curve make_one_cycle(double max_lr, one_cycle_options const& o, std::int64_t total, bool lr) {
  total = std::max<std::int64_t>(total, 2);
  const double initial = max_lr / o.div_factor, min_lr = initial / o.final_div_factor;
  const double bm = o.base_momentum, mm = o.max_momentum, T = double(total);
  one_cycle_curve c{};
  c.total = total;
  c.how = o.anneal;
  if (o.three_phase) {
    c.count = 3;
    c.phases[0] = {o.pct_start * T - 1, lr ? initial : mm, lr ? max_lr : bm};
    c.phases[1] = {2 * o.pct_start * T - 2, lr ? max_lr : bm, lr ? initial : mm};
    c.phases[2] = {T - 1, lr ? initial : mm, lr ? min_lr : mm};
  } else {
    c.count = 2;
    c.phases[0] = {o.pct_start * T - 1, lr ? initial : mm, lr ? max_lr : bm};
    c.phases[1] = {T - 1, lr ? max_lr : bm, lr ? min_lr : mm};
  }
  return c;
}
}  // namespace detail

struct one_cycle {
  double max;
  one_cycle_options options{};
  one_cycle(double max_, one_cycle_options o = {}) : max(max_), options(o) {}
  detail::one_cycle_curve operator()(std::int64_t total) const noexcept { return detail::make_one_cycle(max, options, total, true); }
  std::string describe() const {
    return "one_cycle(max " + detail::num(max) + ", pct_start " + detail::num(options.pct_start) + ", div " + detail::num(options.div_factor) +
           ", final_div " + detail::num(options.final_div_factor) + (options.three_phase ? ", three-phase" : "") + ")";
  }
};
struct one_cycle_momentum {
  one_cycle_options options{};
  one_cycle_momentum(one_cycle_options o = {}) : options(o) {}  // NOLINT: sched::one_cycle_momentum() reads as a value
  detail::one_cycle_curve operator()(std::int64_t total) const noexcept { return detail::make_one_cycle(1.0, options, total, false); }
  std::string describe() const {
    return "one_cycle_momentum(" + detail::num(options.max_momentum) + " -> " + detail::num(options.base_momentum) + " -> " +
           detail::num(options.max_momentum) + ")";
  }
};

}  // namespace nitro::sched

namespace nitro {

// A schedule factory: callable with the horizon, returning a curve callable with a step.
template <class F>
concept schedule_factory = std::is_arithmetic_v<std::remove_cvref_t<F>> || requires(F const& f) {
  { f(std::int64_t{1}) };
  { f(std::int64_t{1})(std::int64_t{1}) } -> std::convertible_to<double>;
};

}  // namespace nitro
