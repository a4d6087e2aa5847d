// nitro/tensor/loss.hpp — the losses a backend computes, and their arithmetic on one column or
// one element.
//
//   ops.cross_entropy(C, B, logits, target, /*indices=*/true, smoothing, p, loss);   // device_ops.hpp
//   ops.cross_entropy_backward(C, B, p, target, true, smoothing, gloss, glogits);    // glogits += ...
//
// The kernels table takes these; nitro::nn's losses (nn/losses.hpp) check their arguments and
// record them on the tape. Each is a mean: cross-entropy over the B columns, the squared error and
// the binary cross-entropy over every element, as in PyTorch. What one column or one element
// contributes is written once here, NITRO_HD: the CUDA kernels run these functions; the CPU runs
// the same arithmetic in its own loops (tensor/cpu/loss.hpp) and is tested against them.
//
// The metrics' counts (device_ops::classification_counts) compare each column's first largest
// logit with its target's class, the one definition of "correct" (argmax_column, target_class).
//
// Cross-entropy with label smoothing s: the target column becomes w_i = on t_i + off (soft or
// one-hot t) or (i == k ? on : 0) + off (class index k), with on = 1 - s and off = s / C.
#pragma once

#include "nitro/tensor/cuda/hd.hpp"
#include "nitro/tensor/elementwise.hpp"

#include <cstdint>  // int64_t
#include <limits>   // lowest

namespace nitro::loss {

// The smoothed target's weight of class i: t is the column's soft target, or null with `index`.
template <class T>
NITRO_HD_INLINE T target_weight(T const* t, std::int64_t index, std::int64_t i, T on, T off) {
  return t ? on * t[i] + off : (i == index ? on : T(0)) + off;
}

// One column of C logits x: writes its softmax into p and returns its loss -sum w_i log p_i.
template <class T>
NITRO_HD_INLINE T cross_entropy_column(T const* x, std::int64_t C, T const* t, std::int64_t index, T on, T off, T* p) {
  T m = std::numeric_limits<T>::lowest();
  for (std::int64_t i = 0; i < C; ++i) m = x[i] > m ? x[i] : m;
  T z = 0;
  for (std::int64_t i = 0; i < C; ++i) {
    p[i] = elementwise::exp_(x[i] - m);
    z += p[i];
  }
  const T lz = m + elementwise::log_(z), inv = T(1) / z;
  for (std::int64_t i = 0; i < C; ++i) p[i] *= inv;
  T l = 0;
  for (std::int64_t i = 0; i < C; ++i) l -= target_weight(t, index, i, on, off) * (x[i] - lz);
  return l;
}

// Its gradient, scaled: g_i += scale (mass p_i - w_i), mass = sum w (1 for a class index).
template <class T>
NITRO_HD_INLINE void cross_entropy_column_backward(T const* p, std::int64_t C, T const* t, std::int64_t index, T on, T off, T scale,
                                                   T* g) {
  if (!t) {
    for (std::int64_t i = 0; i < C; ++i) g[i] += scale * (p[i] - (i == index ? on : T(0)) - off);
    return;
  }
  T mass = 0;
  for (std::int64_t i = 0; i < C; ++i) mass += on * t[i] + off;
  for (std::int64_t i = 0; i < C; ++i) g[i] += scale * (mass * p[i] - (on * t[i] + off));
}

// The squared error of one element, and its derivative in a (that in b is its negative).
template <class T> NITRO_HD_INLINE T squared_error(T a, T b) { return (a - b) * (a - b); }
template <class T> NITRO_HD_INLINE T squared_error_da(T a, T b) { return T(2) * (a - b); }

// Sigmoid + binary cross-entropy of one logit x and target t, stable: max(x, 0) - x t + log(1 + exp(-|x|));
// its derivatives: sigmoid(x) - t in x, -x in t.
template <class T>
NITRO_HD_INLINE T binary_cross_entropy(T x, T t) {
  return (x > T(0) ? x : T(0)) - x * t + elementwise::log1p_(elementwise::exp_(-elementwise::abs_(x)));
}
template <class T> NITRO_HD_INLINE T binary_cross_entropy_dx(T x, T t) { return elementwise::sigmoid(x) - t; }
template <class T> NITRO_HD_INLINE T binary_cross_entropy_dt(T x, T) { return -x; }

// ---- the metrics' counts ------------------------------------------------------------------------
// A column's class: the index of its first largest value.
template <class T>
NITRO_HD_INLINE std::int64_t argmax_column(T const* x, std::int64_t C) {
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < C; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}
// Column c's true class: the index `target` holds (indices), or the first largest entry of its
// one-hot/soft column. An index outside [0, C) is returned as it is (no column's prediction).
template <class T>
NITRO_HD_INLINE std::int64_t target_class(T const* target, bool indices, std::int64_t c, std::int64_t C) {
  return indices ? static_cast<std::int64_t>(target[c]) : argmax_column(target + c * C, C);
}

}  // namespace nitro::loss
