// fashion_cnn — a small convolutional network on Fashion-MNIST, with its command line (nitro::main).
//
//   [28, 28, 1, B] -> conv 3x3 (pad 1), `channels` maps, relu -> max_pool 2 -> batch_norm   [14, 14, C, B]
//                  -> conv 3x3 (pad 1), 2*`channels` maps, relu -> max_pool 2 -> batch_norm [7, 7, 2C, B]
//                  -> flatten -> dropout 0.25 -> dense 128, relu -> dense 10 (logits)
//
//   ./fashion_cnn run                        5 epochs on all 60000 training images, then the test split
//   ./fashion_cnn run --variant smoke        one epoch on 2000 images, under runs/
//   ./fashion_cnn run --set lr=2e-3 --set valid=5000
//   ./fashion_cnn_nvcc run --set device=cuda  the same struct and command line on a GPU (nvcc build)
//   ./fashion_cnn variants | explain | ir | eval | sweep seeds | ...   (see --help)
//
//   channels   GraphConst: compiled in; every layer shape it touches is specialised for it
//   smoothing  Device: label smoothing, read by the loss each step
//   the images Host: the data set never leaves the host except the fields hooks declare
//
// batch_norm's running statistics are the model's state: forward returns st_new in training (the
// handle keeps it) and st itself in evaluation. dropout is active in training only.
#include <nitro/main.hpp>

#include <cstdint>

namespace fashion {

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };

template <int Channels = 32>
struct FashionCNN {
  nitro::GraphConst<int, Channels> channels;  // compiled in
  nitro::Device<float> smoothing{0.05f};      // scheduled without recompiling
  float lr = 1e-3f;                           // host knob: the learning rate
  int max_epochs = 5;                         // run keywords read from fields ...
  std::int64_t batch_size = 128;
  int log_every_n_steps = 100;
  std::int64_t valid = 0;        // training images held out as the valid split
  std::int64_t train_limit = 0;  // training images kept (0: all)
  std::int64_t test_limit = 0;   // valid and test images kept (0: all)

  static constexpr auto knobs() {
    return nitro::knobs(nitro::knob<"lr">("learning rate (AdamW, the default rule)"),
                        nitro::knob<"smoothing">("label smoothing of the loss"),
                        nitro::knob<"max_epochs">(),  // run keywords: their docs are the keyword table's
                        nitro::knob<"batch_size">(),
                        nitro::knob<"valid">("training images held out as the valid split (0: none)"),
                        nitro::knob<"train_limit">("training images kept (0: all)"),
                        nitro::knob<"test_limit">("valid and test images kept (0: all)"));
  }
  static constexpr auto variants() {
    return nitro::variants(nitro::variant<"smoke">(nitro::set<"max_epochs">(1), nitro::set<"valid">(500),
                                                   nitro::set<"train_limit">(2000), nitro::set<"test_limit">(500)));
  }
  static constexpr auto sweeps() { return nitro::sweeps(nitro::sweep<"seeds">(nitro::axis<"seed">(1, 2, 3))); }

  // A hook, not a member initialiser: it runs after the selection, so it reads the selected limits.
  auto build_data() const {
    return nitro::data::fashion_mnist({.valid = valid, .train_limit = train_limit, .test_limit = test_limit});
  }
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
    return nitro::nn::classification(logits, in.label);  // acc, and the split's confusion matrix
  }
};
NITRO_EXPERIMENT(FashionCNN, channels, smoothing, lr, max_epochs, batch_size, log_every_n_steps, valid, train_limit, test_limit);

}  // namespace fashion

int main(int argc, char** argv) { return nitro::main<fashion::FashionCNN<32>>(argc, argv); }
