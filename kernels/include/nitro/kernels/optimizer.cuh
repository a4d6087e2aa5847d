// nitro/kernels/optimizer.cuh — one fused optimizer update per parameter group, reading its
// scheduled values from the device-scalar block.
//
//   auto rule = nitro::optim::adamw();                  // any rule of optim/: a chain, a SAM wrapper, ...
//   auto h = nitro::cuda::constant_refs(rule, 1e-3, 1e-2);   // where eta, lambda, beta1, ... come from
//   h.eta = block.add(1e-3f);                           // a slot: a schedule writes it each step
//   nitro::cuda::group_optimizer opt(rule, n, stream);
//   opt.step(params, grads, h, step, backend.scalars(), clip_factor, stream);   // one launch per group
//
// One kernel walks the group's span of the flat buffers: clipped gradient, the rule's element
// function (the one the CPU program runs), decoupled decay toward the anchor (zero or a w0 copy) for
// the elements the decay mask selects, the step, the rule's states in flat buffers of the same span. The values come from the block on the
// device, so a schedule or set_device changes them with no recompile and no host synchronisation.
// Also here: the global-norm clip factor, computed on the device, and SAM/ASAM's perturbation.
// The per-element arithmetic is nitro/tensor/cuda/optimizer_math.hpp's (CPU-tested).
#pragma once

#include "nitro/tensor/cuda/optimizer_math.hpp"
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/cuda/scalars.hpp"
#include "nitro/kernels/pointwise.cuh"

#include <cuda_runtime.h>

#include <array>    // a rule's state buffers
#include <cstddef>  // size_t
#include <cstdint>  // uint32_t
#include <vector>   // masks

namespace nitro::cuda {

// One group's span of the flat buffers (device pointers), all of n elements; S: the rule's states.
template <std::size_t S>
struct group_span_ptrs {
  float* p = nullptr;
  float const* g = nullptr;
  std::array<float*, S> state{};              // the rule's state buffers (sgd's momentum buffer, adam's m and v, ...)
  float const* anchor = nullptr;              // null: decay toward zero
  std::uint32_t const* decay_bits = nullptr;  // null: `decay_all` everywhere
  bool decay_all = true;
  long long n = 0;
};

namespace kernels {

// The rule's constants are formed once per thread from the block (prepare on the device), then every
// element of the thread's stride runs the rule's element function and the weight step.
template <class R, bool Anchor, std::size_t N>
__global__ void group_update(R rule, group_span_ptrs<R::states::size> b, rule_refs<N> h, long long t, void const* scalars,
                             float const* grad_scale) {
  constexpr std::size_t S = R::states::size;
  const rule_step<R> k = rule_step_at(rule, h, scalars, t);
  const float gs = grad_scale ? *grad_scale : 1.0f;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < b.n; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float s[S > 0 ? S : 1];
    NITRO_UNROLL
    for (std::size_t j = 0; j < S; ++j) s[j] = b.state[j][i];
    float p = b.p[i];
    update_element<R, Anchor>(k, p, b.g[i] * gs, s, Anchor ? b.anchor[i] : 0.0f, mask_bit(b.decay_bits, i, b.decay_all));
    b.p[i] = p;
    NITRO_UNROLL
    for (std::size_t j = 0; j < S; ++j) b.state[j][i] = s[j];
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

// backup = p, then p += rho T^2 g / ||T g||: restore copies the backup back, exactly.
template <int = 0>
__global__ void sam_perturb(float* p, float const* g, float* backup, long long n, std::uint32_t const* perturb, std::uint32_t const* adaptive,
                            float eta_asam, scalar_ref rho, void const* scalars, double const* norm_sq) {
  const float k = static_cast<float>(rho.read(scalars) / (::sqrt(*norm_sq) + 1e-12));
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    float w = p[i];
    backup[i] = w;
    sam_ascend(w, g[i], mask_bit(perturb, i, true), mask_bit(adaptive, i, false), eta_asam, k);
    p[i] = w;
  }
}

}  // namespace kernels

// A group's rule and its states on the device: one flat buffer per state of the rule, over the
// group's span.
template <class R>
class group_optimizer {
 public:
  static constexpr std::size_t states = R::states::size;

