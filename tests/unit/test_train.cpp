// train/: the handle on real data — training beats chance, runs are reproducible, predict needs
// no labels, only declared fields move, Device fields are bound, mistakes are coded errors.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>

#include <cstring>

namespace train_test {
struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };

template <int Width = 64>
struct SmallMLP {
  nitro::GraphConst<int, Width> width;
  nitro::Device<float> smoothing{0.05f};
  float lr = 2e-3f;
  int max_epochs = 2;
  std::int64_t batch_size = 64;
  int train_limit = 4000;

  auto build_data() const { return nitro::data::fashion_mnist({.valid = 500, .train_limit = train_limit, .test_limit = 1000}); }
  auto build_model() const {
    constexpr int W = decltype(width)::value;
    return nitro::nn::chain(nitro::nn::dense<784, W>(nitro::nn::relu), nitro::nn::dense<W, 10>());
  }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label, smoothing); }
  auto metrics(nitro::Tensor const& logits, LossIn const& in) const {
    return Metrics{.acc = {nitro::nn::correct_count(logits, in.label), double(in.label.batch())}};
  }
};
NITRO_EXPERIMENT(SmallMLP, width, smoothing, lr, max_epochs, batch_size, train_limit);

// forward reduces over the batch: a mistake the handle names at the first step
struct Reducing {
  std::int64_t batch_size = 32;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 100, .train_limit = 320, .test_limit = 100}); }
  auto build_model() const { return nitro::nn::dense<784, 10>(); }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const {
    auto [y, st2] = model(in.img, ps, st);
    return std::pair{nitro::sum(y, 1), st2};  // [10, 1]: the batch is gone
  }
  auto loss(nitro::Tensor const& y, LossIn const&) const { return nitro::sum(y); }
};
NITRO_EXPERIMENT(Reducing, batch_size);
}  // namespace train_test

using namespace train_test;

TEST_CASE("training on a slice of Fashion-MNIST beats chance by a wide margin") {
  nitro::Nitro h(SmallMLP<64>{});
  auto before = h.evaluate("test");
  auto hist = h.train(false);
  REQUIRE(hist.size() == 2);
  auto after = h.evaluate("test");
  CHECK(before.at("acc") < 0.3);
  CHECK(after.at("acc") > 0.70);  // chance is 0.10
  CHECK(after.at("loss") < before.at("loss"));
  CHECK(hist[1].train_loss < hist[0].train_loss);
  CHECK(h.step() == 2 * (4000 / 64));
  CHECK(h.seed().source == nitro::keyword_source::fallback);
  CHECK(h.max_epochs().source == nitro::keyword_source::field);
}

TEST_CASE("same seed, same bytes; another seed, other bytes") {
  auto run = [](std::uint64_t seed) {
    nitro::Nitro h(SmallMLP<32>{.train_limit = 1000}, nitro::seed = seed, nitro::max_epochs = 1);
    h.train(false);
    auto* p = h.param_buffer().values();
    return std::vector<float>(p, p + decltype(h)::param_store_type::size);
  };
  auto a = run(3), b = run(3), c = run(4);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  CHECK(a != c);
}

TEST_CASE("run keywords: keyword over field over default, each with its source") {
  nitro::Nitro h(SmallMLP<16>{}, nitro::max_epochs = 7, nitro::seed = 9);
  CHECK(h.max_epochs().value == 7);
  CHECK(h.max_epochs().source == nitro::keyword_source::keyword);
  CHECK(h.seed().value == 9);
  CHECK(h.batch_size().value == 64);
  CHECK(h.batch_size().source == nitro::keyword_source::field);
}

TEST_CASE("predict binds forward alone, on a batch without labels; outputs keep the batch last") {
  nitro::Nitro h(SmallMLP<16>{});
  struct Images { BOOST_HANA_DEFINE_STRUCT(Images, (nitro::Tensor, img)); };
  auto const& test = h.data().split("test").all();
  Images x{nitro::Tensor(const_cast<float*>(test.img.data()), nitro::shape{28, 28, 1, 5})};
  nitro::Tensor logits = h.predict(x);
  CHECK(logits.shape() == nitro::shape{10, 5});
  CHECK(logits.owns_memory());
}

TEST_CASE("only fields some hook declares reach the device") {
  nitro::Nitro h(SmallMLP<16>{.train_limit = 640}, nitro::max_epochs = 1);
  h.train(false);
  CHECK(h.backend().transfers_of("img").transfers > 0);
  CHECK(h.backend().transfers_of("label").transfers > 0);
  CHECK(h.backend().transfers_of("idx").transfers == 0);  // no hook declares idx
}

TEST_CASE("Device fields are bound to the handle's slots; the loss reads the slot") {
  SmallMLP<16> e;
  e.smoothing = 0.2f;
  nitro::Nitro h(e);
  CHECK(h.experiment().smoothing.bound());
  CHECK(float(h.experiment().smoothing) == doctest::Approx(0.2f));
  CHECK_FALSE(e.smoothing.bound());  // the caller's copy is untouched
}

TEST_CASE("a step takes its memory from the arena, which stops growing after the first step") {
  nitro::Nitro h(SmallMLP<32>{.train_limit = 640}, nitro::max_epochs = 1);
  using H = decltype(h);
  nitro::data::loader<H::batch_type> ld(h.data().split("train"), {32, true, true, 2, 7});
  ld.start_epoch(0);
  h.train_step(*ld.next());
  const std::size_t cap = h.step_memory().capacity();
  CHECK(cap > 0);  // the step's intermediates came from the arena
  CHECK(h.step_memory().chunk_count() == 1);
  for (int i = 0; i < 8; ++i) h.train_step(*ld.next());  // eight more steps, each a new batch
  CHECK(h.step() == 9);
  CHECK(h.step_memory().capacity() == cap);
  CHECK(h.step_memory().chunk_count() == 1);
}

TEST_CASE("an output whose last extent is not the batch is an error naming it") {
  nitro::Nitro h(Reducing{});
  CHECK_THROWS_WITH_AS(h.train(false), doctest::Contains("E-BIND-006"), nitro::error);
}
