// fashion_mlp — the spec's MnistMLP in C++: two hidden layers of `width` on Fashion-MNIST.
//
//   width      GraphConst: compiled in; a new width is a new program
//   smoothing  Device: label smoothing, read by the loss each step
//   the images Host: the data set never leaves the host except the fields hooks declare
//
// Trained with AdamW under PyTorch's OneCycleLR curve (the learning rate, and beta1 cycled the
// other way, as OneCycleLR's default cycle_momentum does for Adam).
//   ./fashion_mlp            one parameter group
//   ./fashion_mlp --groups   two groups: the first layer ("encoder") at half the rate, decayed
//                            toward its initial weights (anchor w0); the rest ("head") as before
#include <nitro/nitro.hpp>

#include <cstdio>
#include <cstring>

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };

template <int Width = 256, bool TwoGroups = false>
struct FashionMLP {
  nitro::GraphConst<int, Width> width;       // compiled in
  nitro::Device<float> smoothing{0.05f};     // scheduled without recompiling
  float lr = 3e-3f;                          // host knob: the base learning rate (OneCycle's peak)
  int max_epochs = 5;                        // a run keyword read from a field
  std::int64_t batch_size = 64;

  // all 60000 training images (no valid split held out); the test split measures the run
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 0}); }

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

  // ---- the optimizer ----------------------------------------------------------------------------
  auto optimizer() const { return nitro::optim::adamw({.lambda = 1e-2}); }
  auto schedules() const {
    return nitro::schedule_map{nitro::key<"eta"> = nitro::sched::one_cycle(lr),           // every group, times its ratio
                               nitro::key<"beta1"> = nitro::sched::one_cycle_momentum()};
  }
  auto param_group(auto kp) const {
    if constexpr (TwoGroups && kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
    else return nitro::group<"head">{};
  }
  double learning_rate(nitro::group<"encoder">) const requires TwoGroups { return 0.5 * lr; }  // ratio 0.5
  auto decay_anchor(nitro::group<"encoder">) const requires TwoGroups { return nitro::anchor::w0; }
};
NITRO_EXPERIMENT(FashionMLP, width, smoothing, lr, max_epochs, batch_size);

template <class E>
int run(E e) {
  nitro::Nitro h(e);
  std::printf("%s", h.optimizer().describe().c_str());
  h.train();
  auto test = h.evaluate("test");
  std::printf("test accuracy %.4f  (test loss %.4f)\n", test.at("acc"), test.at("loss"));
  return 0;
}

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::strcmp(argv[1], "--groups") == 0) return run(FashionMLP<256, true>{});
    return run(FashionMLP<256>{});
  } catch (nitro::error const& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
