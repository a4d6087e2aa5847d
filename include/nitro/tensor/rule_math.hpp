// nitro/tensor/rule_math.hpp — the optimizer rules' arithmetic, written once for the host and the device.
//
//   rule_math::adam_consts k = rule_math::adam_consts_at(beta1, beta2, eps, t);   // per group and step
//   rule_math::adam_direction(u, m, v, k);       // u: the scaled gradient in, the direction out
//   rule_math::weight_step<true, false>(w, u, 0.0f, rule_math::decay_of(eta, lambda));
//
// Every function is a template over the value it updates: a float (the CUDA kernel's one element,
// kernels/include/nitro/kernels/optimizer.cuh, through tensor/cuda/optimizer_math.hpp) or an Eigen
// array of a block (the CPU rules in optim/rules/, which vectorise it), so both backends run the same
// operations in the same order. The conventions are PyTorch's:
//   sgd    b = mu b + (1 - dampening) g  (b = g on the first step, and while mu = 0);  u = nesterov ? g + mu b : b
//   adam   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  u = (m c1) / (sqrt(v) c2 + eps)
//          with c1 = 1 / (1 - b1^t), c2 = 1 / sqrt(1 - b2^t)
//   lion   u = sign(b1 m + (1-b1) g);  m = b2 m + (1-b2) g
//   decayed_weights (coupled L2)  u += wd (w - anchor)
// then the weights: w <- w (1 - eta lambda) + eta lambda anchor - eta u on decayed elements (decoupled
// decay toward the anchor: zero, or w0), w <- w - eta u elsewhere.
#pragma once

#include "nitro/tensor/cuda/hd.hpp"

#include <cmath>  // sqrt, pow

namespace nitro::rule_math {

// ---- adam / adamw -----------------------------------------------------------------------------------
struct adam_consts {
  float b1, omb1, b2, omb2, c1, rc2, eps;
};
// The constants of step t (from 1): the bias corrections in double, then rounded once.
NITRO_HD_INLINE adam_consts adam_consts_at(double beta1, double beta2, double eps, long long t) {
  const double bc1 = 1 - ::pow(beta1, double(t)), bc2 = 1 - ::pow(beta2, double(t));
  return {float(beta1), float(1 - beta1), float(beta2), float(1 - beta2), float(1 / bc1), float(1 / ::sqrt(bc2)), float(eps)};
}
template <class U, class M, class V>
NITRO_HD_INLINE void adam_direction(U& u, M& m, V& v, adam_consts const& k) {
  using std::sqrt;  // a float's; an Eigen array's is Eigen::sqrt, found by its type
  m = k.b1 * m + k.omb1 * u;
  v = k.b2 * v + k.omb2 * (u * u);
  u = (m * k.c1) / (sqrt(v) * k.rc2 + k.eps);
}

// ---- sgd --------------------------------------------------------------------------------------------
struct sgd_consts {
  float mu_buf, omd, mu;
  bool nesterov;
};
// PyTorch starts the buffer at the first gradient, undamped: on step 1, b = 0 b + 1 g.
NITRO_HD_INLINE sgd_consts sgd_consts_at(double momentum, double dampening, bool nesterov, long long t) {
  const bool first = t <= 1;
  return {first ? 0.f : float(momentum), first ? 1.f : float(1 - dampening), float(momentum), nesterov};
}
// With momentum 0 the step is the gradient itself (PyTorch keeps no buffer then and ignores
// dampening); the buffer holds the gradient, so momentum scheduled up from 0 starts from it.
template <class U, class B>
NITRO_HD_INLINE void sgd_direction(U& u, B& buf, sgd_consts const& k) {
  if (k.mu == 0.f) {
    buf = u;
    return;
  }
  buf = k.mu_buf * buf + k.omd * u;
  if (k.nesterov) u += k.mu * buf;
  else u = buf;
}

// ---- lion (one element: the sign does not vectorise as an array expression; a loop of it does) -----
struct lion_consts {
  float b1, omb1, b2, omb2;
};
NITRO_HD_INLINE lion_consts lion_consts_of(double beta1, double beta2) { return {float(beta1), float(1 - beta1), float(beta2), float(1 - beta2)}; }
NITRO_HD_INLINE void lion_direction(float& u, float& m, lion_consts const& k) {
  const float c = k.b1 * m + k.omb1 * u;
  m = k.b2 * m + k.omb2 * u;
  u = float(c > 0.f) - float(c < 0.f);
}

// ---- coupled L2 decay (decayed_weights) -------------------------------------------------------------
template <bool Anchor, class U, class W, class A>
NITRO_HD_INLINE void coupled_decay(U& u, W const& w, A const& anchor, float wd) {
  if constexpr (Anchor) u += wd * (w - anchor);
  else u += wd * w;
}

// ---- the weights --------------------------------------------------------------------------------------
// Decoupled decay toward the anchor, then the step: keep = 1 - eta lambda, pull = eta lambda.
struct weight_consts {
  float eta, keep, pull;
};
NITRO_HD_INLINE weight_consts decay_of(float eta, float eta_lambda) { return {eta, 1.0f - eta_lambda, eta_lambda}; }
template <bool Decay, bool Anchor, class W, class U, class A>
NITRO_HD_INLINE void weight_step(W& w, U const& u, A const& anchor, weight_consts const& k) {
  if constexpr (Decay && Anchor) w = w * k.keep + k.pull * anchor - k.eta * u;
  else if constexpr (Decay) w = w * k.keep - k.eta * u;
  else w -= k.eta * u;
}

// ---- around the rules: clipping and SAM ---------------------------------------------------------------
// Global-norm clipping's factor (torch.nn.utils.clip_grad_norm_): min(1, max_norm / (norm + 1e-6));
// max_norm <= 0 means no clipping.
template <class T>
NITRO_HD_INLINE T clip_scale(T norm, T max_norm) {
  if (!(max_norm > T(0))) return T(1);
  const T s = max_norm / (norm + T(1e-6));
  return s < T(1) ? s : T(1);
}
// SAM's ascent w += rho g / ||g||; ASAM scales each element by T = |w| + eta_asam: w += rho T^2 g / ||T g||.
// rho_over_norm = rho / (||T g|| + 1e-12), the norm over every perturbed element of the step.
template <class W>
NITRO_HD_INLINE auto asam_scale(W const& w, float eta_asam) {
  using std::abs;  // a float's; an Eigen array's is Eigen::abs
  return abs(w) + eta_asam;
}
template <bool Adaptive, class W, class G>
NITRO_HD_INLINE void sam_ascent(W& w, G const& g, float eta_asam, float rho_over_norm) {
  if constexpr (Adaptive) {
    const auto t = asam_scale(w, eta_asam);
    w += t * t * g * rho_over_norm;
  } else {
    w += g * rho_over_norm;
  }
}

}  // namespace nitro::rule_math
