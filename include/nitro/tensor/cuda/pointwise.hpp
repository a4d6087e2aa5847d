// nitro/tensor/cuda/pointwise.hpp — the per-element arithmetic the CUDA kernels share with the CPU.
//
//   round_tf32(x)                        the value a TF32 tensor-core product sees (cvt.rna.tf32.f32)
//   act_math<activation_kind::relu>      forward, and the backward from what the forward saved
//   softmax_xent(...)                    one sample's softmax cross-entropy with label smoothing, its
//                                        gradient and whether its arg-max is right
//
// Everything is NITRO_HD: nvcc compiles it into the kernels, g++ into the CPU tests that check it
// against the Eigen backend (tests/unit/test_cuda_tiles.cpp). Not here: tiles and their layouts
// (tile.hpp), the optimizer's update of one element (optimizer_math.hpp).
#pragma once

#include "nitro/tensor/cuda/hd.hpp"

#include <cmath>    // expf, tanhf, erff, logf on the host
#include <cstdint>  // uint32_t
#include <cstring>  // memcpy: bit casts that compile on both sides

namespace nitro::cuda {

// ---- TF32 ----------------------------------------------------------------------------------------
// Round to the 10-bit mantissa a TF32 operand keeps: to nearest, ties away from zero, low 13 bits
// cleared. The device uses the instruction; the host does the same with integers.
NITRO_HD_INLINE float round_tf32(float x) {
#if NITRO_DEVICE_PASS
  unsigned u;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
  return __uint_as_float(u);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) {  // finite: round the magnitude, the sign bit stays
    u += 0x1000u;
    u &= 0xffffe000u;
  }
  std::memcpy(&x, &u, sizeof u);
  return x;
#endif
}

// ---- activations ---------------------------------------------------------------------------------
// The activations a dense layer fuses (nitro::nn::identity, relu, tanh, sigmoid, gelu). relu, tanh
// and sigmoid differentiate from their output; gelu (exact, x * Phi(x)) from its input, so a layer
// with gelu saves the pre-activation for the backward pass.
enum class activation_kind : int { identity = 0, relu = 1, tanh = 2, sigmoid = 3, gelu = 4 };

constexpr char const* to_string(activation_kind a) noexcept {
  switch (a) {
    case activation_kind::identity: return "identity";
    case activation_kind::relu: return "relu";
    case activation_kind::tanh: return "tanh";
    case activation_kind::sigmoid: return "sigmoid";
    case activation_kind::gelu: return "gelu";
  }
  return "?";
}

template <activation_kind A>
struct act_math;

template <>
struct act_math<activation_kind::identity> {
  static constexpr bool needs_pre = false;
  NITRO_HD_INLINE static float forward(float z) { return z; }
  NITRO_HD_INLINE static float backward(float g, float) { return g; }
};
template <>
struct act_math<activation_kind::relu> {
  static constexpr bool needs_pre = false;
  NITRO_HD_INLINE static float forward(float z) { return z > 0.0f ? z : 0.0f; }
  NITRO_HD_INLINE static float backward(float g, float y) { return y > 0.0f ? g : 0.0f; }
};
template <>
struct act_math<activation_kind::tanh> {
  static constexpr bool needs_pre = false;
  NITRO_HD_INLINE static float forward(float z) { return ::tanhf(z); }
  NITRO_HD_INLINE static float backward(float g, float y) { return g * (1.0f - y * y); }
};
template <>
struct act_math<activation_kind::sigmoid> {
  static constexpr bool needs_pre = false;
  NITRO_HD_INLINE static float forward(float z) { return 1.0f / (1.0f + ::expf(-z)); }
  NITRO_HD_INLINE static float backward(float g, float y) { return g * y * (1.0f - y); }
};
template <>
struct act_math<activation_kind::gelu> {
  static constexpr bool needs_pre = true;
  NITRO_HD_INLINE static float forward(float z) { return 0.5f * z * (1.0f + ::erff(z * 0.70710678118654752440f)); }
  // for gelu the saved value is the pre-activation z
  NITRO_HD_INLINE static float backward(float g, float z) {
    const float cdf = 0.5f * (1.0f + ::erff(z * 0.70710678118654752440f));
    const float pdf = ::expf(-0.5f * z * z) * 0.39894228040143267794f;
    return g * (cdf + z * pdf);
  }
};

// ---- softmax cross-entropy of one sample ---------------------------------------------------------
// x: the sample's C logits (contiguous). The target is either soft/one-hot (t, C values) or a class
// index (t == nullptr, `index`). With smoothing s the target becomes (1 - s) t + s / C, as in
// nitro::nn::logitcrossentropy. Writes g[i] = scale * d(loss)/d(x_i) when g is not null (scale is
// 1/B for a mean over the batch) and returns the loss. `correct` says whether the first largest
// logit is where the target's first largest value (or the index) is — nitro::nn::correct_count.
struct xent_result {
  float loss;
  bool correct;
};

NITRO_HD_INLINE xent_result softmax_xent(float const* x, int C, float const* t, int index, float smoothing, float scale, float* g) {
  float m = x[0];
  int best = 0;
  for (int i = 1; i < C; ++i)
    if (x[i] > m) { m = x[i]; best = i; }
  float z = 0.0f;
  for (int i = 0; i < C; ++i) z += ::expf(x[i] - m);
  const float lz = m + ::logf(z), inv = 1.0f / z;
  const float off = smoothing / static_cast<float>(C), on = 1.0f - smoothing;
  float loss = 0.0f;
  int want = index;
  if (t == nullptr) {
    for (int i = 0; i < C; ++i) {
      const float w = (i == index ? on : 0.0f) + off;
      loss -= w * (x[i] - lz);
      if (g) g[i] = scale * (::expf(x[i] - m) * inv - w);
    }
  } else {
    want = 0;
    float tsum = 0.0f;
    for (int i = 0; i < C; ++i) {
      if (t[i] > t[want]) want = i;
      tsum += on * t[i] + off;
    }
    for (int i = 0; i < C; ++i) {
      const float w = on * t[i] + off;
      loss -= w * (x[i] - lz);
      if (g) g[i] = scale * (tsum * ::expf(x[i] - m) * inv - w);
    }
  }
  return {loss, best == want};
}

}  // namespace nitro::cuda
