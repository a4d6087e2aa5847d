// nitro/nn/layers/attention.hpp — causal multi-head self-attention, and the learned positions a
// transformer adds to its token embeddings.
//
//   nitro::nn::causal_self_attention<256, 4>()   x [256, T, B] -> y [256, T, B]: four heads of 64
//   nitro::nn::positional_embedding<1024, 256>() x [256, T, B] -> x + P[:, :T], T <= 1024
//
// Attention is three products and one kernel: qkv = W_qkv x + b (one dense<W, 3W>, the parameters
// `qkv.weight`, `qkv.bias`), the causal attention of every head (tensor/ops/attention.hpp, the
// backend's kernel: on the CPU a tile of scores at a time), and the output projection `proj`
// (dense<W, W>), as GPT-2 and nanoGPT write it. Width and heads are compile-time extents (a
// GraphConst knob gives each its own program); heads that do not divide the width are a compile
// error naming both (E-LAYER-021). Token t sees tokens 0..t of its own sequence only, so the
// samples of a batch never mix.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/meta.hpp"
#include "nitro/nn/init.hpp"
#include "nitro/nn/layer.hpp"
#include "nitro/nn/layers/dense.hpp"
#include "nitro/tensor/decode.hpp"
#include "nitro/tensor/detail/record.hpp"
#include "nitro/tensor/ops/attention.hpp"

#include <cstdint>  // int64_t
#include <string>   // describe
#include <utility>  // pair
#include <vector>   // kernels

namespace nitro::nn {

template <std::int64_t W> struct attention_width {};
template <std::int64_t H> struct attention_heads {};

template <class Width, class Heads>
struct heads_must_divide_width {
  static_assert(always_false<Width, Heads>,
                "E-LAYER-021: nitro::nn::causal_self_attention<Width, Heads> splits the width into Heads heads of Width / Heads "
                "features, and these heads do not divide this width, or one is not positive, or a head would hold more than "
                "256 features (see attention_width<W> and attention_heads<H> above). Fix: a head count that divides the width "
                "with at most 256 features a head: causal_self_attention<256, 4>().");
  static constexpr bool ok = false;
};

namespace detail {
template <std::int64_t W, std::int64_t H>
constexpr bool check_heads() {
  if constexpr (W <= 0 || H <= 0 || W % H != 0 || W / H > cpu::max_head_dim) return heads_must_divide_width<attention_width<W>, attention_heads<H>>::ok;
  else return true;
}
}  // namespace detail

template <std::int64_t Width, std::int64_t Heads>
struct causal_self_attention_layer {
  static_assert(checks_evaluated<detail::check_heads<Width, Heads>()>);  // E-LAYER-021
  static constexpr std::int64_t width = Width;
  static constexpr std::int64_t heads = Heads;
  static constexpr std::int64_t head_dim = Heads > 0 && Width % Heads == 0 ? Width / Heads : 1;

  using qkv_layer = dense_layer<Width, 3 * Width>;
  using proj_layer = dense_layer<Width, Width>;
  using param_spec = tree<entry<"qkv", typename qkv_layer::param_spec>, entry<"proj", typename proj_layer::param_spec>>;
  using state_spec = tree<>;
  static constexpr std::int64_t in_features = Width;
  static constexpr std::int64_t out_features = Width;

  dense_options qkv_init{};
  dense_options proj_init{};

  template <class Ps, class St>
  void init(Ps& ps, St&, rng& g) const {
    tree<> none;
    rng a(fold(g(), 1)), b(fold(g(), 2));
    qkv_layer{qkv_init}.init(get<"qkv">(ps), none, a);
    proj_layer{proj_init}.init(get<"proj">(ps), none, b);
  }

  // What `ir` lists (cli/model_text.hpp); N = seq x batch columns.
  std::vector<std::string> kernels() const {
    const std::string w = std::to_string(Width), w3 = std::to_string(3 * Width), h = std::to_string(Heads), d = std::to_string(head_dim);
    return {"forward   gemm<float> qkv [" + w3 + " x " + w + "] . [" + w + " x N] + bias (one pass)",
            "forward   causal_attention " + h + " heads x " + d + ", tiles of " + std::to_string(cpu::attention_tile) +
                " keys (online softmax; keeps one log-sum-exp per query)",
            "forward   gemm<float> proj [" + w + " x " + w + "] . [" + w + " x N] + bias (one pass)",
            "backward  gemm<float> proj dW, dx; bias row sums",
            "backward  causal_attention_backward: dq, dk, dv from the tiles rebuilt with the log-sum-exp",
            "backward  gemm<float> qkv dW, dx; bias row sums"};
  }

