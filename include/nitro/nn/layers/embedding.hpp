// nitro/nn/layers/embedding.hpp — a lookup table of learned vectors, one per token.
//
//   nitro::nn::embedding<10000, 64>()    indices [B] -> [64, B];  [L, B] -> [64, L, B]
//
// The indices are the input tensor's values (whole numbers stored as floats, 0-based, as a data
// set's batch carries them); the output puts Dim in front of the input's extents. The weight is
// param<Dim, Vocab>: one contiguous column per token (the same bytes as PyTorch's [Vocab, Dim]
// weight), initialised N(0, 1) like torch.nn.Embedding. A value that is not a whole number in
// [0, Vocab) is E-LAYER-005 (on a GPU, raised at the backend's next check of its flags). The
// lookup and its gradient are the step's kernels (device_ops::embedding). The gradient reaches the
// weight's columns the batch used (the indices themselves have none). Float32 holds every whole number up to 2^24, so Vocab is limited to that.
//
// The same weight read backwards is an output head (weight tying, as GPT-2 and nanoGPT tie theirs):
// `unembed(x, ps)` gives the logits over the vocabulary, Wᵀ x: [Dim, ...] -> [Vocab, ...], one
// product whose gradient adds to the weight's, beside the lookup's. In a model struct it is
// nn::unembed<"tok">(net, h) (nn/layers/model.hpp).
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/nn/init.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/tensor/backend.hpp"
#include "nitro/tensor/detail/record.hpp"

#include <cstdint>  // int64_t
#include <string>   // describe
#include <utility>  // pair

namespace nitro::nn {

struct embedding_options {
  init::initializer weight = init::normal(1.0);
};

template <std::int64_t Vocab, std::int64_t Dim>
struct embedding_layer {
  static_assert(Vocab > 0 && Dim > 0, "E-LAYER-012: nitro::nn::embedding<Vocab, Dim> needs positive extents. Fix: embedding<256, 64>().");
  static_assert(Vocab <= (std::int64_t(1) << 24),
                "E-LAYER-013: nitro::nn::embedding<Vocab, Dim>: indices travel as float values, which hold whole numbers up to 2^24 exactly. Fix: a vocabulary of at most 16777216 tokens.");
  using param_spec = tree<entry<"weight", param<Dim, Vocab>>>;
  using state_spec = tree<>;
  // [B] gives Dim features, [L, B] gives Dim*L: known at run time only
  static constexpr std::int64_t in_features = dynamic;
  static constexpr std::int64_t out_features = dynamic;

  embedding_options options{};

  template <class Ps, class St>
  void init(Ps& ps, St&, rng& g) const { options.weight(get<"weight">(ps), Vocab, Dim, g); }
  std::string describe() const { return "embedding<" + std::to_string(Vocab) + ", " + std::to_string(Dim) + ">"; }

  template <class T>
  std::pair<basic_tensor<T>, tree<>> operator()(basic_tensor<T> const& x, params_t<param_spec, T> const& ps, tree<> const& st) const {
    using namespace nitro::detail;
    const shape& s = x.shape();
    if (s.rank() < 1 || s.rank() >= shape::max_rank)
      throw error("E-LAYER-001",
                  describe() + " takes indices [B] or [L, B] (at most " + std::to_string(shape::max_rank - 1) +
                      " dimensions), got a tensor of shape " + s.to_string(),
                  "pass one index per sample ([B]) or a sequence per sample ([L, B])");
    std::int64_t ext[shape::max_rank] = {Dim};  // [Dim, the input's extents...]
    for (int d = 0; d < s.rank(); ++d) ext[d + 1] = s[d];
    const shape out = shape::from(ext, ext + s.rank() + 1);
    const std::int64_t N = x.numel();
    basic_tensor<T> const& w = get<"weight">(ps);
    basic_tensor<T> y = make_output<T>(out, needs_grad(w));
    T const* xd = x.data();
    const std::int64_t bad = active_ops().embedding(Vocab, Dim, N, xd, w.data(), y.data());
    if (bad >= 0) {
      const double v = double(x.to_vector()[static_cast<std::size_t>(bad)]);  // where the step's memory is, read back
      throw error("E-LAYER-005",
                  describe() + ": index " + std::to_string(v) + " at position " + std::to_string(bad) + " of the input (shape " +
                      s.to_string() + ") is not a whole number in [0, " + std::to_string(Vocab) + ")",
                  "map tokens to 0 .. " + std::to_string(Vocab - 1) + ", or enlarge the vocabulary");
    }
    if (y.requires_grad()) {
      int wv = w.var(), yv = y.var();
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        active_ops().embedding_backward(Vocab, Dim, N, xd, gy, t.grad<T>(wv));
      });
    }
    return {y, st};
  }

  // The logits over the vocabulary of features x [Dim, ...]: y = Wᵀ x, [Vocab, ...], every column
  // through one product (the backend's gemm); the gradient reaches x and the weight.
  template <class T>
  basic_tensor<T> unembed(basic_tensor<T> const& x, params_t<param_spec, T> const& ps) const {
    using namespace nitro::detail;
    check_features(Dim, x.rank() == 0 ? 0 : x.size(0), [&] { return describe() + " read as an output head (unembed)"; }, x.shape());
    const std::int64_t N = x.numel() / Dim;
    shape ys = x.shape();
    ys[0] = Vocab;
    basic_tensor<T> const& w = get<"weight">(ps);
    basic_tensor<T> y = make_output<T>(ys, needs_grad(x, w));
    active_ops().gemm(true, false, Vocab, N, Dim, T(1), w.data(), Dim, x.data(), Dim, T(0), y.data(), Vocab);
    if (y.requires_grad()) {
      T const* xd = x.data();
      T const* wd = w.data();
      int xv = x.var(), wv = w.var(), yv = y.var();
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        device_ops& ops = active_ops();
        if (wv >= 0) ops.gemm(false, true, Dim, Vocab, N, T(1), xd, Dim, gy, Vocab, T(1), t.grad<T>(wv), Dim);
        if (xv >= 0) ops.gemm(false, false, Dim, N, Vocab, T(1), wd, Dim, gy, Vocab, T(1), t.grad<T>(xv), Dim);
      });
    }
    return y;
  }
};

// embedding<Vocab, Dim>(options): Vocab learned vectors of Dim values.
template <std::int64_t Vocab, std::int64_t Dim>
constexpr embedding_layer<Vocab, Dim> embedding(embedding_options options = {}) { return embedding_layer<Vocab, Dim>{options}; }

}  // namespace nitro::nn
