// nitro/train/step.hpp — the handle's step: one micro-batch forward, loss and backward, and every
// accum-th one the optimizer's update; and predict, forward alone.
//
// A step runs in a step_context (tensor/tape.hpp) that carries the handle's arena, tape, the seed of
// the step's random streams and the backend's kernels (tensor/backend.hpp); every intermediate lives
// in the arena, which is reset when the micro-batch ends, also when a hook throws. With SAM or ASAM
// (optimizer_type::two_pass) a step is two passes: the gradient at w into the program's own buffer,
// then, at w + e, the gradient the update uses; w comes back bit for bit. Under data parallel the
// last micro-batch's backward starts each parameter group's sum over the ranks as soon as the group's
// gradient is complete (dist/gradients.hpp), and the update waits for them.
#pragma once

#include "nitro/train/handle_state.hpp"

#include <cmath>    // isfinite
#include <cstring>  // memset: SAM's first-pass gradient
#include <tuple>    // get on forward's pair

namespace nitro::detail::handle_step {

// forward -> loss -> backward into `grads` (a buffer laid out like the parameters); the new state
// is kept when `keep_state`. Returns the loss.
template <class S>
double forward_backward(S& s, typename S::batch_type const& batch, float* grads, bool keep_state) {
  typename S::ps_type ps = s.param_view(s.m_tape, grads);
  typename S::st_type st = s.state_view();
  auto&& fwd = call_hook<hook::forward>(s.m_e, batch, s.m_model, ps, st);
  auto const& outputs = std::get<0>(fwd);
  check_outputs_batch_last(outputs, batch_samples(batch));
  auto loss = call_hook<hook::loss>(s.m_e, batch, outputs);
  if constexpr (!is_tensor<std::remove_cvref_t<decltype(loss)>>::value) {
    (void)loss_must_return_tensor<hook::loss, returns<decltype(loss)>>::ok;
    return 0;
  } else {
    const double value = static_cast<double>(loss.item());
    // inside train() the run control decides (status diverged); a step called on its own throws
    if (keep_state && !s.m_run.begun() && s.m_kw.check_divergence.value && !std::isfinite(value))
      throw error("E-TRAIN-001", "the loss is " + std::to_string(value) + " at step " + std::to_string(s.step() + 1),
                  "lower the learning rate, clip gradients (gradient_clip_norm), or check the data for NaN");
    if (loss.requires_grad()) s.m_tape.template backward<float>(loss.var(), 1.0f);
    if (keep_state) s.keep_state(std::get<1>(fwd));
    s.m_tape.clear();
    return value;
  }
}

// One micro-batch: forward, loss and backward, the gradient accumulating into the flat buffer;
// every accum-th call ends with the optimizer step. With SAM, two passes (the gradient at w, then
// at w + e). Returns the batch's loss (at w).
template <class S>
double train(S& s, typename S::batch_type const& host_batch) {
  using optimizer_type = typename S::optimizer_type;
  static_assert(S::binding_type::has_loss, "E-BIND-007: training needs a loss hook, and the experiment has none. Fix: `auto loss(auto const& outputs, LossIn const& in) const`.");
  if (s.m_micro == 0) {
    s.m_opt->begin_step(s.m_e);  // schedules write this step's values: Device fields, group fields
    s.zero_step_grads();
  }
  // On a device, forward reads the host's weights after the last update and the state the last
  // micro-batch kept. The weights change only at the update, so they cross at a step's first
  // micro-batch; with SAM at every one, as the device holds w + e after a second pass.
  s.upload_params(s.m_micro == 0 || optimizer_type::two_pass, true);
  step_context ctx = s.context(true, fold(fold(s.m_kw.seed.value, 3), static_cast<std::uint64_t>(s.micro_steps())));
  context_scope scope(ctx);
  struct cleanup {  // the tape and the arena are empty after the micro-batch, also when a hook throws
    S& s;
    ~cleanup() { s.m_tape.clear(); s.reset_step_memory(); }
  } done{s};
  typename S::batch_type batch = s.transfer(host_batch, false);
  const bool last_micro = s.m_micro + 1 == s.m_kw.accum.value;
  if (s.m_dist && last_micro) s.m_dist->set_step(s.step() + 1);  // the step the sums started in backward belong to
  // data parallel: the last micro-batch's backward starts each group's sum once the group is complete
  // (on a device the sums start once the gradient is on the host: after backward)
  tape::observe_scope overlap(s.m_tape, s.m_dist && last_micro && !optimizer_type::two_pass && !s.m_device.on_device() ? s.m_reducer->overlap(s.m_tape) : nullptr);
  double value = 0;
  if constexpr (optimizer_type::two_pass) {
    if (s.m_device.on_device()) {  // the first pass's gradient on the device, read back for the perturbation
      s.m_device.zero(s.m_device.first_pass_grads());
      value = forward_backward(s, batch, s.m_device.first_pass_grads(), true);
      s.m_device.download(s.m_device.first_pass_grads(), s.m_opt->sam_grads());
    } else {
      std::memset(s.m_opt->sam_grads(), 0, sizeof(float) * static_cast<std::size_t>(S::param_store_type::size));
      value = forward_backward(s, batch, s.m_opt->sam_grads(), true);
    }
    s.m_opt->perturb();
    struct restore_weights {  // w is restored bit for bit, also when the second pass throws
      optimizer_type& o;
      ~restore_weights() { o.restore(); }
    } restore{*s.m_opt};
    s.upload_params(true, false);  // w + e
    ctx.counter = 0;  // the second pass draws the same dropout masks
    forward_backward(s, batch, s.step_grads(), false);
  } else {
    value = forward_backward(s, batch, s.step_grads(), true);
  }
  if (++s.m_micro == s.m_kw.accum.value) {
    s.gradients_to_host();
    float k = 1.0f;
    if (s.m_dist) k = s.m_reducer->finish();  // the gradients summed over the ranks; k = 1 / ranks: the mean over the global batch
    s.m_opt->update(k / static_cast<float>(s.m_kw.accum.value));
    if constexpr (S::state_store_type::size > 0)
      if (s.m_dist) dist::average_store(*s.m_dist, s.m_state, "the average of the model's state over the ranks");
    s.m_micro = 0;
  }
  return value;
}

// Forward alone on a batch that may lack labels; the outputs own their memory.
template <class S, class Batch>
typename S::outputs_type predict(S& s, Batch const& host_batch) {
  step_context ctx = s.context(false, 0);
  context_scope scope(ctx);
  Batch batch = s.transfer(host_batch, true);
  s.upload_params();
  typename S::ps_type ps = s.param_view();
  typename S::st_type st = s.state_view();
  auto&& fwd = call_hook<hook::forward>(s.m_e, batch, s.m_model, ps, st);
  typename S::outputs_type out = clone_outputs(std::get<0>(fwd));
  s.reset_step_memory();
  return out;
}

}  // namespace nitro::detail::handle_step
