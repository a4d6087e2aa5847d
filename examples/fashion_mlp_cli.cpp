// fashion_mlp_cli — fashion_mlp's experiment with its command line: knobs, variants, sweeps, run
// records. (To be folded into fashion_mlp.cpp.)
//
//   ./fashion_mlp_cli variants                          the knobs, variants and sweeps below
//   ./fashion_mlp_cli run --variant smoke               a one-epoch run on 2000 images, under runs/
//   ./fashion_mlp_cli run --variant small --set lr=0.002
//   ./fashion_mlp_cli sweep widths                      width 64 and 256: two programs compiled in
//   ./fashion_mlp_cli sweep seeds --jobs 3              three seeds, three processes
//   ./fashion_mlp_cli explain --variant small           every knob and run keyword with its source
//
//   width      GraphConst: compiled in; each value in nitro::main<...> is a program
//   smoothing  Device: label smoothing, read by the loss each step
//   the data   Host, built by build_data() after the selection (so it sees train_limit)
#include <nitro/nitro.hpp>

#include <cstdint>

namespace fashion {

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };

template <int Width = 256>
struct FashionMLP {
  nitro::GraphConst<int, Width> width;       // compiled in
  nitro::Device<float> smoothing{0.05f};     // scheduled without recompiling
  float lr = 1e-3f;                          // the base learning rate
  int max_epochs = 5;                        // a run keyword read from a field
  std::int64_t batch_size = 128;
  std::int64_t train_limit = 0;              // training images kept (0: all 55000)
  std::int64_t test_limit = 0;               // valid and test images kept (0: all)

  static constexpr auto knobs() {
    return nitro::knobs(nitro::knob<"lr">("base learning rate"),
                        nitro::knob<"width">("hidden width; compiled in, one program per value"),
                        nitro::knob<"smoothing">("label smoothing of the loss"),
                        nitro::knob<"max_epochs">("epochs to train"),
                        nitro::knob<"batch_size">("samples per batch"),
                        nitro::knob<"train_limit">("training images kept (0: all)"),
                        nitro::knob<"test_limit">("valid and test images kept (0: all)"));
  }
  static constexpr auto variants() {
    return nitro::variants(
        nitro::variant<"small">(nitro::set<"width">(64), nitro::set<"lr">(0.002)),
        nitro::variant<"smoke">(nitro::set<"width">(64), nitro::set<"max_epochs">(1), nitro::set<"train_limit">(2000),
                                nitro::set<"test_limit">(500)));
  }
  static constexpr auto sweeps() {
    return nitro::sweeps(nitro::sweep<"seeds">(nitro::axis<"seed">(1, 2, 3)),
                         nitro::sweep<"widths">(nitro::axis<"width">(64, 256)));
  }

  // A hook, not a member initialiser: it runs after the selection, so it reads the selected limits.
  auto build_data() const {
    return nitro::data::fashion_mnist({.train_limit = train_limit, .test_limit = test_limit});
  }
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
NITRO_EXPERIMENT(FashionMLP, width, smoothing, lr, max_epochs, batch_size, train_limit, test_limit);

}  // namespace fashion

int main(int argc, char** argv) {
  return nitro::main<fashion::FashionMLP<256>, fashion::FashionMLP<64>>(argc, argv);
}
