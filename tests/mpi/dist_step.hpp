// tests/mpi/dist_step.hpp — the handle's train_step with the distributed seam, through the handle's
// public API (a local equivalent until docs/mpi-integration.md is in train/nitro.hpp).
//
// Nitro::train_step runs begin_step -> zero gradients -> forward -> loss -> backward and, every
// accum-th micro-batch, optimizer().update(1 / accum) — all in one call, so nothing can sit
// between backward and the update. This stepper does the same steps in the same order with the
// handle's own experiment, model, parameter buffer and optimizer program, and puts the reduction
// where the handle will: after the last micro-batch's backward, before update(). The random stream
// of a micro-batch is the handle's: fold(fold(seed, 3), micro_steps()).
#pragma once

#include <nitro/nitro.hpp>
#include <nitro/dist/gradients.hpp>
#include <nitro/dist/replicas.hpp>

#include <tuple>
#include <type_traits>

namespace dist_test {

template <class H>
class dist_stepper {
 public:
  using batch_type = typename H::batch_type;
  static_assert(nitro::leaf_count<typename H::state_spec>() == 0,
                "dist_stepper: the handle keeps st_new itself (its state store is private); this local equivalent trains models without state");

  dist_stepper(H& h, nitro::dist::replicas& r) : m_h(&h), m_r(&r), m_reducer(r, h.param_buffer()), m_control(r), m_tape(m_arena) {}

  struct result {
    double loss = 0;     // the global batch's loss (mean over ranks) after an optimizer step; else the local one
    bool stepped = false;
    bool stop = false;   // some rank asked to stop at this step
  };

  // One micro-batch of this rank's shard.
  result step(batch_type const& shard, bool stop_request = false) {
    auto& h = *m_h;
    auto& e = const_cast<typename H::experiment_type&>(h.experiment());  // the handle's own (non-const) copy
    const int accum = h.accum().value;
    if (m_micro == 0) {
      h.optimizer().begin_step(e);
      h.param_buffer().zero_grads();
      m_loss_sum = 0;
    }
    m_r->set_step(h.step() + 1);
    nitro::step_context ctx{&m_arena, &m_tape, true,
                            nitro::fold(nitro::fold(h.seed().value, 3), static_cast<std::uint64_t>(h.step() * accum + m_micro)), 0};
    nitro::context_scope scope(ctx);
    double value = 0;
    {
      auto ps = h.param_buffer().view(m_tape);
      auto st = h.state();
      auto&& fwd = nitro::call_hook<nitro::hook::forward>(std::as_const(e), shard, h.model(), ps, st);
      auto loss = nitro::call_hook<nitro::hook::loss>(std::as_const(e), shard, std::get<0>(fwd));
      value = static_cast<double>(loss.item());
      if (loss.requires_grad()) m_tape.backward<float>(loss.var(), 1.0f);
    }
    m_tape.clear();
    m_arena.reset();
    m_loss_sum += value;
    result out{value, false, false};
    if (++m_micro == accum) {
      m_micro = 0;
      m_reducer.start_all();                                   // one sum per group, in flight together
      m_control.start(m_loss_sum / accum, stop_request);       // and the per-step agreement
      const float k = m_reducer.finish();
      m_control.finish();
      h.optimizer().update(k / static_cast<float>(accum));     // the mean over the global batch
      out = {m_control.loss(), true, m_control.stop()};
    }
    return out;
  }

 private:
  H* m_h;
  nitro::dist::replicas* m_r;
  nitro::dist::gradient_reducer<typename H::param_store_type> m_reducer;
  nitro::dist::step_control m_control;
  nitro::arena m_arena;
  nitro::tape m_tape;
  int m_micro = 0;
  double m_loss_sum = 0;
};

}  // namespace dist_test
