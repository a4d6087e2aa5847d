// The laws every layer obeys, as one templated suite: a layer cannot land without its case here
// (ctest house.layer_laws finds every layer type in include/nitro/nn/layers/ and asks for its
// `law_<type>` below). For every configuration a case lists, in float64:
//   gradient      the tape's gradients of sum(y * r) for the input and every parameter leaf equal
//                 central finite differences, in training and in evaluation;
//   batch last    the output keeps the input's batch extent last;
//   per sample    in evaluation, sample b of a batch gives what sample b alone gives (and in
//                 training too, for layers that do not look across the batch: not batch_norm, whose
//                 statistics are the batch's, nor dropout, whose mask is drawn per position);
//   determinism   two forwards with the same seed agree bit for bit, in both modes.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>
#include "../support/layer_check.hpp"

#include <cstring>
#include <vector>

namespace laws {

using layer_check::D;
using layer_check::random;
using nitro::shape;
namespace nn = nitro::nn;

struct how {
  bool with_x = true;                   // the input carries a gradient (not integer indices)
  bool independent_in_training = true;  // training mode does not look across the batch
};

// Forward of `layer` in a context of the given mode and seed, no tape: the output, owned.
template <class L>
D forward(L const& layer, D const& x, layer_check::fixture<L>& f, nitro::nn::layer_state<L, double> const& st, bool training,
          std::uint64_t seed = 7) {
  nitro::arena mem;
  nitro::step_context ctx{&mem, nullptr, training, seed, 0};
  nitro::context_scope scope(ctx);
  return layer(x, f.ps, st).first.clone();
}

// Sample b of a tensor whose last extent is the batch, as a batch of one.
inline D sample(D const& t, std::int64_t b) {
  const std::int64_t per = t.numel() / t.size(-1);
  D one = D::owned(t.shape().with_last(1));
  for (std::int64_t i = 0; i < per; ++i) one[i] = t[b * per + i];
  return one;
}

template <class L>
void obeys_the_laws(L const& layer, D x, how h, std::uint64_t seed) {
  static_assert(nn::layer<L>);
  INFO(layer.describe());
  CHECK(!layer.describe().empty());
  nitro::rng g(seed);
  for (bool training : {true, false}) {
    INFO((training ? "training" : "evaluation"));
    layer_check::gradcheck_layer(layer, x, g, training, h.with_x);
  }
  layer_check::fixture<L> f(g);
  nitro::nn::layer_state<L, double> st = f.st;
  nitro::for_each_leaf(st, [&](auto, D& leaf) { leaf = random(leaf.shape(), g, 0.5, 1.5); });  // running statistics
  const std::int64_t batch = x.size(-1);
  for (bool training : {true, false}) {
    INFO((training ? "training" : "evaluation"));
    const D y = forward(layer, x, f, st, training);
    REQUIRE(y.rank() >= 1);
    CHECK(y.size(-1) == batch);
    const D again = forward(layer, x, f, st, training);
    CHECK(std::memcmp(y.data(), again.data(), sizeof(double) * static_cast<std::size_t>(y.numel())) == 0);
    if (training && !h.independent_in_training) continue;
    double worst = 0;
    for (std::int64_t b = 0; b < batch; ++b) {
      const D alone = forward(layer, sample(x, b), f, st, training);
      const D mine = sample(y, b);
      REQUIRE(alone.shape() == mine.shape());
      for (std::int64_t i = 0; i < alone.numel(); ++i) worst = std::max(worst, std::abs(alone[i] - mine[i]));
    }
    CHECK(worst < 1e-12);
  }
}

// ---- one case per layer type: the configurations worth checking -----------------------------------
struct law_dense_layer {
  static void run(nitro::rng& g) {
    obeys_the_laws(nn::dense<3, 4>(), random({3, 5}, g), {}, 1);
    obeys_the_laws(nn::dense<3, 2>(nn::tanh), random({3, 4}, g), {}, 2);
    obeys_the_laws(nn::dense<4, 3, false>(nn::gelu), random({4, 3}, g), {}, 3);  // no bias
    obeys_the_laws(nn::dense<2, 3>(nn::sigmoid), random({2, 1}, g), {}, 4);      // a batch of one
  }
};
struct law_conv2d_layer {
  static void run(nitro::rng& g) {
    obeys_the_laws(nn::conv2d<2, 3, 3, 1, 1>(nn::relu), random({5, 4, 2, 3}, g), {}, 5);
    obeys_the_laws(nn::conv2d<2, 2, 3, 2, 0>(), random({7, 5, 2, 2}, g), {}, 6);
  }
};
struct law_pool_layer {
  static void run(nitro::rng& g) {
    obeys_the_laws(nn::max_pool<2>(), random({4, 4, 2, 3}, g), {}, 7);
    obeys_the_laws(nn::avg_pool<3, 1>(), random({5, 4, 1, 2}, g), {}, 8);
  }
};
struct law_flatten_t {
  static void run(nitro::rng& g) { obeys_the_laws(nn::flatten, random({2, 3, 2, 3}, g), {}, 9); }
};
struct law_dropout_layer {
  static void run(nitro::rng& g) { obeys_the_laws(nn::dropout(0.3), random({4, 5}, g), {.independent_in_training = false}, 10); }
};
struct law_layer_norm_layer {
  static void run(nitro::rng& g) {
    obeys_the_laws(nn::layer_norm<4>(), random({4, 3}, g), {}, 11);
    obeys_the_laws(nn::layer_norm<3>(), random({3, 2, 3}, g), {}, 12);  // [F, L, B]
  }
};
struct law_batch_norm_layer {
  static void run(nitro::rng& g) {
    obeys_the_laws(nn::batch_norm<3>(), random({3, 2, 3, 3}, g), {.independent_in_training = false}, 13);  // WHCN
    obeys_the_laws(nn::batch_norm<4>(), random({4, 5}, g), {.independent_in_training = false}, 14);
  }
};
struct law_embedding_layer {
  static void run(nitro::rng&) {
    obeys_the_laws(nn::embedding<5, 3>(), D::from({4, 1, 1, 0, 3, 4}, {3, 2}), {.with_x = false}, 15);  // [L, B] tokens
  }
};
struct law_identity_t {
  static void run(nitro::rng& g) { obeys_the_laws(nn::identity, random({3, 4}, g), {}, 16); }
};
struct law_relu_t {
  static void run(nitro::rng& g) { obeys_the_laws(nn::relu, random({3, 4}, g, 0.1, 1.0), {}, 17); }  // away from the kink
};
struct law_tanh_t {
  static void run(nitro::rng& g) { obeys_the_laws(nn::tanh, random({3, 4}, g), {}, 18); }
};
struct law_sigmoid_t {
  static void run(nitro::rng& g) { obeys_the_laws(nn::sigmoid, random({3, 4}, g), {}, 19); }
};
struct law_gelu_t {
  static void run(nitro::rng& g) { obeys_the_laws(nn::gelu, random({3, 4}, g), {}, 20); }
};
struct law_softmax_t {
  static void run(nitro::rng& g) { obeys_the_laws(nn::softmax, random({4, 3}, g), {}, 21); }
};
struct law_chain_layer {
  static void run(nitro::rng& g) {
    obeys_the_laws(nn::chain(nn::dense<3, 4>(nn::relu), nn::layer_norm<4>(), nn::dense<4, 2>()), random({3, 5}, g, 0.2, 1.0), {}, 22);
  }
};

struct law_residual_layer {
  static void run(nitro::rng& g) {
    obeys_the_laws(nn::residual(nn::chain(nn::layer_norm<3>(), nn::dense<3, 3>(nn::gelu))), random({3, 4}, g), {}, 23);  // pre-LN
    obeys_the_laws(nn::residual(nn::conv2d<2, 2, 3, 1, 1>(nn::tanh)), random({4, 3, 2, 2}, g), {}, 24);  // images keep their shape
    obeys_the_laws(nn::residual(nn::chain(nn::dense<3, 5>(nn::tanh), nn::dropout(0.2), nn::dense<5, 3>())), random({3, 4}, g),
                   {.independent_in_training = false}, 25);
  }
};
struct law_repeat_layer {
  static void run(nitro::rng& g) {
    obeys_the_laws(nn::repeat<3>(nn::residual(nn::chain(nn::layer_norm<4>(), nn::dense<4, 4>(nn::tanh)))), random({4, 3}, g), {}, 26);
    obeys_the_laws(nn::repeat<1>(nn::dense<3, 3>(nn::sigmoid)), random({3, 2}, g), {}, 27);
    obeys_the_laws(nn::repeat<2>(nn::batch_norm<3>()), random({3, 4}, g), {.independent_in_training = false}, 28);
  }
};
// A small transformer as a model struct: tokens, positions, a pre-LN block, a head.
struct TinyLM {
  nn::embedding_layer<7, 4> tok;
  nn::positional_embedding_layer<5, 4> pos;
  nn::residual_layer<nn::chain_layer<nn::layer_norm_layer<4>, nn::causal_self_attention_layer<4, 2>>> attn;
  nn::residual_layer<nn::chain_layer<nn::layer_norm_layer<4>, nn::dense_layer<4, 8, nn::gelu_t>, nn::dense_layer<8, 4>>> mlp;
  nn::dense_layer<4, 7> head;
  template <class Net, class X> auto forward(Net& net, X const& tokens) const {
    auto h = nn::call<"pos">(net, nn::call<"tok">(net, tokens));
    return nn::call<"head">(net, nn::call<"mlp">(net, nn::call<"attn">(net, h)));
  }
};
NITRO_MODEL(TinyLM, tok, pos, attn, mlp, head);
// Weight tying: the head is the token embedding read backwards (unembed), so tok.weight's
// gradient is the sum of the lookup's and the head's.
struct TiedLM {
  nn::embedding_layer<7, 4> tok;
  nn::positional_embedding_layer<5, 4> pos;
  nn::residual_layer<nn::chain_layer<nn::layer_norm_layer<4>, nn::causal_self_attention_layer<4, 2>>> attn;
  nn::layer_norm_layer<4> ln_f;
  template <class Net, class X> auto forward(Net& net, X const& tokens) const {
    auto h = nn::call<"attn">(net, nn::call<"pos">(net, nn::call<"tok">(net, tokens)));
    return nn::unembed<"tok">(net, nn::call<"ln_f">(net, h));
  }
};
NITRO_MODEL(TiedLM, tok, pos, attn, ln_f);
// The head alone, on features that carry a gradient: [3, T, B] -> [4] -> logits over 6 tokens.
struct TiedHead {
  nn::embedding_layer<6, 4> tok;
  nn::dense_layer<3, 4, nn::tanh_t> proj;
  template <class Net, class X> auto forward(Net& net, X const& x) const { return nn::unembed<"tok">(net, nn::call<"proj">(net, x)); }
};
NITRO_MODEL(TiedHead, tok, proj);
struct law_model_layer {
  static void run(nitro::rng& g) {
    obeys_the_laws(nn::model(TinyLM{}), D::from({1, 6, 0, 3, 2, 5, 4, 4}, {4, 2}), {.with_x = false}, 33);  // [T, B] tokens
    obeys_the_laws(nn::model(TiedLM{}), D::from({1, 6, 0, 3, 2, 5, 4, 4}, {4, 2}), {.with_x = false}, 34);
    obeys_the_laws(nn::model(TiedHead{}), random({3, 2, 3}, g), {}, 35);
  }
};
struct law_causal_self_attention_layer {
  static void run(nitro::rng& g) {
    obeys_the_laws(nn::causal_self_attention<4, 2>(), random({4, 5, 3}, g), {}, 29);   // [W, T, B]
    obeys_the_laws(nn::causal_self_attention<2, 1>(), random({2, 70, 1}, g), {}, 30);  // two tiles of keys and queries
  }
};
struct law_positional_embedding_layer {
  static void run(nitro::rng& g) {
    obeys_the_laws(nn::positional_embedding<6, 3>(), random({3, 4, 2}, g), {}, 31);  // T = 4 of 6 positions
    obeys_the_laws(nn::positional_embedding<3, 2>(), random({2, 3, 1}, g), {}, 32);
  }
};

}  // namespace laws

TEST_CASE_TEMPLATE("every layer obeys the laws: gradients, batch last, per sample, determinism", Case, laws::law_dense_layer,
                   laws::law_conv2d_layer, laws::law_pool_layer, laws::law_flatten_t, laws::law_dropout_layer, laws::law_layer_norm_layer,
                   laws::law_batch_norm_layer, laws::law_embedding_layer, laws::law_identity_t, laws::law_relu_t, laws::law_tanh_t,
                   laws::law_sigmoid_t, laws::law_gelu_t, laws::law_softmax_t, laws::law_chain_layer,
                   laws::law_residual_layer, laws::law_repeat_layer, laws::law_causal_self_attention_layer,
                   laws::law_positional_embedding_layer, laws::law_model_layer) {
  nitro::rng g(2026);
  Case::run(g);
}
