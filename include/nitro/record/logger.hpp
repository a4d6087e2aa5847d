// nitro/record/logger.hpp — what the trainer tells a logger, and the set of loggers a run has.
//
// A logger is a class deriving from nitro::run_logger that overrides what it cares about:
//
//   struct my_logger : nitro::run_logger {
//     void on_setup(nitro::run_info const& info) override;            // once: the binding report, metadata
//     void on_step(std::int64_t step, int epoch, nitro::scalars s) override;  // every log_every_n_steps
//     void on_eval(std::int64_t step, int epoch, std::string_view split, nitro::metric_values const& m) override;
//     void on_end(nitro::run_status status, std::string_view reason) override;
//   };
//   nitro::Nitro h(e, nitro::logger = my_logger{});                                // this one only
//   nitro::Nitro h(e, nitro::logger = nitro::loggers(nitro::console_logger{}, my_logger{}));
//   nitro::Nitro h(e, nitro::logger = nitro::no_loggers);                          // silence
//
// Logger values are descriptions: they are copied into the handle, and open their files in
// on_setup. A logger that must be shared (or is not copyable) is passed as std::shared_ptr.
// on_batch runs after every step (progress bars); it must not allocate. The built-in loggers
// (console, JSONL, CSV, TensorBoard) live in record/loggers/.
#pragma once

#include "nitro/nn/metrics.hpp"

#include <exception>    // the first failure of on_end, thrown after the others
#include <cstdint>      // int64_t
#include <filesystem>   // run directory
#include <memory>       // shared_ptr
#include <span>         // scalars
#include <string>       // texts
#include <string_view>  // names
#include <type_traits>  // detection
#include <utility>      // move
#include <vector>       // the set

namespace nitro {

// ---- the run's states (status.json, on_end) -------------------------------------------------------
enum class run_status { running, finished, failed, diverged, stopped };
constexpr char const* to_string(run_status s) noexcept {
  switch (s) {
    case run_status::running: return "running";
    case run_status::finished: return "finished";
    case run_status::failed: return "failed";
    case run_status::diverged: return "diverged";
    case run_status::stopped: return "stopped";
  }
  return "?";
}

// ---- what loggers receive ---------------------------------------------------------------------------
struct scalar {
  std::string_view name;
  double value;
};
using scalars = std::span<scalar const>;

struct run_info {
  std::string experiment;          // the program, e.g. "FashionMLP<256>"
  std::string binding_report;      // what show() prints
  std::string metadata_json = "{}";// a JSON object from the caller: the selection, seed, versions, ...
  std::filesystem::path dir;       // the run directory; a logger's relative path is relative to it
  std::int64_t steps_per_epoch = 0;
  int max_epochs = 0;
  std::int64_t total_steps = 0;
  std::int64_t batch_size = 0;
  std::int64_t start_step = 0;     // a resumed run starts here
  int log_every_n_steps = 1;       // steps between on_step calls (run_control sets it)
};

struct step_progress {
  std::int64_t step = 0;             // optimizer steps done
  std::int64_t total_steps = 0;
  int epoch = 0;                     // the current epoch, from 0
  int max_epochs = 0;
  std::int64_t batch = 0;            // batches done in this epoch
  std::int64_t steps_per_epoch = 0;
  double loss = 0;                   // this step's loss
  double samples_per_second = 0;     // since the run (or resume) began
  double elapsed_seconds = 0;
  double eta_seconds = 0;            // to total_steps at the current rate
};

class run_logger {
 public:
  virtual ~run_logger() = default;
  virtual void on_setup(run_info const&) {}
  virtual void on_batch(step_progress const&) {}
  virtual void on_step(std::int64_t /*step*/, int /*epoch*/, scalars) {}
  virtual void on_eval(std::int64_t /*step*/, int /*epoch*/, std::string_view /*split*/, metric_values const&) {}
  virtual void on_end(run_status, std::string_view /*reason*/) {}
  // What it is, for show and the manifest.
  virtual std::string describe() const { return "user logger"; }
};

// ---- the keyword's values -----------------------------------------------------------------------------
// The framework's loggers: the console, plus JSONL, CSV and TensorBoard files when the run has a
// directory (record/loggers/defaults.hpp makes them).
struct default_loggers_t {
  explicit constexpr default_loggers_t() = default;
  std::string describe() const { return "default (console + run files)"; }
};
inline constexpr default_loggers_t default_loggers{};
struct no_loggers_t {
  explicit constexpr no_loggers_t() = default;
  std::string describe() const { return "none"; }
};
inline constexpr no_loggers_t no_loggers{};

class logger_set {
 public:
  logger_set() = default;

