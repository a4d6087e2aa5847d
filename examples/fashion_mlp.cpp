// fashion_mlp — the spec's MnistMLP in C++: two hidden layers of `width` on Fashion-MNIST, with its
// command line (nitro::main): knobs, variants, sweeps and run records.
//
//   ./fashion_mlp run                               5 epochs on all 60000 training images, then the test split
//   ./fashion_mlp run --variant groups              two parameter groups (below)
//   ./fashion_mlp run --set ema=0.999 --set early_stop=2 --set valid=5000
//                                                   an EMA of the weights, early stopping on valid.loss
//   ./fashion_mlp run --variant smoke               one epoch on 2000 images, under runs/
//   ./fashion_mlp variants                          the knobs, variants and sweeps below
//   ./fashion_mlp sweep widths                      width 128 and 256: two programs compiled in
//   ./fashion_mlp sweep seeds --jobs 3              three seeds, three processes
//   ./fashion_mlp explain --variant small           every knob and run keyword with its source
//   ./fashion_mlp eval latest --weights best        a run's best checkpoint on the test split
//   mpirun -np 2 ./fashion_mlp run --variant smoke  data parallel over MPI (built with MPI): batch_size
//                                                   is the global batch, rank 0 writes the record (docs/mpi.md)
//
//   width       GraphConst: compiled in; each value in nitro::main<...> is a program
//   two_groups  GraphConst: the first layer ("encoder") at half the rate, decayed toward its
//               initial weights (anchor w0); the rest ("head") as before
//   smoothing   Device: label smoothing, read by the loss each step
//   the data    Host, built by build_data() after the selection (so it sees the limits)
//
// Trained with AdamW under PyTorch's OneCycleLR curve (the learning rate, and beta1 cycled the other
// way, as OneCycleLR's default cycle_momentum does for Adam).
#include <nitro/main.hpp>

#include <cstdint>

namespace fashion {

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };

template <int Width = 256, bool TwoGroups = false>
struct FashionMLP {
  nitro::GraphConst<int, Width> width;            // compiled in
  nitro::GraphConst<bool, TwoGroups> two_groups;  // compiled in: the groups are the program's
  nitro::Device<float> smoothing{0.05f};          // scheduled without recompiling
  float lr = 3e-3f;                               // the base learning rate (OneCycle's peak)
  int max_epochs = 5;                             // run keywords read from fields ...
  std::int64_t batch_size = 64;
  int log_every_n_steps = 200;
  double ema = 0.0;                               // ... ema = decay (0: off)
  int early_stop = 0;                             // ... early_stop = patience (0: off; needs a valid split)
  std::int64_t valid = 0;                         // training images held out as the valid split
  std::int64_t train_limit = 0;                   // training images kept (0: all)
  std::int64_t test_limit = 0;                    // valid and test images kept (0: all)

  static constexpr auto knobs() {
    return nitro::knobs(nitro::knob<"lr">("peak learning rate (OneCycle)"),
                        nitro::knob<"width">("hidden width; compiled in, one program per value"),
                        nitro::knob<"two_groups">("encoder at half the rate, decayed toward w0; compiled in"),
                        nitro::knob<"smoothing">("label smoothing of the loss"),
                        nitro::knob<"max_epochs">(),  // run keywords: their docs are the keyword table's
                        nitro::knob<"batch_size">(),
                        nitro::knob<"ema">("decay of an average of the weights, evaluated beside them (0: off)"),
                        nitro::knob<"early_stop">("evaluations of valid.loss without improvement before stopping (0: off)"),
                        nitro::knob<"valid">("training images held out as the valid split (0: none)"),
                        nitro::knob<"train_limit">("training images kept (0: all)"),
                        nitro::knob<"test_limit">("valid and test images kept (0: all)"));
  }
  static constexpr auto variants() {
    return nitro::variants(
        nitro::variant<"small">(nitro::set<"width">(128), nitro::set<"lr">(0.002)),
        nitro::variant<"smoke">(nitro::set<"width">(128), nitro::set<"max_epochs">(1), nitro::set<"valid">(500),
                                nitro::set<"train_limit">(2000), nitro::set<"test_limit">(500)),
        nitro::variant<"groups">(nitro::set<"two_groups">(true)));
  }
  static constexpr auto sweeps() {
    return nitro::sweeps(nitro::sweep<"seeds">(nitro::axis<"seed">(1, 2, 3)),
                         nitro::sweep<"widths">(nitro::axis<"width">(128, 256)));
  }

  // A hook, not a member initialiser: it runs after the selection, so it reads the selected limits.
  auto build_data() const {
    return nitro::data::fashion_mnist({.valid = valid, .train_limit = train_limit, .test_limit = test_limit});
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
    return nitro::nn::classification(logits, in.label);  // acc, and the split's confusion matrix (in metrics.jsonl, and `report`'s heatmap)
  }

  // ---- the optimizer ----------------------------------------------------------------------------
  auto optimizer() const { return nitro::optim::adamw({.lambda = 1e-2}); }
  auto schedules() const {
    return nitro::schedule_map{nitro::key<"eta"> = nitro::sched::one_cycle(lr),  // every group, times its ratio
                               nitro::key<"beta1"> = nitro::sched::one_cycle_momentum()};
  }
  auto param_group(auto kp) const {
    if constexpr (TwoGroups && kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
    else return nitro::group<"head">{};
  }
  double learning_rate(nitro::group<"encoder">) const requires TwoGroups { return 0.5 * lr; }  // ratio 0.5
  auto decay_anchor(nitro::group<"encoder">) const requires TwoGroups { return nitro::anchor::w0; }
};
NITRO_EXPERIMENT(FashionMLP, width, two_groups, smoothing, lr, max_epochs, batch_size, log_every_n_steps, ema, early_stop, valid,
                 train_limit, test_limit);

}  // namespace fashion

#ifndef NITRO_FASHION_MLP_NO_MAIN  // tests include this file for its experiment
// One line, also under mpirun: built with MPI (nitro::mpi), `mpirun -np K ./fashion_mlp run` trains data-parallel.
int main(int argc, char** argv) { return nitro::main<fashion::FashionMLP<256>, fashion::FashionMLP<128>, fashion::FashionMLP<256, true>>(argc, argv); }
#endif
