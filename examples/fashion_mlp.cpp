// fashion_mlp — the spec's MnistMLP in C++: two hidden layers of `width` on Fashion-MNIST.
//
//   width      GraphConst: compiled in; a new width is a new program
//   smoothing  Device: label smoothing, read by the loss each step
//   the images Host: the data set never leaves the host except the fields hooks declare
#include <nitro/nitro.hpp>

#include <cstdio>

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };

template <int Width = 256>
struct FashionMLP {
  nitro::GraphConst<int, Width> width;       // compiled in
  nitro::Device<float> smoothing{0.05f};     // scheduled without recompiling
  float lr = 1e-3f;                          // host knob: the base learning rate
  int max_epochs = 5;                        // a run keyword read from a field
  std::int64_t batch_size = 128;

  auto build_data() const { return nitro::data::fashion_mnist(); }

  auto build_model() const {
    constexpr int W = decltype(width)::value;
    return nitro::nn::chain(nitro::nn::dense<784, W>(nitro::nn::relu),
                            nitro::nn::dense<W, W>(nitro::nn::relu),
                            nitro::nn::dense<W, 10>());
  }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const {
    return model(in.img, ps, st);  // (logits [10, B], st_new)
  }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const {
    return nitro::nn::logitcrossentropy(logits, in.label, smoothing);
  }
  auto metrics(nitro::Tensor const& logits, LossIn const& in) const {
    return Metrics{.acc = {nitro::nn::correct_count(logits, in.label), double(in.label.batch())}};
  }
};
NITRO_EXPERIMENT(FashionMLP, width, smoothing, lr, max_epochs, batch_size);

int main() {
  try {
    nitro::Nitro h(FashionMLP<256>{});
    h.train();
    auto test = h.evaluate("test");
    std::printf("test accuracy %.4f  (test loss %.4f)\n", test.at("acc"), test.at("loss"));
    return 0;
  } catch (nitro::error const& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
