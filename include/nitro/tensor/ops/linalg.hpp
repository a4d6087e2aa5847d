// nitro/tensor/ops/linalg.hpp — matrix products and transposes, on the step's kernels (gemm, transpose).
#pragma once

#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/detail/record.hpp"

namespace nitro {

// [m, k] x [k, n] -> [m, n]
template <class T>
basic_tensor<T> matmul(basic_tensor<T> const& a, basic_tensor<T> const& b) {
  if (a.rank() != 2 || b.rank() != 2 || a.size(1) != b.size(0))
    throw error("E-SHAPE-008", "matmul: shapes " + a.shape().to_string() + " and " + b.shape().to_string() + " do not multiply",
                "pass [m, k] and [k, n] matrices");
  const std::int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  basic_tensor<T> y = detail::make_output<T>(shape{m, n}, detail::needs_grad(a, b));
  device_ops* ops = &detail::active_ops();
  ops->gemm(false, false, m, n, k, T(1), a.data(), m, b.data(), k, T(0), y.data(), m);
  if (y.requires_grad()) {
    T const* ad = a.data(); T const* bd = b.data();
    int av = a.var(), bv = b.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      if (av >= 0) ops->gemm(false, true, m, k, n, T(1), gy, m, bd, k, T(1), t.grad<T>(av), m);   // dA += G B^T
      if (bv >= 0) ops->gemm(true, false, k, n, m, T(1), ad, m, gy, m, T(1), t.grad<T>(bv), k);   // dB += A^T G
    });
  }
  return y;
}

template <class T>
basic_tensor<T> transpose(basic_tensor<T> const& a) {
  if (a.rank() != 2)
    throw error("E-SHAPE-009", "transpose: expects a matrix, got shape " + a.shape().to_string(), "reshape to two dimensions first");
  const std::int64_t m = a.size(0), n = a.size(1);
  basic_tensor<T> y = detail::make_output<T>(shape{n, m}, detail::needs_grad(a));
  device_ops* ops = &detail::active_ops();
  ops->transpose(m, n, a.data(), y.data(), false);
  if (y.requires_grad()) {
    int av = a.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      ops->transpose(n, m, gy, t.grad<T>(av), true);
    });
  }
  return y;
}

}  // namespace nitro