  std::string describe() const {
    return "causal_self_attention<" + std::to_string(Width) + ", " + std::to_string(Heads) + " heads>";
  }

  template <class T>
  std::pair<basic_tensor<T>, tree<>> operator()(basic_tensor<T> const& x, params_t<param_spec, T> const& ps, tree<> const& st) const {
    if (x.rank() != 3 || x.size(0) != Width)
      throw error("E-LAYER-001",
                  describe() + " takes token features [" + std::to_string(Width) + ", seq, batch], got a tensor of shape " +
                      x.shape().to_string(),
                  "embed the tokens first (embedding<Vocab, " + std::to_string(Width) + "> turns [seq, batch] into [" +
                      std::to_string(Width) + ", seq, batch])");
    tree<> none;
    basic_tensor<T> qkv = qkv_layer{qkv_init}(x, get<"qkv">(ps), none).first;
    basic_tensor<T> a = causal_attention(qkv, Heads);
    return {proj_layer{proj_init}(a, get<"proj">(ps), none).first, st};
  }
};

template <std::int64_t Width, std::int64_t Heads>
constexpr causal_self_attention_layer<Width, Heads> causal_self_attention() {
  return {};
}

// Learned absolute positions: y[:, t, b] = x[:, t, b] + P[:, t], for sequences up to Seq tokens.
template <std::int64_t Seq, std::int64_t Dim>
struct positional_embedding_layer {
  static_assert(Seq > 0 && Dim > 0,
                "E-LAYER-022: nitro::nn::positional_embedding<Seq, Dim> needs positive extents. Fix: positional_embedding<1024, 256>().");
  using param_spec = tree<entry<"weight", param<Dim, Seq>>>;
  using state_spec = tree<>;
  static constexpr std::int64_t in_features = Dim;
  static constexpr std::int64_t out_features = Dim;

  init::initializer weight = init::normal(0.02);  // GPT-2's

  template <class Ps, class St>
  void init(Ps& ps, St&, rng& g) const {
    weight(get<"weight">(ps), Dim, Dim, g);
  }
  std::string describe() const { return "positional_embedding<" + std::to_string(Seq) + ", " + std::to_string(Dim) + ">"; }

  template <class T>
  std::pair<basic_tensor<T>, tree<>> operator()(basic_tensor<T> const& x, params_t<param_spec, T> const& ps, tree<> const& st) const {
    using namespace nitro::detail;
    if (x.rank() != 3 || x.size(0) != Dim || x.size(1) > Seq)
      throw error("E-LAYER-001",
                  describe() + " takes token features [" + std::to_string(Dim) + ", seq, batch] with seq <= " + std::to_string(Seq) +
                      ", got a tensor of shape " + x.shape().to_string(),
                  "embed the tokens first, and cut sequences to at most " + std::to_string(Seq) + " tokens (or raise Seq)");
    basic_tensor<T> const& p = get<"weight">(ps);
    // decoding (tensor/decode.hpp): the new tokens start where the cached ones end
    std::int64_t offset = 0;
    if (decode_cache* cache = current_decode()) {
      cache->limit_positions(Seq);
      offset = cache->length();
      if (offset + x.size(1) > Seq)
        throw error("E-LAYER-001",
                    describe() + " holds " + std::to_string(Seq) + " positions, and decoding reached position " +
                        std::to_string(offset + x.size(1)),
                    "keep prompts within " + std::to_string(Seq) + " tokens (nitro::generate_text slides its window when the cache is full)");
    }
    const std::int64_t n = Dim * x.size(1), batch = x.size(2);
    const bool grad = needs_grad(x, p);
    basic_tensor<T> y = make_output<T>(x.shape(), grad);
    mat_map<T>(y.data(), n, batch) = cmat_map<T>(x.data(), n, batch).colwise() + cmat_map<T>(p.data() + Dim * offset, n, 1).col(0);
    if (grad) {
      int xv = x.var(), pv = p.var(), yv = y.var();
      active_tape().record([=](tape& t) {
        T const* gy = t.grad_if_any<T>(yv);
        if (!gy) return;
        if (xv >= 0) mat_map<T>(t.grad<T>(xv), n, batch) += cmat_map<T>(gy, n, batch);
        if (pv >= 0) mat_map<T>(t.grad<T>(pv), n, 1).col(0) += cmat_map<T>(gy, n, batch).rowwise().sum();
      });
    }
    return {y, st};
  }
};

template <std::int64_t Seq, std::int64_t Dim>
constexpr positional_embedding_layer<Seq, Dim> positional_embedding() {
  return {};
}

}  // namespace nitro::nn
