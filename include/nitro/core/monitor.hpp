// nitro/core/monitor.hpp — the monitored metric: which one, and whether smaller or larger is better.
//
//   nitro::monitor_spec m = nitro::maximize("valid.acc");   // m.split() "valid", m.name() "acc"
//
// Shared vocabulary: the early stopper (train/early_stop.hpp), the checkpointer's Best(k) ranking and
// its index (record/checkpoint.hpp) and the run keyword `monitor` read the same type.
#pragma once

#include <limits>       // infinity
#include <string>       // names
#include <utility>      // move

namespace nitro {

// Whether smaller or larger is better: the early stopper's and the checkpointer's one type
// (monitor_spec::direction, checkpoint_policy::mode).
enum class monitor_mode { min, max };
constexpr char const* to_string(monitor_mode m) noexcept { return m == monitor_mode::min ? "min" : "max"; }

// What to watch: "split.name" ("acc" alone means "valid.acc" — the checkpointer's spelling too),
// and whether smaller or larger is better.
struct monitor_spec {
  using direction = monitor_mode;

  std::string metric = "valid.loss";
  direction mode = direction::min;

  std::string split() const {
    auto at = metric.find('.');
    return at == std::string::npos ? std::string("valid") : metric.substr(0, at);
  }
  std::string name() const {
    auto at = metric.find('.');
    return at == std::string::npos ? metric : metric.substr(at + 1);
  }
  std::string qualified() const { return split() + "." + name(); }
  bool maximize() const noexcept { return mode == direction::max; }
  // Is `value` better than `best` by more than `min_delta`?
  bool improves(double value, double best, double min_delta) const noexcept {
    return mode == direction::min ? value < best - min_delta : value > best + min_delta;
  }
  double worst() const noexcept {
    return mode == direction::min ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  }
  std::string describe() const { return qualified() + (mode == direction::min ? " (min)" : " (max)"); }
};

inline monitor_spec minimize(std::string metric) { return {std::move(metric), monitor_spec::direction::min}; }
inline monitor_spec maximize(std::string metric) { return {std::move(metric), monitor_spec::direction::max}; }

}  // namespace nitro
