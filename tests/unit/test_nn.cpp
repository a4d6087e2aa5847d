// nn/: layers, chains, losses and initialisers; every layer's gradient against finite differences.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>

#include <cmath>

using D = nitro::basic_tensor<double>;
using nitro::shape;

namespace {
D random(shape s, nitro::rng& g, double lo = -1, double hi = 1) {
  D t = D::owned(s);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = g.uniform(lo, hi);
  return t;
}
// Parameters of a layer as owned double tensors, randomly filled, and pointers to them.
template <class L>
struct layer_fixture {
  nitro::nn::layer_params<L, double> ps;
  nitro::nn::layer_state<L, double> st;
  std::vector<D*> leaves;
  explicit layer_fixture(nitro::rng& g) {
    nitro::for_each_leaf(ps, [&](auto, D& leaf) { (void)leaf; });
    std::size_t i = 0;
    nitro::for_each_leaf_type<typename L::param_spec>([&](auto kp, auto spec) {
      using S = typename decltype(spec)::type;
      D* leaf = nitro::find_leaf<D>(ps, decltype(kp)::view());
      *leaf = random(S::shape(), g);
      leaves.push_back(leaf);
      ++i;
    });
  }
};
void require_ok(nitro::nn::gradcheck_result const& r) {
  INFO(r.worst);
  CHECK(r.ok);
}
}  // namespace

TEST_CASE("dense: y = act(W x + b), every activation, checked against finite differences") {
  nitro::rng g(11);
  D x = random({5, 4}, g);
  auto check = [&](auto layer) {
    using L = decltype(layer);
    layer_fixture<L> f(g);
    D& W = *f.leaves[0];
    D& b = *f.leaves[1];
    require_ok(nitro::nn::gradcheck([&] { return nitro::sum(nitro::square(layer(x, f.ps, f.st).first)); }, {&x, &W, &b}));
  };
  check(nitro::nn::dense<5, 3>());
  check(nitro::nn::dense<5, 3>(nitro::nn::relu));
  check(nitro::nn::dense<5, 3>(nitro::nn::tanh));
  check(nitro::nn::dense<5, 3>(nitro::nn::sigmoid));
  check(nitro::nn::dense<5, 3>(nitro::nn::gelu));
}

TEST_CASE("dense: values against a hand computation, and a clear error for the wrong input") {
  auto layer = nitro::nn::dense<2, 1>(nitro::nn::relu);
  nitro::nn::layer_params<decltype(layer), double> ps;
  nitro::get<"weight">(ps) = D::from({2, -1}, {1, 2});
  nitro::get<"bias">(ps) = D::from({0.5}, {1});
  D x = D::from({1, 1, 0, 3}, {2, 2});
  D y = layer(x, ps, {}).first;
  CHECK(y.to_vector() == std::vector<double>{1.5, 0.0});  // relu(2-1+0.5), relu(0-3+0.5)
  CHECK(layer.describe() == "dense<2, 1, relu>");
  CHECK_THROWS_WITH_AS(layer(D::owned({3, 2}), ps, {}), doctest::Contains("E-SHAPE-012"), nitro::error);
}

TEST_CASE("chain: children named layer_1, layer_2, ...; keypaths and flat layout") {
  auto net = nitro::nn::chain(nitro::nn::dense<784, 32>(nitro::nn::relu), nitro::nn::dense<32, 10>());
  using Net = decltype(net);
  std::vector<std::string> paths;
  nitro::for_each_leaf_type<Net::param_spec>([&](auto kp, auto) { paths.emplace_back(kp.view()); });
  CHECK(paths == std::vector<std::string>{"layer_1.weight", "layer_1.bias", "layer_2.weight", "layer_2.bias"});
  using Store = nitro::param_store<Net::param_spec>;
  static_assert(Store::count == 784 * 32 + 32 + 32 * 10 + 10);
  static_assert(Store::leaves[1].offset % 16 == 0);
  CHECK(Store::leaves[2].keypath == "layer_2.weight");
  CHECK(net.describe() == "chain(dense<784, 32, relu>, dense<32, 10>)");
  static_assert(Net::in_features == 784 && Net::out_features == 10);

  nitro::rng g(3);
  auto small = nitro::nn::chain(nitro::nn::dense<3, 4>(nitro::nn::tanh), nitro::nn::dense<4, 2>());
  layer_fixture<decltype(small)> f(g);
  D x = random({3, 5}, g);
  require_ok(nitro::nn::gradcheck([&] { return nitro::sum(nitro::square(small(x, f.ps, f.st).first)); },
                                  {&x, f.leaves[0], f.leaves[1], f.leaves[2], f.leaves[3]}));
}

TEST_CASE("initialisers: seeded, and with the statistics they promise") {
  nitro::Tensor w = nitro::Tensor::owned({256, 784});
  nitro::rng g(5);
  nitro::init::torch_default(w, 784, 256, g);
  double bound = 1.0 / std::sqrt(784.0), mx = 0, mean = 0, sq = 0;
  for (std::int64_t i = 0; i < w.numel(); ++i) { mx = std::max(mx, double(std::abs(w[i]))); mean += w[i]; sq += double(w[i]) * w[i]; }
  CHECK(std::abs(mean / double(w.numel())) < 0.01 * bound);
  CHECK(mx <= bound);
  CHECK(mx > 0.99 * bound);
  double var = sq / double(w.numel());
  CHECK(var == doctest::Approx(bound * bound / 3).epsilon(0.02));
  nitro::init::glorot_normal(w, 784, 256, g);
  sq = 0;
  for (std::int64_t i = 0; i < w.numel(); ++i) sq += double(w[i]) * w[i];
  CHECK(sq / double(w.numel()) == doctest::Approx(2.0 / (784 + 256)).epsilon(0.02));
  nitro::Tensor a = nitro::Tensor::owned({10}), b = nitro::Tensor::owned({10});
  nitro::rng g1(9), g2(9);
  nitro::init::kaiming_normal(a, 10, 10, g1);
  nitro::init::kaiming_normal(b, 10, 10, g2);
  CHECK(a.to_vector() == b.to_vector());
}

