// Shared by the optimizer's compile-fail tests: a small two-layer spec and its program, without
// the rest of the handle (so each test compiles in a few seconds).
#pragma once
#include <nitro/core/reflect.hpp>
#include <nitro/nn/layers/chain.hpp>
#include <nitro/nn/layers/dense.hpp>
#include <nitro/optim/program.hpp>

namespace cfo {
using Net = nitro::nn::chain_layer<nitro::nn::dense_layer<4, 3>, nitro::nn::dense_layer<3, 2>>;
using Spec = Net::param_spec;

// Two groups: layer_1.* is the encoder, the rest the head.
struct TwoGroups {
  auto param_group(auto kp) const {
    if constexpr (kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
    else return nitro::group<"head">{};
  }
};

// Builds the optimizer program of E with schedule map M (as the handle does).
template <class E, class M = nitro::schedule_map<>>
int program_of(M const& m = {}) {
  using P = nitro::optim::program<E, Spec, M>;
  typename P::store_type store;
  E e{};
  P p(e, store, m, {});
  return int(p.steps());
}
}  // namespace cfo

namespace cfo {
// An experiment with one field of each kind, for the schedule keys' namespaces.
template <int W = 8>
struct Fields {
  nitro::GraphConst<int, W> width;
  nitro::Device<float> smoothing{0.0f};
  nitro::Device<float> lambda{0.0f};   // also a rule field's name: a bare key `lambda` is ambiguous
  float lr = 1e-3f;                    // Host: in neither namespace
  auto param_group(auto kp) const {
    if constexpr (kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
    else return nitro::group<"head">{};
  }
  auto optimizer(nitro::group<"encoder">) const { return nitro::optim::sgd({.momentum = 0.9}); }
  auto optimizer(nitro::group<"head">) const { return nitro::optim::adam(); }
};
NITRO_EXPERIMENT(Fields, width, smoothing, lambda, lr);
}  // namespace cfo
