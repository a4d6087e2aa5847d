// nitro/cli/context.hpp — what every command has at hand: its streams and job, the run options,
// the stop signals, and what a command adds to the selection's keywords.
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/cli/args.hpp"
#include "nitro/cli/status_logger.hpp"
#include "nitro/dist/replicas.hpp"
#include "nitro/record/checkpoint.hpp"
#include "nitro/record/logger.hpp"
#include "nitro/record/loggers/defaults.hpp"
#include "nitro/record/run_reference.hpp"
#include "nitro/record/weights_ref.hpp"

#include <nlohmann/json.hpp>

#include <csignal>   // a stop asked with Ctrl-C ends the run as `stopped`
#include <map>       // metrics
#include <optional>  // options given or not
#include <ostream>   // output
#include <string>    // names

namespace nitro::cli {

// What every command has at hand.
struct context {
  std::string program;       // the binary's name, for usage lines
  std::string self;          // the binary's path, to run points as processes
  std::string command_line;  // for the manifest
  std::ostream& out;
  std::ostream& err;
  dist::replicas* replicas = nullptr;  // the data-parallel job (nitro::main under mpirun); null: one process
};

struct run_options {
  std::optional<std::string> run_dir;
  std::optional<std::string> id;
  bool quiet = false;
  std::optional<resume_ref> resume;    // --resume: continue exactly from one checkpoint
  std::optional<weights_ref> weights;  // --weights: start from these weights (a file, a checkpoint, an average)
};

struct run_result {
  int exit_code = exit_ok;
  std::string dir, slug, state;
  std::map<std::string, double> metrics;  // "valid/acc", "test/loss", ...
};

namespace detail {

inline volatile std::sig_atomic_t stop_requested = 0;
extern "C" inline void on_stop_signal(int) { stop_requested = 1; }

// Ctrl-C (SIGINT) and SIGTERM end a run between steps as `stopped`, its record complete.
class stop_signals {
 public:
  stop_signals() {
    stop_requested = 0;
    m_int = std::signal(SIGINT, on_stop_signal);
    m_term = std::signal(SIGTERM, on_stop_signal);
  }
  ~stop_signals() {
    std::signal(SIGINT, m_int);
    std::signal(SIGTERM, m_term);
  }
  stop_signals(stop_signals const&) = delete;
  stop_signals& operator=(stop_signals const&) = delete;

 private:
  void (*m_int)(int);
  void (*m_term)(int);
};

}  // namespace detail

// Whether Ctrl-C or SIGTERM asked the command that runs now to stop (a data-parallel rank waiting in
// a collective polls it too: nitro/main.hpp).
NITRO_RUNTIME_INLINE bool stop_requested() noexcept;

// What a command adds to the selection's keywords; every field empty or default unless `run` (or
// `eval`) sets it. The handle's type does not depend on which are set.
struct handle_extras {
  std::optional<run_reference> run_ref;         // run: the record's folder and the metadata line
  std::optional<weights_ref> weights;           // eval, run --weights: the weights to load
  std::optional<resume_ref> resume;             // run --resume: the checkpoint to continue
  std::optional<checkpoint_policy> checkpointer;  // run: checkpoints/ (when the experiment gives none)
  logger_set loggers = to_logger_set(default_loggers);
  dist::replicas* replicas = nullptr;             // run, eval under mpirun: the job the handle is a replica of
};

// The value of a keyword record as JSON: a number or a boolean when the text is one, else the text.
NITRO_RUNTIME_INLINE ordered_json record_value_json(std::string const& text);

}  // namespace nitro::cli

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::cli {

NITRO_RUNTIME_INLINE bool stop_requested() noexcept { return detail::stop_requested != 0; }

NITRO_RUNTIME_INLINE ordered_json record_value_json(std::string const& text) {
  if (text == "true") return true;
  if (text == "false") return false;
  if (!text.empty() && text.find_first_not_of("-0123456789") == std::string::npos && text != "-") {
    try {
      std::size_t used = 0;
      long long v = std::stoll(text, &used);
      if (used == text.size()) return v;
    } catch (std::exception const&) {
    }
  }
  if (!text.empty() && text.find_first_not_of("-+.0123456789e") == std::string::npos) {
    try {
      std::size_t used = 0;
      double v = std::stod(text, &used);
      if (used == text.size()) return v;
    } catch (std::exception const&) {
    }
  }
  return text;
}

}  // namespace nitro::cli
#endif  // !NITRO_RUNTIME_EXTERN
