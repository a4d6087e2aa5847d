// nitro/tensor/ops/reduce.hpp — differentiable reductions: sum, mean, along one dimension or all,
// logsumexp and max over the first (feature) dimension, argmax.
//
// A reduction along dimension d keeps it with extent 1, so the result broadcasts back against its
// input. Reducing everything gives a scalar (rank 0, one element).
#pragma once

#include "nitro/tensor/detail/record.hpp"

#include <cmath>    // exp, log
#include <cstdint>  // int64_t
#include <limits>   // lowest

namespace nitro {

namespace detail {
// Split a shape around dimension d: [inner (dims before d), extent of d, outer (dims after d)].
struct around { std::int64_t inner, extent, outer; };
inline around split_at(shape const& s, int d) {
  around a{1, s[d], 1};
  for (int i = 0; i < d; ++i) a.inner *= s[i];
  for (int i = d + 1; i < s.rank(); ++i) a.outer *= s[i];
  return a;
}
inline int normalize_dim(shape const& s, int d, char const* op) {
  int r = s.rank();
  if (d < 0) d += r;
  if (d < 0 || d >= r)
    throw error("E-SHAPE-007", std::string(op) + ": dimension " + std::to_string(d) + " is out of range for shape " + s.to_string(),
                "dimensions count from 0 (the first, fastest) to rank-1 (the batch); -1 is the batch");
  return d;
}
}  // namespace detail

// Sum of every element: a scalar.
template <class T>
basic_tensor<T> sum(basic_tensor<T> const& x) {
  basic_tensor<T> y = detail::make_output<T>(shape{}, detail::needs_grad(x));
  const std::int64_t n = x.numel();
  y[0] = detail::flat(x.data(), n).sum();
  if (y.requires_grad()) {
    int xv = x.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      detail::flat(t.grad<T>(xv), n) += gy[0];
    });
  }
  return y;
}
template <class T>
basic_tensor<T> mean(basic_tensor<T> const& x) {
  return sum(x) * (T(1) / static_cast<T>(x.numel() == 0 ? 1 : x.numel()));
}

// Sum along dimension d (kept, with extent 1).
template <class T>
basic_tensor<T> sum(basic_tensor<T> const& x, int dim) {
  int d = detail::normalize_dim(x.shape(), dim, "sum(x, dim)");
  shape out = x.shape();
  out[d] = 1;
  basic_tensor<T> y = detail::make_output<T>(out, detail::needs_grad(x));
  auto a = detail::split_at(x.shape(), d);
  T const* xd = x.data();
  T* yd = y.data();
  for (std::int64_t o = 0; o < a.outer; ++o) {
    T* yo = yd + o * a.inner;
    for (std::int64_t i = 0; i < a.inner; ++i) yo[i] = T(0);
    for (std::int64_t k = 0; k < a.extent; ++k) {
      T const* xk = xd + (o * a.extent + k) * a.inner;
      for (std::int64_t i = 0; i < a.inner; ++i) yo[i] += xk[i];
    }
  }
  if (y.requires_grad()) {
    int xv = x.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      T* gx = t.grad<T>(xv);
      for (std::int64_t o = 0; o < a.outer; ++o)
        for (std::int64_t k = 0; k < a.extent; ++k) {
          T* gk = gx + (o * a.extent + k) * a.inner;
          T const* go = gy + o * a.inner;
          for (std::int64_t i = 0; i < a.inner; ++i) gk[i] += go[i];
        }
    });
  }
  return y;
}
template <class T>
basic_tensor<T> mean(basic_tensor<T> const& x, int dim) {
  int d = detail::normalize_dim(x.shape(), dim, "mean(x, dim)");
  return sum(x, d) * (T(1) / static_cast<T>(x.shape()[d] == 0 ? 1 : x.shape()[d]));
}

// log(sum(exp(x), dim 0)), stable; the gradient is softmax.
template <class T>
basic_tensor<T> logsumexp(basic_tensor<T> const& x) {
  const std::int64_t f = x.rank() <= 1 ? x.numel() : x.shape()[0];
  const std::int64_t cols = f == 0 ? 0 : x.numel() / f;
  shape out = x.shape();
  if (out.rank() == 0) out = shape{1};
  out[0] = 1;
  basic_tensor<T> y = detail::make_output<T>(out, detail::needs_grad(x));
  T const* xd = x.data();
  for (std::int64_t c = 0; c < cols; ++c) {
    T const* xc = xd + c * f;
    T m = std::numeric_limits<T>::lowest();
    for (std::int64_t i = 0; i < f; ++i) m = xc[i] > m ? xc[i] : m;
    T s = 0;
    for (std::int64_t i = 0; i < f; ++i) s += std::exp(xc[i] - m);
    y[c] = m + std::log(s);
  }
  if (y.requires_grad()) {
    int xv = x.var(), yv = y.var();
    T const* yd = y.data();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      T* gx = t.grad<T>(xv);
      for (std::int64_t c = 0; c < cols; ++c)
        for (std::int64_t i = 0; i < f; ++i) gx[c * f + i] += gy[c] * std::exp(xd[c * f + i] - yd[c]);
    });
  }
  return y;
}

// Index of the largest value along dimension 0, per column, as values (0-based) of shape [1, ...].
// Not differentiable.
template <class T>
basic_tensor<T> argmax(basic_tensor<T> const& x) {
  const std::int64_t f = x.rank() <= 1 ? x.numel() : x.shape()[0];
  const std::int64_t cols = f == 0 ? 0 : x.numel() / f;
  shape out = x.shape();
  if (out.rank() == 0) out = shape{1};
  out[0] = 1;
  basic_tensor<T> y = basic_tensor<T>::empty(out);
  for (std::int64_t c = 0; c < cols; ++c) {
    T const* xc = x.data() + c * f;
    std::int64_t best = 0;
    for (std::int64_t i = 1; i < f; ++i) if (xc[i] > xc[best]) best = i;
    y[c] = static_cast<T>(best);
  }
  return y;
}

// Largest value along dimension 0, per column; the gradient goes to the (first) largest.
template <class T>
basic_tensor<T> max(basic_tensor<T> const& x) {
  const std::int64_t f = x.rank() <= 1 ? x.numel() : x.shape()[0];
  const std::int64_t cols = f == 0 ? 0 : x.numel() / f;
  shape out = x.shape();
  if (out.rank() == 0) out = shape{1};
  out[0] = 1;
  basic_tensor<T> y = detail::make_output<T>(out, detail::needs_grad(x));
  T const* xd = x.data();
  for (std::int64_t c = 0; c < cols; ++c) {
    T const* xc = xd + c * f;
    T m = xc[0];
    for (std::int64_t i = 1; i < f; ++i) m = xc[i] > m ? xc[i] : m;
    y[c] = m;
  }
  if (y.requires_grad()) {
    int xv = x.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      T* gx = t.grad<T>(xv);
      for (std::int64_t c = 0; c < cols; ++c) {
        T const* xc = xd + c * f;
        std::int64_t best = 0;
        for (std::int64_t i = 1; i < f; ++i) if (xc[i] > xc[best]) best = i;
        gx[c * f + best] += gy[c];
      }
    });
  }
  return y;
}

}  // namespace nitro
