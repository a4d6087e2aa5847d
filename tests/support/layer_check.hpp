// tests/support/layer_check.hpp — a layer's gradient against finite differences, shared by the layer
// tests and the law suite every layer passes (tests/unit/test_layer_laws.cpp).
//
//   nitro::rng g(1);
//   layer_check::gradcheck_layer(nitro::nn::dense<3, 2>(), layer_check::random({3, 4}, g), g);
#pragma once

#include <nitro/nitro.hpp>

#include <doctest/doctest.h>

#include <vector>

namespace layer_check {

using D = nitro::basic_tensor<double>;
using nitro::shape;

inline D random(shape s, nitro::rng& g, double lo = -1, double hi = 1) {
  D t = D::owned(s);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = g.uniform(lo, hi);
  return t;
}

inline void require_ok(nitro::nn::gradcheck_result const& r) {
  INFO(r.worst);
  CHECK(r.ok);
}

// Every parameter leaf of a layer, random, with pointers to them in declaration order.
template <class L>
struct fixture {
  nitro::nn::layer_params<L, double> ps;
  nitro::nn::layer_state<L, double> st;
  std::vector<D*> leaves;
  explicit fixture(nitro::rng& g, double lo = -1, double hi = 1) {
    nitro::for_each_leaf_type<typename L::param_spec>([&](auto kp, auto spec) {
      D* leaf = nitro::find_leaf<D>(ps, decltype(kp)::view());
      *leaf = random(decltype(spec)::type::shape(), g, lo, hi);
      leaves.push_back(leaf);
    });
    nitro::for_each_leaf_type<typename L::state_spec>([&](auto kp, auto spec) {
      *nitro::find_leaf<D>(st, decltype(kp)::view()) = D::owned(decltype(spec)::type::shape());
    });
  }
};

// The gradient check of one layer: loss = sum(y * r) for a fixed random r, over x and every parameter.
template <class L>
void gradcheck_layer(L const& layer, D x, nitro::rng& g, bool training = true, bool with_x = true) {
  fixture<L> f(g);
  nitro::nn::layer_state<L, double> st = f.st;
  nitro::for_each_leaf(st, [&](auto kp, D& leaf) {  // running statistics away from their defaults
    leaf = random(leaf.shape(), g, 0.5, 1.5);
    (void)kp;
  });
  D r;
  auto loss = [&] {
    D y = layer(x, f.ps, st).first;
    if (!r.defined()) r = random(y.shape(), g);
    return nitro::sum(y * r);
  };
  std::vector<D*> in;
  if (with_x) in.push_back(&x);
  for (D* p : f.leaves) in.push_back(p);
  // one input at a time (gradcheck takes an initializer_list): each is checked against its own differences
  INFO(layer.describe() << (training ? " (training)" : " (evaluation)"));
  for (std::size_t i = 0; i < in.size(); ++i) {
    INFO("input " << i << " of " << in.size());
    require_ok(nitro::nn::gradcheck(loss, {in[i]}, 1e-6, 1e-7, 1e-5, training));
  }
}

}  // namespace layer_check
