// A tiny experiment compiled against the installed package: binding, one training step.
#include <nitro/nitro.hpp>

#include <cstdio>

struct Batch { BOOST_HANA_DEFINE_STRUCT(Batch, (nitro::Tensor, x), (nitro::Tensor, y)); };
struct In { BOOST_HANA_DEFINE_STRUCT(In, (nitro::Tensor, x)); };
struct Target { BOOST_HANA_DEFINE_STRUCT(Target, (nitro::Tensor, y)); };

struct Regression {
  nitro::GraphConst<int, 4> width;
  float lr = 0.05f;
  std::int64_t batch_size = 8;
  auto build_data() const {
    nitro::Tensor x = nitro::Tensor::owned({2, 32}), y = nitro::Tensor::owned({1, 32});
    for (int i = 0; i < 32; ++i) { x(0, i) = float(i % 4); x(1, i) = float(i / 8); y(0, i) = 2 * x(0, i) - x(1, i); }
    return nitro::data::dataset<Batch>{"line", {{"train", Batch{x, y}}}, "consumer"};
  }
  auto build_model() const {
    return nitro::nn::chain(nitro::nn::dense<2, decltype(width)::value>(nitro::nn::tanh), nitro::nn::dense<decltype(width)::value, 1>());
  }
  auto forward(auto const& m, auto const& ps, auto const& st, In const& in) const { return m(in.x, ps, st); }
  auto loss(nitro::Tensor const& yhat, Target const& t) const { return nitro::nn::mse(yhat, t.y); }
};
NITRO_EXPERIMENT(Regression, width, lr, batch_size);

int main() {
  nitro::Nitro h(Regression{}, nitro::max_epochs = 2);
  h.train(false);
  std::printf("consumer: binding ok, %lld steps\n", static_cast<long long>(h.step()));
  return h.step() == 8 ? 0 : 1;
}
