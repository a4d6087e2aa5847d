// bench/train_nitro.cpp — nitro's side of the side-by-side training benchmark (bench/run.sh).
//
//   train_nitro <model> [--epochs N] [--train-limit N]      model: mlp | wide | cnn
//   train_nitro --list                                     the models this build has
//
// Trains one Fashion-MNIST model with the setting bench/train_torch.py uses for PyTorch — batch 128,
// AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 1e-2), label smoothing 0.05, PyTorch's
// default initialisation, the whole 60000-image train split shuffled each epoch (last partial batch
// dropped) — then prints one JSON line: training samples/s (training loop only, evaluation
// excluded), the FLOPs one training sample costs, the test accuracy and the peak resident memory.
// Threads: NITRO_NUM_THREADS (bench/run.sh sets it, and PyTorch's count, to the same value).
#include <nitro/nitro.hpp>

#include <sys/resource.h>  // getrusage: peak RSS

#include <cstdint>  // int64_t
#include <cstdio>   // printf
#include <cstdlib>  // atoi
#include <string>   // arguments
#include <vector>   // history

namespace bench {

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };

// What every benchmarked experiment declares besides its model: the data, the loss, the metric and
// the run keywords. (Experiments are flat aggregates — every member adapted — so this is a macro.)
#define NITRO_BENCH_COMMON_MEMBERS                                                                             \
  nitro::Device<float> smoothing{0.05f};                                                                      \
  float lr = 1e-3f;                                                                                           \
  int max_epochs = 1;                                                                                         \
  std::int64_t batch_size = 128;                                                                              \
  std::int64_t train_limit = 0;                                                                               \
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 0, .train_limit = train_limit}); }    \
  auto loss(nitro::Tensor const& logits, LossIn const& in) const {                                            \
    return nitro::nn::logitcrossentropy(logits, in.label, smoothing);                                         \
  }                                                                                                           \
  auto metrics(nitro::Tensor const& logits, LossIn const& in) const {                                         \
    return Metrics{.acc = {nitro::nn::correct_count(logits, in.label), double(in.label.batch())}};            \
  }

// MLP 784-W-W-10 (W = 256: the MLP of examples/fashion_mlp.cpp; W = 1024: the wide MLP).
template <int Width>
struct Mlp {
  nitro::GraphConst<int, Width> width;
  NITRO_BENCH_COMMON_MEMBERS
  auto build_model() const {
    constexpr int W = decltype(width)::value;
    return nitro::nn::chain(nitro::nn::dense<784, W>(nitro::nn::relu), nitro::nn::dense<W, W>(nitro::nn::relu), nitro::nn::dense<W, 10>());
  }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  // forward 2*in*out per layer, weight gradient the same, input gradient for all but the first
  static constexpr double flops_per_sample = 2.0 * (784.0 * Width + double(Width) * Width + Width * 10.0) * 3.0 - 2.0 * 784.0 * Width;
};
NITRO_EXPERIMENT(Mlp, width, smoothing, lr, max_epochs, batch_size, train_limit);

}  // namespace bench

#if __has_include("bench_cnn.hpp")
#include "bench_cnn.hpp"  // the CNN of examples/fashion_cnn.cpp, once it exists
#define NITRO_BENCH_HAVE_CNN 1
#else
#define NITRO_BENCH_HAVE_CNN 0
#endif

namespace bench {

template <class E>
int run(char const* model, int epochs, std::int64_t train_limit) {
  E e;
  e.max_epochs = epochs;
  e.train_limit = train_limit;
  nitro::Nitro h(e);
  rusage before{}, after{};
  getrusage(RUSAGE_THREAD, &before);
  std::vector<nitro::epoch_summary> history = h.train(false);
  getrusage(RUSAGE_THREAD, &after);
  auto secs = [](timeval t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  // CPU time of the training thread: on a loaded machine, wall time / this shows the contention
  const double cpu = secs(after.ru_utime) - secs(before.ru_utime) + secs(after.ru_stime) - secs(before.ru_stime);
  double seconds = 0, samples = 0;
  const double per_epoch = double(h.data().split("train").size() / 128 * 128);
  std::string rates;
  for (auto const& s : history) {
    seconds += per_epoch / s.samples_per_second;
    samples += per_epoch;
    rates += (rates.empty() ? "" : ", ") + std::to_string(s.samples_per_second);
  }
  auto test = h.evaluate("test");
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf(
      "{\"framework\": \"nitro\", \"model\": \"%s\", \"threads\": %d, \"epochs\": %d, \"train_samples\": %.0f, "
      "\"seconds\": %.4f, \"main_thread_cpu_s\": %.4f, \"samples_per_s\": %.1f, \"epoch_samples_per_s\": [%s], \"flops_per_sample\": %.0f, "
      "\"test_acc\": %.4f, \"test_loss\": %.4f, \"peak_rss_mb\": %.1f}\n",
      model, nitro::cpu::thread_pool::instance().size(), epochs, samples, seconds, cpu, samples / seconds, rates.c_str(),
      E::flops_per_sample, test.at("acc"), test.at("loss"), double(ru.ru_maxrss) / 1024.0);
  return 0;
}

}  // namespace bench

int main(int argc, char** argv) {
  std::string model = argc > 1 ? argv[1] : "";
  if (model == "--list") {
    std::printf("mlp wide%s\n", NITRO_BENCH_HAVE_CNN ? " cnn" : "");
    return 0;
  }
  int epochs = 1;
  std::int64_t train_limit = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--epochs") epochs = std::atoi(argv[i + 1]);
    else if (flag == "--train-limit") train_limit = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "train_nitro: unknown flag %s (use --epochs N, --train-limit N)\n", flag.c_str());
      return 2;
    }
  }
  try {
    if (model == "mlp") return bench::run<bench::Mlp<256>>("mlp", epochs, train_limit);
    if (model == "wide") return bench::run<bench::Mlp<1024>>("wide", epochs, train_limit);
#if NITRO_BENCH_HAVE_CNN
    if (model == "cnn") return bench::run<bench::Cnn>("cnn", epochs, train_limit);
#endif
    std::fprintf(stderr, "train_nitro: unknown model '%s' (use mlp, wide%s)\n", model.c_str(), NITRO_BENCH_HAVE_CNN ? ", cnn" : "");
    return 2;
  } catch (nitro::error const& err) {
    std::fprintf(stderr, "%s\n", err.what());
    return 1;
  }
}
