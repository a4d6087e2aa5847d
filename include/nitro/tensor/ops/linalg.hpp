// nitro/tensor/ops/linalg.hpp — matrix products and transposes (Eigen's GEMM on the CPU).
#pragma once

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
  detail::mat_map<T>(y.data(), m, n).noalias() = detail::cmat_map<T>(a.data(), m, k) * detail::cmat_map<T>(b.data(), k, n);
  if (y.requires_grad()) {
    T const* ad = a.data(); T const* bd = b.data();
    int av = a.var(), bv = b.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      auto G = detail::cmat_map<T>(gy, m, n);
      if (av >= 0) detail::mat_map<T>(t.grad<T>(av), m, k).noalias() += G * detail::cmat_map<T>(bd, k, n).transpose();
      if (bv >= 0) detail::mat_map<T>(t.grad<T>(bv), k, n).noalias() += detail::cmat_map<T>(ad, m, k).transpose() * G;
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
  detail::mat_map<T>(y.data(), n, m) = detail::cmat_map<T>(a.data(), m, n).transpose();
  if (y.requires_grad()) {
    int av = a.var(), yv = y.var();
    detail::active_tape().record([=](tape& t) {
      T const* gy = t.grad_if_any<T>(yv);
      if (!gy) return;
      detail::mat_map<T>(t.grad<T>(av), m, n) += detail::cmat_map<T>(gy, n, m).transpose();
    });
  }
  return y;
}

}  // namespace nitro
