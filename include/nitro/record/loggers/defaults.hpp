// nitro/record/loggers/defaults.hpp — the framework's loggers, when the `logger` keyword asks for them.
//
//   logger_set s = nitro::to_logger_set(kw.logger.value);   // the keyword (default: nitro::default_loggers)
//   s = nitro::with_default_loggers(std::move(s), info);     // before run_control::begin
//
// default_loggers is the console (a progress bar on a terminal, plain lines elsewhere) and, when
// the run has a directory (run_info::dir), the run's files there: metrics.jsonl, metrics.csv and
// a TensorBoard event file — DESIGN.md §4's record of a run.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/record/loggers/console.hpp"
#include "nitro/record/loggers/csv.hpp"
#include "nitro/record/loggers/jsonl.hpp"
#include "nitro/record/loggers/tensorboard.hpp"
#include "nitro/record/logger.hpp"

#include <utility>  // move

namespace nitro {

// `console = false` leaves the console out of the defaults (a quiet run: train(false), --quiet).
NITRO_RUNTIME_INLINE logger_set with_default_loggers(logger_set s, run_info const& info, bool console = true);

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE logger_set with_default_loggers(logger_set s, run_info const& info, bool console) {
  if (!s.wants_defaults()) return s;
  logger_set out;
  if (console) out.add(console_logger());
  if (!info.dir.empty()) {
    out.add(jsonl_logger("metrics.jsonl"));
    out.add(csv_logger("metrics.csv"));
    out.add(tensorboard_logger());
  }
  for (auto const& l : s.loggers()) out.add(l);
  return out;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
