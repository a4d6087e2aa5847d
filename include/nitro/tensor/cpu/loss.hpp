// nitro/tensor/cpu/loss.hpp — the CPU's losses: softmax cross-entropy, squared error, binary
// cross-entropy, each a mean, forward and backward; and the metrics' counts.
//
//   cpu::cross_entropy<float>(C, B, logits, target, /*indices=*/true, s, p, loss);
//   cpu::cross_entropy_backward<float>(C, B, p, target, true, s, gloss, glogits);     // += ...
//   cpu::squared_error<float>(n, a, b, loss);  cpu::squared_error_backward<float>(n, a, b, gloss, ga, gb);
//
// Cross-entropy walks the columns with tensor/loss.hpp's one-column functions (what the CUDA
// kernels run); the element-wise means are Eigen's vectorised sums, tested against loss.hpp's
// one-element definitions. The loss's gradient is read through a pointer (gloss[0]), as a device
// reads it. A class index outside [0, C) is E-LOSS-003.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/runtime.hpp"
#include "nitro/tensor/cpu/elementwise.hpp"  // detail::flat
#include "nitro/tensor/loss.hpp"

#include <Eigen/Core>

#include <cstdint>  // int64_t
#include <string>   // messages

namespace nitro::cpu {

namespace detail {
// Column c's class index, checked.
template <class T>
std::int64_t class_index(T const* target, std::int64_t c, std::int64_t C) {
  const std::int64_t k = static_cast<std::int64_t>(target[c]);
  if (k < 0 || k >= C)
    throw error("E-LOSS-003", "logitcrossentropy: class index " + std::to_string(k) + " is outside [0, " + std::to_string(C) + ")",
                "class indices count from 0 to classes - 1");
  return k;
}
}  // namespace detail

// logits [C, B]; target [C, B] (soft or one-hot) or B class indices (`indices`); p [C, B] receives
// each column's softmax; loss[0] the mean over the columns.
template <class T>
void cross_entropy(std::int64_t C, std::int64_t B, T const* logits, T const* target, bool indices, T smoothing, T* p, T* loss) {
  const T off = smoothing / static_cast<T>(C), on = T(1) - smoothing;
  T total = 0;
  for (std::int64_t c = 0; c < B; ++c) {
    const std::int64_t k = indices ? detail::class_index(target, c, C) : -1;
    total += loss::cross_entropy_column(logits + c * C, C, indices ? nullptr : target + c * C, k, on, off, p + c * C);
  }
  loss[0] = B ? total / static_cast<T>(B) : T(0);
}
template <class T>
void cross_entropy_backward(std::int64_t C, std::int64_t B, T const* p, T const* target, bool indices, T smoothing, T const* gloss,
                            T* glogits) {
  const T off = smoothing / static_cast<T>(C), on = T(1) - smoothing;
  const T scale = gloss[0] / static_cast<T>(B);
  for (std::int64_t c = 0; c < B; ++c)
    loss::cross_entropy_column_backward(p + c * C, C, indices ? nullptr : target + c * C,
                                        indices ? static_cast<std::int64_t>(target[c]) : std::int64_t(-1), on, off, scale,
                                        glogits + c * C);
}

// loss[0] = mean (a - b)^2; ga += 2 gloss (a - b) / n, gb -= the same (either may be null).
template <class T>
void squared_error(std::int64_t n, T const* a, T const* b, T* loss) {
  using detail::flat;
  loss[0] = n ? (flat(a, n) - flat(b, n)).square().sum() / static_cast<T>(n) : T(0);
}
template <class T>
void squared_error_backward(std::int64_t n, T const* a, T const* b, T const* gloss, T* ga, T* gb) {
  using detail::flat;
  const T k = T(2) * gloss[0] / static_cast<T>(n);
  if (ga) flat(ga, n) += (flat(a, n) - flat(b, n)) * k;
  if (gb) flat(gb, n) -= (flat(a, n) - flat(b, n)) * k;
}

// loss[0] = mean of sigmoid + binary cross-entropy of logits x and targets t; gx += gloss
// (sigmoid(x) - t) / n, gt -= gloss x / n (either may be null).
template <class T>
void binary_cross_entropy(std::int64_t n, T const* x, T const* t, T* loss) {
  using detail::flat;
  auto X = flat(x, n);
  loss[0] = n ? (X.max(T(0)) - X * flat(t, n) + (-(X.abs())).exp().log1p()).sum() / static_cast<T>(n) : T(0);
}
template <class T>
void binary_cross_entropy_backward(std::int64_t n, T const* x, T const* t, T const* gloss, T* gx, T* gt) {
  using detail::flat;
  const T k = gloss[0] / static_cast<T>(n);
  if (gx) flat(gx, n) += (flat(x, n).logistic() - flat(t, n)) * k;
  if (gt) flat(gt, n) -= flat(x, n) * k;
}

// The metrics' counts (device_ops::classification_counts): correct[0] (when not null) += the
// columns predicted right; confusion (when not null) += 1 at (true, predicted) of each column with
// a true class in [0, C). Exact: counts are integers.
template <class T>
void classification_counts(std::int64_t C, std::int64_t B, T const* logits, T const* target, bool indices, T* correct, T* confusion) {
  T right = 0;
  for (std::int64_t c = 0; c < B; ++c) {
    const std::int64_t predicted = loss::argmax_column(logits + c * C, C), truth = loss::target_class(target, indices, c, C);
    right += predicted == truth ? T(1) : T(0);
    if (confusion && truth >= 0 && truth < C) confusion[truth + predicted * C] += T(1);
  }
  if (correct) correct[0] += right;
}

#if NITRO_RUNTIME_EXTERN
// Compiled once, in nitro::runtime (src/runtime.cpp), as the element-wise kernels.
#define NITRO_DETAIL_LOSS(T)                                                                                            \
  extern template void cross_entropy<T>(std::int64_t, std::int64_t, T const*, T const*, bool, T, T*, T*);              \
  extern template void cross_entropy_backward<T>(std::int64_t, std::int64_t, T const*, T const*, bool, T, T const*, T*); \
  extern template void squared_error<T>(std::int64_t, T const*, T const*, T*);                                          \
  extern template void squared_error_backward<T>(std::int64_t, T const*, T const*, T const*, T*, T*);                   \
  extern template void binary_cross_entropy<T>(std::int64_t, T const*, T const*, T*);                                   \
  extern template void binary_cross_entropy_backward<T>(std::int64_t, T const*, T const*, T const*, T*, T*);                   \
  extern template void classification_counts<T>(std::int64_t, std::int64_t, T const*, T const*, bool, T*, T*);
NITRO_DETAIL_LOSS(float)
NITRO_DETAIL_LOSS(double)
#undef NITRO_DETAIL_LOSS
#endif

}  // namespace nitro::cpu
