// nitro/tensor/ops/softmax.hpp — softmax and log-softmax over the first (feature) dimension.
#pragma once

#include "nitro/tensor/detail/record.hpp"

#include <cmath>   // exp, log
#include <limits>  // lowest

namespace nitro {

namespace detail {
template <class T, bool Log>
basic_tensor<T> softmax_impl(basic_tensor<T> const& x) {
  const std::int64_t f = x.rank() <= 1 ? x.numel() : x.shape()[0];
  const std::int64_t cols = f == 0 ? 0 : x.numel() / f;
  basic_tensor<T> y = make_output<T>(x.shape(), needs_grad(x));
  T const* xd = x.data();
  T* yd = y.data();
  for (std::int64_t c = 0; c < cols; ++c) {
    T const* xc = xd + c * f;
    T* yc = yd + c * f;
    T m = std::numeric_limits<T>::lowest();
    for (std::int64_t i = 0; i < f; ++i) m = xc[i] > m ? xc[i] : m;
    T s = 0;
    for (std::int64_t i = 0; i < f; ++i) s += std::exp(xc[i] - m);
    if constexpr (Log) { T l = m + std::log(s); for (std::int64_t i = 0; i < f; ++i) yc[i] = xc[i] - l; }
    else { T inv = T(1) / s; for (std::int64_t i = 0; i < f; ++i) yc[i] = std::exp(xc[i] - m) * inv; }
  }
  if (y.requires_grad()) {
    int xv = x.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      T* gx = t.grad<T>(xv);
      for (std::int64_t c = 0; c < cols; ++c) {
        T const* g = gy + c * f;
        T const* s = yd + c * f;
        T* o = gx + c * f;
        if constexpr (Log) {  // dx = g - softmax * sum(g)
          T sg = 0;
          for (std::int64_t i = 0; i < f; ++i) sg += g[i];
          for (std::int64_t i = 0; i < f; ++i) o[i] += g[i] - std::exp(s[i]) * sg;
        } else {              // dx = s * (g - sum(g * s))
          T gs = 0;
          for (std::int64_t i = 0; i < f; ++i) gs += g[i] * s[i];
          for (std::int64_t i = 0; i < f; ++i) o[i] += s[i] * (g[i] - gs);
        }
      }
    });
  }
  return y;
}
}  // namespace detail

template <class T> basic_tensor<T> softmax(basic_tensor<T> const& x) { return detail::softmax_impl<T, false>(x); }
template <class T> basic_tensor<T> log_softmax(basic_tensor<T> const& x) { return detail::softmax_impl<T, true>(x); }

}  // namespace nitro
