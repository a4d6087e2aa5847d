// nitro/optim/plain_adamw.hpp — AdamW over one flat buffer (PyTorch's torch.optim.AdamW update).
//
// The first handle trains every parameter with this rule; the optimizer room's groups, rule
// chains and schedules build on the same flat-buffer update.
#pragma once

#include "nitro/optim/param_store.hpp"

#include <cmath>    // sqrt, pow
#include <cstdint>  // int64_t

namespace nitro::optim {

struct adamw_hyper {
  double eta = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, lambda = 1e-2;
};

template <class T>
class plain_adamw {
 public:
  explicit plain_adamw(std::int64_t n) : m_n(n), m_m(detail::aligned_zeros<T>(n)), m_v(detail::aligned_zeros<T>(n)) {}

  // One step over the whole buffer: decoupled decay, then the Adam update with bias correction.
  void update(T* p, T const* g, adamw_hyper const& h) {
    ++m_t;
    const T b1 = T(h.beta1), b2 = T(h.beta2), eps = T(h.eps);
    const T c1 = T(1) / (T(1) - T(std::pow(h.beta1, double(m_t))));
    const T c2 = T(1) / std::sqrt(T(1) - T(std::pow(h.beta2, double(m_t))));
    const T lr = T(h.eta), decay = T(1) - T(h.eta * h.lambda);
    T* m = m_m.get();
    T* v = m_v.get();
    for (std::int64_t i = 0; i < m_n; ++i) {
      const T gi = g[i];
      m[i] = b1 * m[i] + (T(1) - b1) * gi;
      v[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
      p[i] = p[i] * decay - lr * (m[i] * c1) / (std::sqrt(v[i]) * c2 + eps);
    }
  }
  std::int64_t steps() const noexcept { return m_t; }

 private:
  std::int64_t m_n;
  std::unique_ptr<T[], detail::free_deleter> m_m, m_v;
  std::int64_t m_t = 0;
};

}  // namespace nitro::optim