TEST_CASE("losses: values against hand computations") {
  // two classes, logits (0, 0): cross-entropy log 2, with smoothing s the same
  D logits = D::from({0, 0, 2, 0}, {2, 2});
  D onehot = D::from({1, 0, 0, 1}, {2, 2});
  double l0 = std::log(2.0), l1 = std::log(1 + std::exp(2.0));  // sample 2: true class 1, logit 0 vs 2
  CHECK(nitro::nn::logitcrossentropy(logits, onehot).item() == doctest::Approx((l0 + l1) / 2));
  D indices = D::from({0, 1}, {1, 2});
  CHECK(nitro::nn::logitcrossentropy(logits, indices).item() == doctest::Approx((l0 + l1) / 2));
  // smoothing 0.1: target (0.95, 0.05) on sample 2's wrong class, etc.
  double s = 0.1;
  double l1s = (1 - s / 2) * l1 + (s / 2) * (l1 - 2.0);
  CHECK(nitro::nn::logitcrossentropy(logits, onehot, s).item() == doctest::Approx((l0 + l1s) / 2));
  nitro::Device<double> dev{s};
  CHECK(nitro::nn::logitcrossentropy(logits, onehot, dev).item() == doctest::Approx((l0 + l1s) / 2));
  CHECK_THROWS_WITH_AS(nitro::nn::logitcrossentropy(logits, onehot, 1.5), doctest::Contains("E-LOSS-002"), nitro::error);
  CHECK_THROWS_WITH_AS(nitro::nn::logitcrossentropy(logits, D::owned({3})), doctest::Contains("E-LOSS-001"), nitro::error);
  CHECK(nitro::nn::mse(D::from({1, 2}, {2}), D::from({0, 0}, {2})).item() == doctest::Approx(2.5));
  double bce = (std::log(1 + std::exp(-1.0)) + std::log(1 + std::exp(1.0))) / 2;
  CHECK(nitro::nn::logitbinarycrossentropy(D::from({1, 1}, {2}), D::from({1, 0}, {2})).item() == doctest::Approx(bce));
  CHECK(nitro::nn::correct_count(logits, onehot) == 1.0);  // sample 1: a tie goes to class 0 (right); sample 2: wrong
}

TEST_CASE("losses: gradients against finite differences") {
  nitro::rng g(13);
  D x = random({4, 3}, g), y = random({4, 3}, g);
  D onehot = D::owned({4, 3});
  onehot(1, 0) = 1; onehot(3, 1) = 1; onehot(0, 2) = 1;
  D idx = D::from({1, 3, 0}, {1, 3});
  require_ok(nitro::nn::gradcheck([&] { return nitro::nn::logitcrossentropy(x, onehot, 0.1); }, {&x}));
  require_ok(nitro::nn::gradcheck([&] { return nitro::nn::logitcrossentropy(x, idx, 0.05); }, {&x}));
  require_ok(nitro::nn::gradcheck([&] { return nitro::nn::mse(x, y); }, {&x, &y}));
  require_ok(nitro::nn::gradcheck([&] { return nitro::nn::logitbinarycrossentropy(x, nitro::sigmoid(y)); }, {&x, &y}));
}

TEST_CASE("classification: confusion_matrix counts (true, predicted) for one-hot and index targets; accuracy agrees") {
  // 3 classes, 4 samples: predicted 0, 2, 2, 1 (the largest logit); true 0, 2, 1, 1
  nitro::Tensor logits = nitro::Tensor::owned({3, 4});
  const float x[12] = {5, 1, 0, /**/ 0, 1, 3, /**/ 1, 0, 2, /**/ 0, 4, 1};
  for (int k = 0; k < 12; ++k) logits[k] = x[k];
  nitro::Tensor index = nitro::Tensor::owned({1, 4});
  const float truth[4] = {0, 2, 1, 1};
  for (int c = 0; c < 4; ++c) index[c] = truth[c];
  nitro::Tensor onehot = nitro::Tensor::zeros({3, 4});
  for (int c = 0; c < 4; ++c) onehot(int(truth[c]), c) = 1;
  for (auto const* target : {&index, &onehot}) {
    auto cm = nitro::nn::confusion_matrix(logits, *target);
    REQUIRE(cm.shape() == nitro::shape{3, 3});
    const float want[3][3] = {{1, 0, 0}, {0, 1, 1}, {0, 0, 1}};  // [true][predicted]
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) CHECK(cm(i, j) == want[i][j]);
    auto m = nitro::nn::classification(logits, *target);
    CHECK(m.acc.sum == 3);
    CHECK(m.acc.count == 4);
    CHECK(m.confusion.value(1, 2) == 1);  // the one mistake: class 1 taken for 2
    auto a = nitro::nn::accuracy(logits, *target);
    CHECK(a.acc.sum == 3);
    CHECK(a.acc.count == 4);
  }
}