  logger_set& add(std::shared_ptr<run_logger> l) {
    if (l) m_loggers.push_back(std::move(l));
    return *this;
  }
  template <class L>
    requires std::is_base_of_v<run_logger, std::remove_cvref_t<L>>
  logger_set& add(L&& l) {
    m_loggers.push_back(std::make_shared<std::remove_cvref_t<L>>(std::forward<L>(l)));
    return *this;
  }
  logger_set& add(logger_set const& more) {
    for (auto const& l : more.m_loggers) m_loggers.push_back(l);
    m_defaults = m_defaults || more.m_defaults;
    return *this;
  }
  logger_set& add(default_loggers_t) { m_defaults = true; return *this; }
  logger_set& add(no_loggers_t) { return *this; }

  // True while the framework's loggers are still to be added (see record/loggers/defaults.hpp).
  bool wants_defaults() const noexcept { return m_defaults; }
  void defaults_added() noexcept { m_defaults = false; }

  std::size_t size() const noexcept { return m_loggers.size(); }
  bool empty() const noexcept { return m_loggers.empty(); }
  std::vector<std::shared_ptr<run_logger>> const& loggers() const noexcept { return m_loggers; }
  std::string describe() const {
    std::string s = m_defaults ? default_loggers_t{}.describe() : "";
    for (auto const& l : m_loggers) s += (s.empty() ? "" : ", ") + l->describe();
    return s.empty() ? "none" : s;
  }

  void on_setup(run_info const& info) { for (auto& l : m_loggers) l->on_setup(info); }
  void on_batch(step_progress const& p) { for (auto& l : m_loggers) l->on_batch(p); }
  void on_step(std::int64_t step, int epoch, scalars s) { for (auto& l : m_loggers) l->on_step(step, epoch, s); }
  void on_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m) {
    for (auto& l : m_loggers) l->on_eval(step, epoch, split, m);
  }
  // Every logger hears the end, even when one of them cannot write (a full disk): the status file
  // may still say what happened. The first failure is thrown after the others have run.
  void on_end(run_status status, std::string_view reason) {
    std::exception_ptr first;
    for (auto& l : m_loggers) {
      try {
        l->on_end(status, reason);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

 private:
  std::vector<std::shared_ptr<run_logger>> m_loggers;
  bool m_defaults = false;
};

// Values the `logger` keyword takes: a logger, a shared_ptr to one, a logger_set, default_loggers,
// no_loggers.
template <class V>
inline constexpr bool is_logger_value_v =
    std::is_base_of_v<run_logger, V> || std::is_same_v<V, logger_set> || std::is_same_v<V, default_loggers_t> ||
    std::is_same_v<V, no_loggers_t> ||
    requires(V const& v) { requires std::is_base_of_v<run_logger, typename V::element_type>; std::shared_ptr<run_logger>(v); };

template <class V>
logger_set to_logger_set(V const& v) {
  static_assert(is_logger_value_v<V>, "E-LOG-007: nitro::to_logger_set is given a value that is not a logger. Fix: pass a logger (a class deriving from nitro::run_logger), a shared_ptr to one, nitro::loggers(...), nitro::default_loggers or nitro::no_loggers.");
  logger_set s;
  if constexpr (std::is_same_v<V, logger_set>) s = v;
  else if constexpr (std::is_base_of_v<run_logger, V>) s.add(V(v));
  else if constexpr (std::is_same_v<V, default_loggers_t> || std::is_same_v<V, no_loggers_t>) s.add(v);
  else s.add(std::shared_ptr<run_logger>(v));
  return s;
}

// Several loggers as one value: nitro::loggers(nitro::console_logger{}, my_logger{}, ...).
template <class... L>
logger_set loggers(L&&... l) {
  static_assert((is_logger_value_v<std::remove_cvref_t<L>> && ...),
                "E-LOG-008: an argument of nitro::loggers(...) is not a logger. Fix: pass loggers (classes deriving from nitro::run_logger), shared_ptrs to them, "
                "nitro::default_loggers or nitro::no_loggers");
  logger_set s;
  (s.add(to_logger_set(l)), ...);
  return s;
}

}  // namespace nitro
