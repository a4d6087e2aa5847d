// nitro/tensor/cuda/optimizer_math.hpp — the optimizer's update of one element, as the fused CUDA kernel runs it.
//
//   update_element<rule_kind::adamw>(p, g, m, v, anchor, decay, values, corrections)
//   sam_perturbation(p, g, perturb, adaptive, eta_asam, rho_over_norm)
//   clip_scale(norm, max_norm)
//
// The fused optimizer kernel (kernels/.../optimizer.cuh) runs one of these per element of a
// group's flat buffer, one launch per group. The arithmetic is not written here: update_element
// calls the functions the CPU rules call (tensor/rule_math.hpp: the direction of sgd, adamw and lion,
// then the decoupled decay toward the anchor and the step), so the two backends compute the same
// thing in the same order; tests/unit/test_cuda_tiles.cpp checks it against the textbook formulas.
#pragma once

#include "nitro/tensor/cuda/hd.hpp"
#include "nitro/tensor/rule_math.hpp"

#include <cmath>    // fabsf
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
  const rule_math::adam_consts k = rule_math::adam_consts_at(beta1, beta2, 0.0, t);
  return {k.c1, k.rc2, t <= 1};
}

// Bit i of a mask; a null mask is `otherwise` everywhere.
NITRO_HD_INLINE bool mask_bit(std::uint32_t const* bits, long long i, bool otherwise) {
  return bits == nullptr ? otherwise : ((bits[i >> 5] >> (i & 31)) & 1u) != 0u;
}

template <rule_kind R>
NITRO_HD_INLINE void update_element(float& p, float g, float& m, float& v, float anchor, bool decay, rule_values const& h,
                                    adam_corrections const& c) {
  float u = g;  // the direction, as the CPU rules compute it
  if constexpr (R == rule_kind::adamw) {
    rule_math::adam_direction(u, m, v, rule_math::adam_consts{h.beta1, 1.0f - h.beta1, h.beta2, 1.0f - h.beta2, c.c1, c.c2, h.eps});
  } else if constexpr (R == rule_kind::sgd) {
    // momentum 0 is plain sgd inside sgd_direction, which also keeps the buffer as the CPU does
    rule_math::sgd_direction(u, m, rule_math::sgd_consts{c.first ? 0.0f : h.momentum, c.first ? 1.0f : 1.0f - h.dampening, h.momentum, h.nesterov});
  } else {
    rule_math::lion_direction(u, m, rule_math::lion_consts{h.beta1, 1.0f - h.beta1, h.beta2, 1.0f - h.beta2});
  }
  (void)v;
  const rule_math::weight_consts k = rule_math::decay_of(h.eta, h.eta * h.lambda);
  if (decay) rule_math::weight_step<true, true>(p, u, anchor, k);  // anchor 0 unless the group decays toward w0
  else rule_math::weight_step<false, false>(p, u, 0.0f, k);
}

// SAM / ASAM (tensor/rule_math.hpp's ascent, one element). The perturbation of one element is
// rho T^2 g / ||T g|| with T = |w| + eta_asam for elements ASAM scales (adaptive) and 1 otherwise;
// rho_over_norm = rho / (||T g|| + 1e-12). Elements excluded from the perturbation (no_perturb) get 0
// and count nothing in the norm.
NITRO_HD_INLINE float sam_scale(float p, bool adaptive, float eta_asam) { return adaptive ? rule_math::asam_scale(p, eta_asam) : 1.0f; }
NITRO_HD_INLINE float sam_norm_term(float p, float g, bool perturb, bool adaptive, float eta_asam) {
  if (!perturb) return 0.0f;
  const float tg = sam_scale(p, adaptive, eta_asam) * g;
  return tg * tg;
}
NITRO_HD_INLINE float sam_perturbation(float p, float g, bool perturb, bool adaptive, float eta_asam, float rho_over_norm) {
  if (!perturb) return 0.0f;
  // what rule_math::sam_ascent adds to p, in its order
  if (!adaptive) return g * rho_over_norm;
  const float t = rule_math::asam_scale(p, eta_asam);
  return t * t * g * rho_over_norm;
}

// Global-norm clipping's factor: rule_math::clip_scale.
NITRO_HD_INLINE float clip_scale(float norm, float max_norm) { return rule_math::clip_scale(norm, max_norm); }

}  // namespace nitro::cuda