  // Every copy and fill goes on `s`, the stream the updates run on: the legacy default stream does
  // not order against a backend's non-blocking streams.
  group_optimizer(R rule, long long n, cudaStream_t s) : m_rule(rule), m_n(n) {
    for (auto& st : m_state) {
      st.reserve(static_cast<std::size_t>(n > 0 ? n : 1));
      st.zero_async(s);
    }
  }

  R const& rule() const noexcept { return m_rule; }
  long long size() const noexcept { return m_n; }
  float* state(std::size_t k) noexcept { return m_state[k].data(); }

  // Bit i set: element i decays. Without a mask every element decays (when lambda > 0).
  void set_decay_mask(std::vector<std::uint32_t> const& bits, cudaStream_t s) {
    m_bits.reserve(bits.size() ? bits.size() : 1);
    NITRO_CUDA_CHECK(cudaMemcpyAsync(m_bits.data(), bits.data(), bits.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice, s));
    NITRO_CUDA_CHECK(cudaStreamSynchronize(s));  // `bits` is the caller's pageable vector: done with it before returning
    m_has_bits = true;
  }
  // The anchor decay pulls toward (w0): n device floats, copied.
  void set_anchor(float const* device_values, cudaStream_t s) {
    m_anchor.reserve(static_cast<std::size_t>(m_n > 0 ? m_n : 1));
    NITRO_CUDA_CHECK(cudaMemcpyAsync(m_anchor.data(), device_values, sizeof(float) * static_cast<std::size_t>(m_n), cudaMemcpyDeviceToDevice, s));
    m_has_anchor = true;
  }

  // One update of the group: t counts steps from 1; grad_scale (device, may be null) is the clip factor.
  void step(float* p, float const* g, rule_refs_of<R> const& h, long long t, void const* scalars, float const* grad_scale, cudaStream_t s) {
    if (m_n <= 0) return;
    group_span_ptrs<states> b;
    b.p = p;
    b.g = g;
    for (std::size_t k = 0; k < states; ++k) b.state[k] = m_state[k].data();
    b.anchor = m_has_anchor ? m_anchor.data() : nullptr;
    b.decay_bits = m_has_bits ? m_bits.data() : nullptr;
    b.n = m_n;
    const unsigned blocks = elementwise_blocks(m_n);
    if (m_has_anchor) kernels::group_update<R, true><<<blocks, 256, 0, s>>>(m_rule, b, h, t, scalars, grad_scale);
    else kernels::group_update<R, false><<<blocks, 256, 0, s>>>(m_rule, b, h, t, scalars, grad_scale);
    check_launch("nitro::cuda::kernels::group_update");
  }

 private:
  R m_rule;
  long long m_n;
  std::array<device_buffer<float>, states> m_state;
  device_buffer<float> m_anchor;
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

// SAM's first half: p += rho T^2 g / ||T g|| (the weights before kept in `backup`); sam_restore puts
// them back, bit for bit, before the update with the gradient taken at the perturbed point. norm_sq
// is a device double (scratch).
inline void sam_perturb(float* p, float const* g, float* backup, long long n, std::uint32_t const* perturb, std::uint32_t const* adaptive,
                        float eta_asam, scalar_ref rho, void const* scalars, double* norm_sq, cudaStream_t s) {
  if (n <= 0) return;
  NITRO_CUDA_CHECK(cudaMemsetAsync(norm_sq, 0, sizeof(double), s));
  const unsigned blocks = std::min(elementwise_blocks(n), 1024u);
  kernels::sam_norm<><<<blocks, 256, 0, s>>>(p, g, n, perturb, adaptive, eta_asam, norm_sq);
  check_launch("nitro::cuda::kernels::sam_norm");
  kernels::sam_perturb<><<<elementwise_blocks(n), 256, 0, s>>>(p, g, backup, n, perturb, adaptive, eta_asam, rho, scalars, norm_sq);
  check_launch("nitro::cuda::kernels::sam_perturb");
}
inline void sam_restore(float* p, float const* backup, long long n, cudaStream_t s) {
  if (n <= 0) return;
  NITRO_CUDA_CHECK(cudaMemcpyAsync(p, backup, sizeof(float) * static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice, s));
}

}  // namespace nitro::cuda
