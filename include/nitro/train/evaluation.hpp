// nitro/train/evaluation.hpp — the handle's evaluation: a split's metrics, with the live weights or
// with the weights eval_weights names (the EMA, the best checkpoint, an average).
//
// An evaluation reads the split in order, in whole batches, forward alone, and hands each batch's
// metrics hook result (and the loss, when eval_loss says so) to an accumulator; finalize_metrics
// turns the sums into the values the loggers see (nn/metrics.hpp). Under data parallel each rank
// reads its block of the split and the sums are reduced over the ranks by the pair rules
// (dist/metrics.hpp), so every rank gets the one process's values. Evaluation allocates (the
// loader's batches, the accumulator); a training step does not.
#pragma once

#include "nitro/data/loader.hpp"
#include "nitro/dist/shard.hpp"
#include "nitro/nn/metrics.hpp"
#include "nitro/record/weights_resolve.hpp"
#include "nitro/train/handle_state.hpp"

#include <algorithm>    // copy
#include <string_view>  // split names
#include <tuple>        // get on forward's pair
#include <vector>       // the live weights, kept aside

namespace nitro::detail::handle_eval {

// One batch's metrics (and loss) into `acc`: a metric_accumulator, or dist::metric_totals.
template <class S, class Acc>
void eval_step(S& s, typename S::batch_type const& host_batch, Acc& acc) {
  using binding_type = typename S::binding_type;
  step_context ctx = s.context(false, 0);
  context_scope scope(ctx);
  typename S::batch_type batch = s.transfer(host_batch, false);
  typename S::ps_type ps = s.param_view();  // on a device: the copy live() sent there
  typename S::st_type st = s.state_view();
  auto&& fwd = call_hook<hook::forward>(s.m_e, batch, s.m_model, ps, st);
  auto const& outputs = std::get<0>(fwd);
  if constexpr (binding_type::has_loss) {
    if (evaluation_reports_loss(binding_type::has_loss, binding_type::has_metrics, s.m_kw.eval_loss.value))
      acc.add_mean("loss", mean_of(call_hook<hook::loss>(s.m_e, batch, outputs), 1.0));  // on a device, added up there
  }
  if constexpr (binding_type::has_metrics) acc.add(call_hook<hook::metrics>(s.m_e, batch, outputs));
  s.reset_step_memory();
}

// The split's metrics with the live weights.
template <class S>
metric_values live(S& s, std::string_view split_name) {
  using batch_type = typename S::batch_type;
  auto const& split = s.m_data.split(split_name);
  s.upload_params();  // on a device: the weights being evaluated (live, the EMA's, a checkpoint's) go there once
  if (s.m_dist) {  // this rank's block of the split, the metrics reduced over the ranks by the pair rules
    const auto part = dist::split_shard(split, s.m_dist->rank(), s.m_dist->size(), s.m_kw.batch_size.value);  // whole batches: one process's
    data::loader<batch_type> ld(part, s.loader_options_for(split_name));
    ld.start_epoch(0);
    dist::metric_totals<typename S::metrics_struct> totals;
    while (auto b = ld.next()) eval_step(s, *b, totals);
    return finalize_metrics(s.m_e, totals.reduce(*s.m_dist, metrics_residency_of<hook::metrics>(s.m_e)), split_name);
  }
  data::loader<batch_type> ld(split, s.loader_options_for(split_name));
  ld.start_epoch(0);
  metric_accumulator acc(metrics_residency_of<hook::metrics>(s.m_e));
  acc.reserve_samples(split.size());  // concat_of: no growth per batch
  while (auto b = ld.next()) eval_step(s, *b, acc);
  return finalize_metrics(s.m_e, acc.result(), split_name);
}

// The split's metrics: what the metrics hook returns, reduced and finalized (finalize_metrics),
// plus "loss" (mean over batches) when eval_loss says so. With eval_weights, evaluated with
// those weights (the EMA, the best checkpoint, an average), the live weights left as they were.
template <class S>
metric_values evaluate(S& s, std::string_view split_name) {
  using EW = std::remove_cvref_t<decltype(s.m_kw.eval_weights.value)>;
  if constexpr (!std::is_same_v<EW, not_given>) {
    const eval_weights_ref r = to_eval_weights_ref(s.m_kw.eval_weights.value);
    if (r.ema) {
      if (!s.m_run.begun() || !s.m_run.ema().enabled())
        throw error("E-CKPT-031", "eval_weights = nitro::ema, but this run keeps no EMA of its weights (yet)",
                    "give the run nitro::ema = 0.999 and train it, or evaluate with nitro::best");
      ema_scope with_average(s.m_run.ema(), s.m_params.values());
      return live(s, split_name);
    }
    const std::vector<float> live_params(s.m_params.values(), s.m_params.values() + S::param_store_type::size);
    const std::vector<float> live_state(s.m_state.values(), s.m_state.values() + S::state_store_type::size);
    load_model(resolve(*r.ref, s.checkpoint_context(true)).load(), s.m_params, s.m_state);
    struct put_back {  // the live weights return, also when the evaluation throws
      S& h;
      std::vector<float> const& p;
      std::vector<float> const& st;
      ~put_back() {
        std::copy(p.begin(), p.end(), h.m_params.values());
        std::copy(st.begin(), st.end(), h.m_state.values());
      }
    } back{s, live_params, live_state};
    return live(s, split_name);
  } else {
    return live(s, split_name);
  }
}

// The valid split with the live weights (and, with an EMA, with the averaged weights as
// "valid_ema" first). Feeds the monitor; false when early stopping ends the run.
template <class S>
bool valid(S& s) {
  if (s.m_run.ema().enabled()) {
    metric_values averaged;
    {
      ema_scope with_average(s.m_run.ema(), s.m_params.values());
      averaged = live(s, "valid");
    }
    s.m_run.after_eval(s.step(), s.m_epoch + 1, "valid_ema", averaged);
  }
  s.m_last_valid = live(s, "valid");
  s.m_valid_step = s.step();
  return s.m_run.after_eval(s.step(), s.m_epoch + 1, "valid", s.m_last_valid);
}

}  // namespace nitro::detail::handle_eval
