// nitro/nn/layers/dropout.hpp — inverted dropout, active in training mode only.
//
//   nitro::nn::dropout(0.5)    training: each element zeroed with probability p, the others scaled
//                              by 1 / (1 - p); evaluation and prediction: the identity
//
// The mask is a pure function of the step: each dropout call draws from the step context's seed
// folded with the context's per-call counter, so the same step (same seed, same calls in the same
// order) drops the same elements, and gradcheck's repeated forwards see one mask. The mask itself is
// counter-based (tensor/dropout_mask.hpp), so the step's kernels (device_ops::dropout: the CPU's
// loop or the GPU's kernel) drop the same elements, and the backward pass redraws it from that
// seed instead of keeping it.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/rng.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/detail/record.hpp"
#include "nitro/tensor/dropout_mask.hpp"

#include <cstdint>  // uint64_t
#include <cstdio>   // snprintf
#include <string>   // describe
#include <utility>  // pair

namespace nitro::nn {

namespace detail {
inline constexpr std::uint64_t dropout_stream = 0x64726f706f7574ULL;  // "dropout"
}  // namespace detail

struct dropout_layer : stateless {
  static constexpr bool keeps_channels = true;  // chain compares the channels across it
  double p = 0.5;

  std::string describe() const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "dropout(%g)", p);
    return buf;
  }

  template <class T>
  std::pair<basic_tensor<T>, tree<>> operator()(basic_tensor<T> const& x, tree<> const&, tree<> const& st) const {
    using namespace nitro::detail;
    check();
    step_context* ctx = nitro::current_context();
    if (!ctx || !ctx->training || p == 0) return {x, st};
    const std::uint64_t seed = fold(fold(ctx->seed, nn::detail::dropout_stream), ctx->counter++);
    const std::uint64_t below = dropout_mask::threshold(p);
    const T scale = p >= 1 ? T(0) : static_cast<T>(1.0 / (1.0 - p));
    const std::int64_t n = x.numel();
    basic_tensor<T> y = make_output<T>(x.shape(), needs_grad(x));
    active_ops().dropout(seed, below, n, scale, x.data(), y.data());
    if (y.requires_grad()) {
      int xv = x.var(), yv = y.var();
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        active_ops().dropout_backward(seed, below, n, scale, gy, t.grad<T>(xv));
      });
    }
    return {y, st};
  }

  // p outside [0, 1] is E-LAYER-004.
  void check() const {
    if (!(p >= 0 && p <= 1))
      throw error("E-LAYER-004", describe() + ": the drop probability must lie in [0, 1]",
                  "pass the probability of dropping an element, e.g. dropout(0.5)");
  }
};

// dropout(p): drops each element with probability p in training mode.
inline dropout_layer dropout(double p) {
  dropout_layer d{{}, p};
  d.check();
  return d;
}

}  // namespace nitro::nn
