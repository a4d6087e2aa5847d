// nitro/kernels/optimizer.cuh — one fused optimizer update per parameter group, reading its
// scheduled values from the device-scalar block.
//
//   nitro::cuda::rule_refs h;                          // where eta, beta1, ... come from
//   h.eta = block.add(1e-3f);                          // a slot: a schedule writes it each step
//   nitro::cuda::group_optimizer opt(rule_kind::adamw, n);
//   opt.step(params, grads, h, step, backend.scalars(), clip_factor, stream);   // one launch per group
//
// One kernel walks the group's span of the flat buffers: clipped gradient, decoupled decay toward
// the anchor (zero or a w0 copy) for the elements the decay mask selects, the rule's update, the
// rule's state (m, v) in flat buffers of the same span. The values come from the block on the
// device, so a schedule or set_device changes them with no recompile and no host synchronisation.
// Also here: the global-norm clip factor, computed on the device, and SAM/ASAM's perturbation.
// The per-element arithmetic is nitro/tensor/cuda/optimizer_math.hpp's (CPU-tested).
#pragma once

#include "nitro/tensor/cuda/optimizer_math.hpp"
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/cuda/scalars.hpp"
#include "nitro/kernels/pointwise.cuh"

#include <cuda_runtime.h>

#include <cstdint>  // uint32_t
#include <vector>   // masks

namespace nitro::cuda {

// Where each hyperparameter of a rule comes from: a constant, or a slot of the scalar block.
struct rule_refs {
  scalar_ref eta = scalar_ref::constant(1e-3);
  scalar_ref beta1 = scalar_ref::constant(0.9), beta2 = scalar_ref::constant(0.999), eps = scalar_ref::constant(1e-8);
  scalar_ref lambda = scalar_ref::constant(0.0);
  scalar_ref momentum = scalar_ref::constant(0.0), dampening = scalar_ref::constant(0.0);
  bool nesterov = false;
  float ratio = 1.0f;  // the group's learning-rate ratio: eta * ratio

  NITRO_HD_INLINE rule_values read(void const* block) const {
    rule_values v;
    v.eta = static_cast<float>(eta.read(block)) * ratio;
    v.beta1 = static_cast<float>(beta1.read(block));
    v.beta2 = static_cast<float>(beta2.read(block));
    v.eps = static_cast<float>(eps.read(block));
    v.lambda = static_cast<float>(lambda.read(block));
    v.momentum = static_cast<float>(momentum.read(block));
    v.dampening = static_cast<float>(dampening.read(block));
    v.nesterov = nesterov;
    return v;
  }
};

// One group's span of the flat buffers (device pointers), all of n elements.
struct group_span_ptrs {
  float* p = nullptr;
  float const* g = nullptr;
  float* m = nullptr;                        // rule state 1 (sgd's momentum buffer, adam's m, lion's m)
  float* v = nullptr;                        // rule state 2 (adam's v)
  float const* anchor = nullptr;             // null: decay toward zero
  std::uint32_t const* decay_bits = nullptr;  // null: `decay_all` everywhere
  bool decay_all = true;
  long long n = 0;
};

namespace kernels {

template <rule_kind R>
__global__ void group_update(group_span_ptrs b, rule_refs h, long long t, void const* scalars, float const* grad_scale) {
  const rule_values v = h.read(scalars);
  const adam_corrections c = adam_corrections_at(v.beta1, v.beta2, t);
  const float gs = grad_scale ? *grad_scale : 1.0f;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < b.n; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float p = b.p[i], m = b.m ? b.m[i] : 0.0f, s2 = b.v ? b.v[i] : 0.0f;
    update_element<R>(p, b.g[i] * gs, m, s2, b.anchor ? b.anchor[i] : 0.0f, mask_bit(b.decay_bits, i, b.decay_all), v, c);
    b.p[i] = p;
    if (b.m) b.m[i] = m;
    if (b.v) b.v[i] = s2;
  }
}

// factor = min(1, max_norm / (sqrt(sum of squares) + 1e-6)), on the device.
template <int = 0>
__global__ void clip_factor(double const* sum_sq, scalar_ref max_norm, void const* scalars, float* factor) {
  if (threadIdx.x == 0 && blockIdx.x == 0)
    *factor = clip_scale(static_cast<float>(::sqrt(*sum_sq)), static_cast<float>(max_norm.read(scalars)));
}

template <int = 0>
__global__ void sam_norm(float const* p, float const* g, long long n, std::uint32_t const* perturb, std::uint32_t const* adaptive,
                         float eta_asam, double* out) {
  double s = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x)
    s += sam_norm_term(p[i], g[i], mask_bit(perturb, i, true), mask_bit(adaptive, i, false), eta_asam);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

// p += e, e = rho T^2 g / ||T g||, remembered in `e` for the restore.
template <int = 0>
__global__ void sam_perturb(float* p, float const* g, float* e, long long n, std::uint32_t const* perturb, std::uint32_t const* adaptive,
                            float eta_asam, scalar_ref rho, void const* scalars, double const* norm_sq) {
  const float k = static_cast<float>(rho.read(scalars) / (::sqrt(*norm_sq) + 1e-12));
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float d = sam_perturbation(p[i], g[i], mask_bit(perturb, i, true), mask_bit(adaptive, i, false), eta_asam, k);
    e[i] = d;
    p[i] += d;
  }
}

