// nitro/knobs/keyword_knobs.hpp — run keywords that can be knobs without being fields.
//
// A knob names an experiment field, or a run keyword (train/keywords.hpp) that the experiment does
// not hold as a field: `nitro::knob<"seed">()` in an experiment without a `seed` field. Such a knob's
// default is what the keyword resolves to without a keyword (the experiment's accessor, else the
// framework's value), and the selected value reaches the handle as the keyword itself
// (`nitro::seed = 3`). Only keywords with a value type a knob can hold are listed here.
#pragma once

#include "nitro/core/fixed_string.hpp"
#include "nitro/train/keywords.hpp"

#include <cstdint>  // uint64_t
#include <string>   // run_dir

namespace nitro {

// keyword_knob<Name>: known = false for a name that is no typed run keyword.
template <fixed_string Name>
struct keyword_knob {
  static constexpr bool known = false;
};

#define NITRO_DETAIL_KEYWORD_KNOB(KW)                                                                         \
  template <>                                                                                                 \
  struct keyword_knob<#KW> {                                                                                  \
    static constexpr bool known = true;                                                                       \
    using type = typename std::remove_cvref_t<decltype(kw::KW)>::value_type;                                  \
    template <class E>                                                                                        \
    static auto resolve(E const& e) { return ::nitro::resolve_##KW(e); }                                       \
    static auto make(type v) { return kw::KW = v; }                                                           \
  };

NITRO_DETAIL_KEYWORD_KNOB(seed)
NITRO_DETAIL_KEYWORD_KNOB(run_dir)
NITRO_DETAIL_KEYWORD_KNOB(n_devs)
NITRO_DETAIL_KEYWORD_KNOB(accum)
NITRO_DETAIL_KEYWORD_KNOB(max_epochs)
NITRO_DETAIL_KEYWORD_KNOB(gradient_clip_norm)
NITRO_DETAIL_KEYWORD_KNOB(check_divergence)
NITRO_DETAIL_KEYWORD_KNOB(autolog_schedules)
NITRO_DETAIL_KEYWORD_KNOB(log_every_n_steps)
NITRO_DETAIL_KEYWORD_KNOB(eval_loss)
NITRO_DETAIL_KEYWORD_KNOB(batch_size)

#undef NITRO_DETAIL_KEYWORD_KNOB

// Every typed run keyword, for `explain` and the manifest: f(keyword_knob<Name>{}, "name", "doc").
template <class F>
void for_each_keyword_knob(F&& f) {
  f(keyword_knob<"seed">{}, "seed", "the run seed; every random stream folds it in");
  f(keyword_knob<"run_dir">{}, "run_dir", "where runs are recorded");
  f(keyword_knob<"n_devs">{}, "n_devs", "devices to train on");
  f(keyword_knob<"accum">{}, "accum", "batches accumulated per optimizer step");
  f(keyword_knob<"max_epochs">{}, "max_epochs", "epochs to train");
  f(keyword_knob<"gradient_clip_norm">{}, "gradient_clip_norm", "global gradient-norm clip (0: off)");
  f(keyword_knob<"check_divergence">{}, "check_divergence", "stop on a NaN or infinite loss");
  f(keyword_knob<"autolog_schedules">{}, "autolog_schedules", "log every scheduled value");
  f(keyword_knob<"log_every_n_steps">{}, "log_every_n_steps", "steps between train log lines");
  f(keyword_knob<"eval_loss">{}, "eval_loss", "report the loss when evaluating");
  f(keyword_knob<"batch_size">{}, "batch_size", "samples per batch");
}

}  // namespace nitro
