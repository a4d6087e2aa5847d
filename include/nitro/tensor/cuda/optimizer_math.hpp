// nitro/tensor/cuda/optimizer_math.hpp — the optimizer's update of one element, as the fused CUDA kernel runs it.
//
//   auto h = constant_refs(nitro::optim::adamw(), 1e-3, 1e-2);   // where eta, lambda and the rule's fields come from
//   h.eta = block.add(1e-3f);                                     // ... or a slot of the scalar block a schedule writes
//   rule_step<R> k = rule_step_at(rule, h, block, t);             // per group and step (in the kernel)
//   update_element<R, Anchor>(k, p, g, states, anchor, decay);    // one element
//   sam_ascend(p, g, perturb, adaptive, eta_asam, rho_over_norm)  // SAM/ASAM, one element
//
// R is any optimizer rule (optim/rule.hpp: sgd, adam, adamw, lion, decayed_weights, a chain of them,
// a SAM wrapper): the kernel runs the rule's own `element` and `prepare`, the functions the CPU
// program runs, so a chain, a decay anchor or a new rule is the same arithmetic on both backends
// with nothing restated here. This header is generic over the rule and includes no optim/ header
// (the rooms: tensor/ sits below optim/); tests/unit/test_cuda_tiles.cpp runs it on the CPU against
// the CPU optimizer program.
#pragma once

#include "nitro/tensor/cuda/hd.hpp"
#include "nitro/tensor/cuda/scalars.hpp"
#include "nitro/tensor/rule_math.hpp"

#include <array>    // the fields' refs
#include <cstddef>  // size_t
#include <cstdint>  // uint32_t, int64_t

namespace nitro::cuda {

// Where a group's values come from: eta (times the group's ratio), lambda (decoupled decay toward the
// anchor) and the rule's fields in the rule's order, each a constant or a slot of the scalar block.
template <std::size_t N>
struct rule_refs {
  scalar_ref eta = scalar_ref::constant(1e-3);
  scalar_ref lambda = scalar_ref::constant(0.0);
  std::array<scalar_ref, N> fields{};
  double ratio = 1.0;
};
template <class R>
using rule_refs_of = rule_refs<R::fields::size>;

// Every value a constant: the rule's own field values, eta and lambda as given.
template <class R>
rule_refs_of<R> constant_refs(R const& rule, double eta, double lambda) {
  rule_refs_of<R> h;
  h.eta = scalar_ref::constant(eta);
  h.lambda = scalar_ref::constant(lambda);
  for (std::size_t i = 0; i < R::fields::size; ++i) h.fields[i] = scalar_ref::constant(rule.values[i]);
  return h;
}

// What one step of a group computes with: the rule's constants (its prepare) and the weights'.
template <class R>
struct rule_step {
  typename R::consts rule;
  rule_math::weight_consts weights;
};
// As the CPU program forms them (optim/program.hpp update_group): the fields in double, eta * ratio,
// c = eta * lambda rounded once.
template <class R, std::size_t N>
NITRO_HD_INLINE rule_step<R> rule_step_at(R const& r, rule_refs<N> const& h, void const* block, long long t) {
  double f[N > 0 ? N : 1];
  for (std::size_t i = 0; i < N; ++i) f[i] = h.fields[i].read(block);
  const double eta = h.eta.read(block) * h.ratio;
  return {r.prepare(f, t), rule_math::decay_of(static_cast<float>(eta), static_cast<float>(eta * h.lambda.read(block)))};
}

// Bit i of a mask; a null mask is `otherwise` everywhere.
NITRO_HD_INLINE bool mask_bit(std::uint32_t const* bits, long long i, bool otherwise) {
  return bits == nullptr ? otherwise : ((bits[i >> 5] >> (i & 31)) & 1u) != 0u;
}

// One element: u = g (already scaled by clipping and 1/accum), the rule's direction, then decoupled
// decay toward the anchor where the element decays and the step. s: the element's R::states.
template <class R, bool Anchor>
NITRO_HD_INLINE void update_element(rule_step<R> const& k, float& p, float g, float* s, float anchor, bool decay) {
  float u = g;
  if (decay) {
    R::template element<true, Anchor>(k.rule, u, p, anchor, s);
    rule_math::weight_step<true, Anchor>(p, u, anchor, k.weights);
  } else {
    R::template element<false, Anchor>(k.rule, u, p, anchor, s);
    rule_math::weight_step<false, false>(p, u, 0.0f, k.weights);
  }
}

// SAM / ASAM, one element (rule_math::sam_ascent). The norm runs over the perturbed elements of the
// step: (T g)^2 with T = |w| + eta_asam where ASAM scales the element (adaptive), 1 otherwise;
// elements excluded from the perturbation (no_perturb) count nothing and stay where they are.
NITRO_HD_INLINE float sam_norm_term(float p, float g, bool perturb, bool adaptive, float eta_asam) {
  if (!perturb) return 0.0f;
  const float tg = adaptive ? rule_math::asam_scale(p, eta_asam) * g : g;
  return tg * tg;
}
// p += rho T^2 g / ||T g||, with rho_over_norm = rho / (||T g|| + 1e-12).
NITRO_HD_INLINE void sam_ascend(float& p, float g, bool perturb, bool adaptive, float eta_asam, float rho_over_norm) {
  if (!perturb) return;
  if (adaptive) rule_math::sam_ascent<true>(p, g, eta_asam, rho_over_norm);
  else rule_math::sam_ascent<false>(p, g, eta_asam, rho_over_norm);
}

// Global-norm clipping's factor: rule_math::clip_scale.
NITRO_HD_INLINE float clip_scale(float norm, float max_norm) { return rule_math::clip_scale(norm, max_norm); }

}  // namespace nitro::cuda
