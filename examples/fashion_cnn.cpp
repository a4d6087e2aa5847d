// fashion_cnn — a small convolutional network on Fashion-MNIST: two convolutions, two dense layers.
//
//   [28, 28, 1, B] -> conv 3x3 (pad 1), `channels` maps, relu -> max_pool 2 -> batch_norm   [14, 14, C, B]
//                  -> conv 3x3 (pad 1), 2*`channels` maps, relu -> max_pool 2 -> batch_norm [7, 7, 2C, B]
//                  -> flatten -> dropout 0.25 -> dense 128, relu -> dense 10 (logits)
//
//   channels   GraphConst: compiled in; every layer shape it touches is specialised for it
//   smoothing  Device: label smoothing, read by the loss each step
//   the images Host: the data set never leaves the host except the fields hooks declare
//
// batch_norm's running statistics are the model's state: forward returns st_new in training (the
// handle keeps it) and st itself in evaluation. dropout is active in training only.
#include <nitro/nitro.hpp>

#include <chrono>
#include <cstdio>

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };

template <int Channels = 32>
struct FashionCNN {
  nitro::GraphConst<int, Channels> channels;  // compiled in
  nitro::Device<float> smoothing{0.05f};      // scheduled without recompiling
  float lr = 1e-3f;                           // host knob: the base learning rate
  int max_epochs = 5;                         // a run keyword read from a field
  std::int64_t batch_size = 128;

  auto build_data() const { return nitro::data::fashion_mnist(); }

  auto build_model() const {
    namespace nn = nitro::nn;
    constexpr int C = decltype(channels)::value;
    return nn::chain(nn::conv2d<1, C, 3, 1, 1>(nn::relu), nn::max_pool<2>(), nn::batch_norm<C>(),          // [14, 14, C, B]
                     nn::conv2d<C, 2 * C, 3, 1, 1>(nn::relu), nn::max_pool<2>(), nn::batch_norm<2 * C>(),  // [7, 7, 2C, B]
                     nn::flatten, nn::dropout(0.25),                                                         // [49 * 2C, B]
                     nn::dense<49 * 2 * C, 128>(nn::relu), nn::dense<128, 10>());
  }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const {
    return model(in.img, ps, st);  // (logits [10, B], st_new)
  }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const {
    return nitro::nn::logitcrossentropy(logits, in.label, smoothing);
  }
  auto metrics(nitro::Tensor const& logits, LossIn const& in) const {
    return Metrics{.acc = {nitro::nn::correct(logits, in.label), double(in.label.batch())}};  // the count stays where the logits are
  }
};
NITRO_EXPERIMENT(FashionCNN, channels, smoothing, lr, max_epochs, batch_size);

int main() {
  try {
    auto t0 = std::chrono::steady_clock::now();
    nitro::Nitro h(FashionCNN<32>{});
    h.train();
    auto test = h.evaluate("test");
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("test accuracy %.4f  (test loss %.4f)  %.0f s in all\n", test.at("acc"), test.at("loss"), secs);
    return 0;
  } catch (nitro::error const& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
