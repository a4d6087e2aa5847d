// nitro/tensor/cpu/reduction.hpp — the CPU's reductions and softmax.
//
//   cpu::reduce<float>(reduce_op::sum, reduction_at(s, 1), x, y);
//   cpu::reduce_backward<float>(reduce_op::logsumexp, columns_of(s), x, y, gy, gx);   // gx += ...
//   cpu::softmax<float>(/*log=*/false, rows, cols, x, y);                            // per column
//   cpu::softmax_backward<float>(false, rows, cols, y, gy, gx);                      // gx += ...
//
// A whole-tensor sum is Eigen's (vectorised); the rest walk the values in order. tensor/reduction.hpp
// says what each computes.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/tensor/reduction.hpp"

#include <Eigen/Core>

#include <cmath>    // exp, log
#include <cstdint>  // int64_t
#include <limits>   // lowest

namespace nitro::cpu {

template <class T>
void reduce(reduce_op op, reduction r, T const* x, T* y) {
  if (op == reduce_op::sum && r.inner == 1 && r.outer == 1) {
    y[0] = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x, r.extent).sum();
    return;
  }
  for (std::int64_t o = 0; o < r.outer; ++o)
    for (std::int64_t i = 0; i < r.inner; ++i) {
      T const* xs = x + o * r.extent * r.inner + i;  // the values reduced, r.inner apart
      auto at = [&](std::int64_t k) { return xs[k * r.inner]; };
      T v = T(0);
      switch (op) {
        case reduce_op::sum:
          for (std::int64_t k = 0; k < r.extent; ++k) v += at(k);
          break;
        case reduce_op::max:
          v = r.extent ? at(0) : T(0);
          for (std::int64_t k = 1; k < r.extent; ++k) v = at(k) > v ? at(k) : v;
          break;
        case reduce_op::logsumexp: {
          T m = std::numeric_limits<T>::lowest();
          for (std::int64_t k = 0; k < r.extent; ++k) m = at(k) > m ? at(k) : m;
          T s = 0;
          for (std::int64_t k = 0; k < r.extent; ++k) s += std::exp(at(k) - m);
          v = m + std::log(s);
          break;
        }
        case reduce_op::argmax: {
          std::int64_t best = 0;
          for (std::int64_t k = 1; k < r.extent; ++k)
            if (at(k) > at(best)) best = k;
          v = static_cast<T>(best);
          break;
        }
      }
      y[o * r.inner + i] = v;
    }
}

template <class T>
void reduce_backward(reduce_op op, reduction r, T const* x, T const* y, T const* gy, T* gx) {
  if (op == reduce_op::argmax) return;
  if (op == reduce_op::sum && r.inner == 1 && r.outer == 1) {
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(gx, r.extent) += gy[0];
    return;
  }
  for (std::int64_t o = 0; o < r.outer; ++o)
    for (std::int64_t i = 0; i < r.inner; ++i) {
      const std::int64_t first = o * r.extent * r.inner + i, j = o * r.inner + i;
      switch (op) {
        case reduce_op::sum:
          for (std::int64_t k = 0; k < r.extent; ++k) gx[first + k * r.inner] += gy[j];
          break;
        case reduce_op::max: {
          std::int64_t best = 0;
          for (std::int64_t k = 1; k < r.extent; ++k)
            if (x[first + k * r.inner] > x[first + best * r.inner]) best = k;
          if (r.extent) gx[first + best * r.inner] += gy[j];
          break;
        }
        case reduce_op::logsumexp:
          for (std::int64_t k = 0; k < r.extent; ++k) gx[first + k * r.inner] += gy[j] * std::exp(x[first + k * r.inner] - y[j]);
          break;
        case reduce_op::argmax: break;
      }
    }
}

// Over each of `cols` columns of `rows` values: y = softmax(x), or log_softmax(x) when `log`.
template <class T>
void softmax(bool log, std::int64_t rows, std::int64_t cols, T const* x, T* y) {
  for (std::int64_t c = 0; c < cols; ++c) {
    T const* xc = x + c * rows;
    T* yc = y + c * rows;
    T m = std::numeric_limits<T>::lowest();
    for (std::int64_t i = 0; i < rows; ++i) m = xc[i] > m ? xc[i] : m;
    T s = 0;
    for (std::int64_t i = 0; i < rows; ++i) s += std::exp(xc[i] - m);
    if (log) {
      const T l = m + std::log(s);
      for (std::int64_t i = 0; i < rows; ++i) yc[i] = xc[i] - l;
    } else {
      const T inv = T(1) / s;
      for (std::int64_t i = 0; i < rows; ++i) yc[i] = std::exp(xc[i] - m) * inv;
    }
  }
}
// gx += the gradient of x, from the forward's y and the gradient of y.
template <class T>
void softmax_backward(bool log, std::int64_t rows, std::int64_t cols, T const* y, T const* gy, T* gx) {
  for (std::int64_t c = 0; c < cols; ++c) {
    T const* g = gy + c * rows;
    T const* s = y + c * rows;
    T* o = gx + c * rows;
    if (log) {  // dx = g - softmax * sum(g)
      T sg = 0;
      for (std::int64_t i = 0; i < rows; ++i) sg += g[i];
      for (std::int64_t i = 0; i < rows; ++i) o[i] += g[i] - std::exp(s[i]) * sg;
    } else {  // dx = s * (g - sum(g * s))
      T gs = 0;
      for (std::int64_t i = 0; i < rows; ++i) gs += g[i] * s[i];
      for (std::int64_t i = 0; i < rows; ++i) o[i] += s[i] * (g[i] - gs);
    }
  }
}

#if NITRO_RUNTIME_EXTERN
// Compiled once, in nitro::runtime (src/runtime.cpp), as the element-wise kernels.
#define NITRO_DETAIL_REDUCTION(T)                                                                         \
  extern template void reduce<T>(reduce_op, reduction, T const*, T*);                                    \
  extern template void reduce_backward<T>(reduce_op, reduction, T const*, T const*, T const*, T*);       \
  extern template void softmax<T>(bool, std::int64_t, std::int64_t, T const*, T*);                       \
  extern template void softmax_backward<T>(bool, std::int64_t, std::int64_t, T const*, T const*, T*);
NITRO_DETAIL_REDUCTION(float)
NITRO_DETAIL_REDUCTION(double)
#undef NITRO_DETAIL_REDUCTION
#endif

}  // namespace nitro::cpu
