// nitro/train/keyword_table.hpp — the one table of run keywords and construction facts.
//
// A macro that calls its four arguments once per row, so every list of keywords (the keyword
// objects, run_keywords' members and records, the names E-KW-003 accepts, the docs, the keyword
// knobs) is generated from these lines and none is written twice. train/keywords.hpp expands it.
#pragma once

// ---- the one table of run keywords ----------------------------------------------------------------------
// Every run keyword and construction fact, once, in the order the records list them. Each row
// generates the keyword object, its resolver, its member of run_keywords, its record (manifest,
// show, explain), the names E-KW-003 accepts, its one-line doc (explain) and, for `knob` rows, the
// knob it can be without being a field (knobs/keyword_knobs.hpp).
//   TYPED(name, Type, knob|no_knob, "doc", default...)   keyword -> accessor -> field -> default, as Type
//   GENERIC(name, reads, "doc", default)                  keeps its value's type (keyword_accepts<"name">)
//   FACT(name, Type|void, resolver, "doc", default)        a construction fact: the keyword or its default
//   DATA("doc")                                           the data set: nitro::kw::data, resolved by the handle
#define NITRO_DETAIL_RUN_KEYWORDS(TYPED, GENERIC, FACT, DATA)                                                               \
  TYPED(seed, std::uint64_t, knob, "the run seed; every random stream folds it in", 1)                                  \
  TYPED(run_dir, std::string, knob, "where runs are recorded", "runs")                                                   \
  TYPED(n_devs, int, knob, "devices to train on", 1)                                                                     \
  TYPED(accum, int, knob, "batches accumulated per optimizer step", 1)                                                   \
  TYPED(max_epochs, int, knob, "epochs to train", 1)                                                                     \
  GENERIC(schedules, accessor_only, "schedule key -> factory of the horizon (an accessor, never a field)",                \
          ::nitro::framework_default{})                                                                                 \
  TYPED(gradient_clip_norm, double, knob, "global gradient-norm clip (0: off)", 0.0)                                     \
  TYPED(check_divergence, bool, knob, "stop as diverged on a NaN, infinite or blown-up loss", true)                      \
  TYPED(autolog_schedules, bool, knob, "log every scheduled value", true)                                                \
  TYPED(log_every_n_steps, int, knob, "steps between train log lines", 50)                                               \
  GENERIC(logger, accessor_and_field, "where the run's lines go", ::nitro::default_loggers)                              \
  GENERIC(checkpointer, accessor_and_field, "when checkpoints are written, which are kept", ::nitro::framework_default{}) \
  TYPED(early_stop, early_stopping, no_knob, "evaluations without improvement before stopping", )                        \
  TYPED(monitor, monitor_spec, no_knob, "the metric early stopping and the best checkpoint watch", )                     \
  TYPED(eval_loss, bool, knob, "report the loss when evaluating", true)                                                  \
  TYPED(ema, ema_options, no_knob, "an exponential moving average of the weights", )                                     \
  TYPED(batch_size, std::int64_t, knob, "samples per batch", 128)                                                        \
  TYPED(max_steps, std::int64_t, no_knob, "optimizer steps to train instead of max_epochs epochs (0: max_epochs decides)", 0) \
  TYPED(eval_every, std::int64_t, no_knob, "steps between evaluations of valid besides each epoch's end (0: none)", 0)  \
  TYPED(diagnostics, bool, no_knob, "gradient and parameter norms in every train line", false)                          \
  DATA("the data set")                                                                                                  \
  FACT(weights, void, resolve_weights_or_checkpoint, "weights to start from", ::nitro::not_given{})                     \
  FACT(resume, void, resolve_resume, "a checkpoint to continue exactly", ::nitro::not_given{})                          \
  FACT(run_ref, void, resolve_run_ref, "the run's record folder", ::nitro::not_given{})                                 \
  FACT(w0, void, resolve_w0, "the anchor of decay toward w0", ::nitro::not_given{})                                     \
  FACT(restore_optimizer, bool, resolve_restore_optimizer, "resume the optimizer's state too", true)                    \
  FACT(restore_best, void, resolve_restore_best, "the weights the run ends with", ::nitro::not_given{})                 \
  FACT(eval_weights, void, resolve_eval_weights, "the weights evaluate() uses", ::nitro::not_given{})                   \
  FACT(load_ema, bool, resolve_load_ema, "take the EMA a weights or resume file holds", true)                    \
  FACT(device, void, resolve_device, "the backend the run's steps run on", ::nitro::cpu_backend{})                       \
  FACT(replicas, ::nitro::dist::replicas*, resolve_replicas, "the data-parallel job this run is one replica of", nullptr)
