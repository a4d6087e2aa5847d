// nitro/nn/losses.hpp — losses, each one fused tape node.
//
//   logitcrossentropy(logits, target, smoothing)   softmax cross-entropy from logits [C, B]; target
//                                                  one-hot/soft [C, B] or class indices [1, B]/[B];
//                                                  label smoothing (a number or a Device field, read
//                                                  when the loss runs, so a schedule reaches it)
//   mse(pred, target)                              mean squared error
//   logitbinarycrossentropy(logits, target)        sigmoid + binary cross-entropy, stable
// Every loss is a mean over all samples (and, for mse/bce, all elements), as in PyTorch. Here the
// arguments are checked; the step's backend computes the loss and its gradient (device_ops:
// cross_entropy, squared_error, binary_cross_entropy; tensor/loss.hpp), on whatever memory the
// step runs on; so does correct (and correct_count), what the metrics count.
#pragma once

#include "nitro/core/markers.hpp"
#include "nitro/core/runtime.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/detail/record.hpp"

#include <cstdint>  // int64_t

namespace nitro::nn {

namespace detail {
template <class T, class S>
T smoothing_value(S const& s) {
  if constexpr (is_device_v<S>) return static_cast<T>(s.get());
  else return static_cast<T>(s);
}
}  // namespace detail

// The loss for a smoothing value (compiled once for float in nitro::runtime).
template <class T>
basic_tensor<T> logitcrossentropy_at(basic_tensor<T> const& logits, basic_tensor<T> const& target, T s);
#if NITRO_RUNTIME_EXTERN
extern template basic_tensor<float> logitcrossentropy_at<float>(basic_tensor<float> const&, basic_tensor<float> const&, float);
#endif

template <class T, class S = T>
basic_tensor<T> logitcrossentropy(basic_tensor<T> const& logits, basic_tensor<T> const& target, S const& smoothing = S(0)) {
  return logitcrossentropy_at<T>(logits, target, detail::smoothing_value<T>(smoothing));
}

template <class T>
basic_tensor<T> logitcrossentropy_at(basic_tensor<T> const& logits, basic_tensor<T> const& target, T s) {
  using namespace nitro::detail;
  const std::int64_t C = logits.rank() <= 1 ? logits.numel() : logits.shape()[0];
  const std::int64_t B = C == 0 ? 0 : logits.numel() / C;
  const bool indices = !(target.shape() == logits.shape());
  if (indices && target.numel() != B)
    throw error("E-LOSS-001",
                "logitcrossentropy: target of shape " + target.shape().to_string() + " matches neither the logits " +
                    logits.shape().to_string() + " (one-hot) nor their " + std::to_string(B) + " samples (class indices)",
                "pass a one-hot target of the logits' shape, or one class index per sample");
  if (!(s >= T(0) && s <= T(1)))
    throw error("E-LOSS-002", "logitcrossentropy: label smoothing " + std::to_string(double(s)) + " is outside [0, 1]",
                "use a smoothing between 0 and 1 (0.05 or 0.1 are common)");
  basic_tensor<T> y = make_output<T>(shape{}, needs_grad(logits));
  basic_tensor<T> p = basic_tensor<T>::empty(logits.shape());  // the softmax, kept for the backward pass
  device_ops* ops = &active_ops();
  ops->cross_entropy(C, B, logits.data(), target.data(), indices, s, p.data(), y.data());
  if (y.requires_grad()) {
    T const* pd = p.data();
    T const* td = target.data();
    int lv = logits.var(), yv = y.var();
    active_tape().record([=](tape& tp) {
      T const* gy = tp.grad_if_any<T>(yv);
      if (!gy) return;
      ops->cross_entropy_backward(C, B, pd, td, indices, s, gy, tp.grad<T>(lv));
    });
  }
  return y;
}

template <class T>
basic_tensor<T> mse(basic_tensor<T> const& pred, basic_tensor<T> const& target) {
  using namespace nitro::detail;
  if (!(pred.shape() == target.shape()))
    throw error("E-LOSS-004", "mse: prediction " + pred.shape().to_string() + " and target " + target.shape().to_string() + " differ",
                "pass tensors of the same shape");
  const std::int64_t n = pred.numel();
  basic_tensor<T> y = make_output<T>(shape{}, needs_grad(pred, target));
  device_ops* ops = &active_ops();
  ops->squared_error(n, pred.data(), target.data(), y.data());
  if (y.requires_grad()) {
    T const* pd = pred.data(); T const* td = target.data();
    int pv = pred.var(), tv = target.var(), yv = y.var();
    active_tape().record([=](tape& tp) {
      T const* gy = tp.grad_if_any<T>(yv);
      if (!gy) return;
      ops->squared_error_backward(n, pd, td, gy, pv >= 0 ? tp.grad<T>(pv) : nullptr, tv >= 0 ? tp.grad<T>(tv) : nullptr);
    });
  }
  return y;
}

template <class T>
basic_tensor<T> logitbinarycrossentropy(basic_tensor<T> const& logits, basic_tensor<T> const& target) {
  using namespace nitro::detail;
  if (!(logits.shape() == target.shape()))
    throw error("E-LOSS-005", "logitbinarycrossentropy: logits " + logits.shape().to_string() + " and target " + target.shape().to_string() + " differ",
                "pass targets of the logits' shape, with values in [0, 1]");
  const std::int64_t n = logits.numel();
  basic_tensor<T> y = make_output<T>(shape{}, needs_grad(logits, target));
  device_ops* ops = &active_ops();
  ops->binary_cross_entropy(n, logits.data(), target.data(), y.data());
  if (y.requires_grad()) {
    T const* xd = logits.data(); T const* td = target.data();
    int lv = logits.var(), tv = target.var(), yv = y.var();
    active_tape().record([=](tape& tp) {
      T const* gy = tp.grad_if_any<T>(yv);
      if (!gy) return;
      ops->binary_cross_entropy_backward(n, xd, td, gy, lv >= 0 ? tp.grad<T>(lv) : nullptr, tv >= 0 ? tp.grad<T>(tv) : nullptr);
    });
  }
  return y;
}

// How many columns of `logits` have their largest value where `target` does (one-hot/soft target)
// or at the class index `target` holds: a count, for metrics (acc = correct => samples). The step's
// backend counts (device_ops::classification_counts) where the logits are. `correct` leaves the
// count there, a one-element tensor in the step's arena (what nn::accuracy hands mean_of, so the
// count is added up on the device); `correct_count` reads it back now.
template <class T>
basic_tensor<T> correct(basic_tensor<T> const& logits, basic_tensor<T> const& target) {
  const std::int64_t C = logits.rank() <= 1 ? logits.numel() : logits.shape()[0];
  const std::int64_t B = C == 0 ? 0 : logits.numel() / C;
  const bool indices = !(target.shape() == logits.shape());
  basic_tensor<T> n = basic_tensor<T>::full(shape{}, T(0));  // in the step's arena: no allocation per step
  nitro::detail::active_ops().classification_counts(C, B, logits.data(), target.data(), indices, n.data(), static_cast<T*>(nullptr));
  return n;
}
template <class T>
T correct_count(basic_tensor<T> const& logits, basic_tensor<T> const& target) {
  return correct(logits, target).item();
}

}  // namespace nitro::nn