template <int = 0>
__global__ void sam_restore(float* p, float const* e, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x)
    p[i] -= e[i];
}

}  // namespace kernels

// A group's rule and its state on the device.
class group_optimizer {
 public:
  group_optimizer(rule_kind rule, long long n) : m_rule(rule), m_n(n) {
    m_m.reserve(static_cast<std::size_t>(n > 0 ? n : 1));
    if (rule == rule_kind::adamw) m_v.reserve(static_cast<std::size_t>(n > 0 ? n : 1));
    NITRO_CUDA_CHECK(cudaMemset(m_m.data(), 0, sizeof(float) * m_m.capacity()));
    if (m_v.data()) NITRO_CUDA_CHECK(cudaMemset(m_v.data(), 0, sizeof(float) * m_v.capacity()));
  }

  rule_kind rule() const noexcept { return m_rule; }
  long long size() const noexcept { return m_n; }
  float* state(int k) noexcept { return k == 0 ? m_m.data() : m_v.data(); }

  // Bit i set: element i decays. Without a mask every element decays (when lambda > 0).
  void set_decay_mask(std::vector<std::uint32_t> const& bits) {
    m_bits.reserve(bits.size() ? bits.size() : 1);
    NITRO_CUDA_CHECK(cudaMemcpy(m_bits.data(), bits.data(), bits.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
    m_has_bits = true;
  }
  // The anchor decay pulls toward (w0): n device floats, copied.
  void set_anchor(float const* device_values, cudaStream_t s) {
    m_anchor.reserve(static_cast<std::size_t>(m_n > 0 ? m_n : 1));
    NITRO_CUDA_CHECK(cudaMemcpyAsync(m_anchor.data(), device_values, sizeof(float) * static_cast<std::size_t>(m_n), cudaMemcpyDeviceToDevice, s));
    m_has_anchor = true;
  }

  // One update of the group: t counts steps from 1; grad_scale (device, may be null) is the clip factor.
  void step(float* p, float const* g, rule_refs const& h, long long t, void const* scalars, float const* grad_scale, cudaStream_t s) {
    if (m_n <= 0) return;
    group_span_ptrs b;
    b.p = p;
    b.g = g;
    b.m = m_m.data();
    b.v = m_rule == rule_kind::adamw ? m_v.data() : nullptr;
    b.anchor = m_has_anchor ? m_anchor.data() : nullptr;
    b.decay_bits = m_has_bits ? m_bits.data() : nullptr;
    b.n = m_n;
    const unsigned blocks = elementwise_blocks(m_n);
    switch (m_rule) {
      case rule_kind::sgd: kernels::group_update<rule_kind::sgd><<<blocks, 256, 0, s>>>(b, h, t, scalars, grad_scale); break;
      case rule_kind::adamw: kernels::group_update<rule_kind::adamw><<<blocks, 256, 0, s>>>(b, h, t, scalars, grad_scale); break;
      case rule_kind::lion: kernels::group_update<rule_kind::lion><<<blocks, 256, 0, s>>>(b, h, t, scalars, grad_scale); break;
    }
    check_launch("nitro::cuda::kernels::group_update");
  }

 private:
  rule_kind m_rule;
  long long m_n;
  device_buffer<float> m_m, m_v, m_anchor;
  device_buffer<std::uint32_t> m_bits;
  bool m_has_bits = false, m_has_anchor = false;
};

// The global-norm clip factor of a gradient buffer, left on the device in *factor (a float):
// sum_sq is a device double used as scratch.
inline void clip_factor(float const* grads, long long n, scalar_ref max_norm, void const* scalars, double* sum_sq, float* factor, cudaStream_t s) {
  NITRO_CUDA_CHECK(cudaMemsetAsync(sum_sq, 0, sizeof(double), s));
  sum_squares(grads, n, sum_sq, s);
  kernels::clip_factor<><<<1, 1, 0, s>>>(sum_sq, max_norm, scalars, factor);
  check_launch("nitro::cuda::kernels::clip_factor");
}

// SAM's first half: p += rho T^2 g / ||T g|| (remembered in e); sam_restore undoes it before the
// update with the gradient taken at the perturbed point. norm_sq is a device double (scratch).
inline void sam_perturb(float* p, float const* g, float* e, long long n, std::uint32_t const* perturb, std::uint32_t const* adaptive,
                        float eta_asam, scalar_ref rho, void const* scalars, double* norm_sq, cudaStream_t s) {
  if (n <= 0) return;
  NITRO_CUDA_CHECK(cudaMemsetAsync(norm_sq, 0, sizeof(double), s));
  const unsigned blocks = std::min(elementwise_blocks(n), 1024u);
  kernels::sam_norm<><<<blocks, 256, 0, s>>>(p, g, n, perturb, adaptive, eta_asam, norm_sq);
  check_launch("nitro::cuda::kernels::sam_norm");
  kernels::sam_perturb<><<<elementwise_blocks(n), 256, 0, s>>>(p, g, e, n, perturb, adaptive, eta_asam, rho, scalars, norm_sq);
  check_launch("nitro::cuda::kernels::sam_perturb");
}
inline void sam_restore(float* p, float const* e, long long n, cudaStream_t s) {
  if (n <= 0) return;
  kernels::sam_restore<><<<elementwise_blocks(n), 256, 0, s>>>(p, e, n);
  check_launch("nitro::cuda::kernels::sam_restore");
}

}  // namespace nitro::cuda
