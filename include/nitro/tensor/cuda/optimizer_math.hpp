// nitro/tensor/cuda/optimizer_math.hpp — the optimizer's update of one element, on both sides.
//
//   update_element<rule_kind::adamw>(p, g, m, v, anchor, decay, values, c1, c2)
//   sam_perturbation(p, g, perturb, adaptive, eta_asam, rho_over_norm)
//   clip_scale(norm, max_norm)
//
// The fused optimizer kernel (kernels/.../optimizer.cuh) runs one of these per element of a
// group's flat buffer, one launch per group; the CPU tests (tests/unit/test_cuda_tiles.cpp) check
// them against the textbook formulas, which the CPU rules (optim/rules/) follow too. The
// conventions are PyTorch's:
//   sgd    m = mu m + (1 - dampening) g  (m = g on the first step);  p -= eta (nesterov ? g + mu m : m)
//   adamw  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= eta (m c1) / (sqrt(v) c2 + eps)
//          with c1 = 1 / (1 - b1^t), c2 = 1 / sqrt(1 - b2^t)
//   lion   p -= eta sign(b1 m + (1-b1) g);  m = b2 m + (1-b2) g
// and every rule first applies decoupled decay toward the anchor (zero, or w0):
//   p -= eta lambda (p - anchor)    for elements the decay mask selects.
#pragma once

#include "nitro/tensor/cuda/hd.hpp"

#include <cmath>    // sqrtf, fabsf, pow
#include <cstdint>  // uint32_t

namespace nitro::cuda {

enum class rule_kind : int { sgd = 0, adamw = 1, lion = 2 };

constexpr char const* to_string(rule_kind r) noexcept {
  return r == rule_kind::sgd ? "sgd" : r == rule_kind::adamw ? "adamw" : "lion";
}

// The hyperparameters one step reads, already resolved (from constants or the device scalars).
struct rule_values {
  float eta = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adamw; lion: beta1 interpolates, beta2 is the momentum
  float lambda = 0.0f;                              // decoupled decay toward the anchor
  float momentum = 0.0f, dampening = 0.0f;          // sgd
  bool nesterov = false;                            // sgd
};

// What depends on the step t (counting from 1): Adam's bias corrections, SGD's first step.
struct adam_corrections {
  float c1 = 1.0f, c2 = 1.0f;
  bool first = false;
};
NITRO_HD_INLINE adam_corrections adam_corrections_at(float beta1, float beta2, long long t) {
  const double b1t = ::pow(static_cast<double>(beta1), static_cast<double>(t));
  const double b2t = ::pow(static_cast<double>(beta2), static_cast<double>(t));
  return {static_cast<float>(1.0 / (1.0 - b1t)), static_cast<float>(1.0 / ::sqrt(1.0 - b2t)), t <= 1};
}

// Bit i of a mask; a null mask is `otherwise` everywhere.
NITRO_HD_INLINE bool mask_bit(std::uint32_t const* bits, long long i, bool otherwise) {
  return bits == nullptr ? otherwise : ((bits[i >> 5] >> (i & 31)) & 1u) != 0u;
}

template <rule_kind R>
NITRO_HD_INLINE void update_element(float& p, float g, float& m, float& v, float anchor, bool decay, rule_values const& h,
                                    adam_corrections const& c) {
  const float d = decay ? h.eta * h.lambda * (p - anchor) : 0.0f;
  if constexpr (R == rule_kind::adamw) {
    m = h.beta1 * m + (1.0f - h.beta1) * g;
    v = h.beta2 * v + (1.0f - h.beta2) * g * g;
    p = p - d - h.eta * (m * c.c1) / (::sqrtf(v) * c.c2 + h.eps);
  } else if constexpr (R == rule_kind::sgd) {
    float step = g;
    if (h.momentum != 0.0f) {
      m = c.first ? g : h.momentum * m + (1.0f - h.dampening) * g;
      step = h.nesterov ? g + h.momentum * m : m;
    }
    p = p - d - h.eta * step;
  } else {
    const float c_ = h.beta1 * m + (1.0f - h.beta1) * g;
    const float s = c_ > 0.0f ? 1.0f : (c_ < 0.0f ? -1.0f : 0.0f);
    p = p - d - h.eta * s;
    m = h.beta2 * m + (1.0f - h.beta2) * g;
    (void)v;
  }
}

// SAM / ASAM. The perturbation of one element is rho T^2 g / ||T g|| with T = |w| + eta_asam for
// elements ASAM scales (adaptive) and 1 otherwise; rho_over_norm = rho / (||T g|| + 1e-12).
// Elements excluded from the perturbation (no_perturb) get 0 and count nothing in the norm.
NITRO_HD_INLINE float sam_scale(float p, bool adaptive, float eta_asam) { return adaptive ? ::fabsf(p) + eta_asam : 1.0f; }
NITRO_HD_INLINE float sam_norm_term(float p, float g, bool perturb, bool adaptive, float eta_asam) {
  if (!perturb) return 0.0f;
  const float tg = sam_scale(p, adaptive, eta_asam) * g;
  return tg * tg;
}
NITRO_HD_INLINE float sam_perturbation(float p, float g, bool perturb, bool adaptive, float eta_asam, float rho_over_norm) {
  if (!perturb) return 0.0f;
  const float t = sam_scale(p, adaptive, eta_asam);
  return rho_over_norm * t * t * g;
}

// Global-norm clipping's factor (torch.nn.utils.clip_grad_norm_): min(1, max_norm / (norm + 1e-6)).
// max_norm <= 0 means no clipping.
NITRO_HD_INLINE float clip_scale(float norm, float max_norm) {
  if (!(max_norm > 0.0f)) return 1.0f;
  const float s = max_norm / (norm + 1e-6f);
  return s < 1.0f ? s : 1.0f;
}

}  // namespace nitro::cuda
