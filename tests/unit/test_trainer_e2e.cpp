// train/ through the handle's own train() on Fashion-MNIST: EMA and early stopping end to end,
// divergence (status diverged, the last good checkpoint kept), the loggers writing a run directory,
// logged steps that allocate nothing, cache_stats across handles, metrics through the handle's
// evaluation, and the golden texts of show() and history() for examples/fashion_mlp.cpp.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

// examples/fashion_mlp.cpp's experiment, as the binary has it
#define NITRO_FASHION_MLP_NO_MAIN
#include "../../examples/fashion_mlp.cpp"
#include "../support/nitro_test.hpp"

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc), (nitro::sum_of<nitro::Tensor>, confusion)); };

// The example's experiment (examples/fashion_mlp.cpp), with the trainer's keywords as fields.
template <int Width = 256, bool BlowUp = false>
struct FashionMLP {
  nitro::GraphConst<int, Width> width;
  nitro::Device<float> smoothing{0.05f};
  nitro::Device<float> gain{1.0f};  // scales the logits: set_device(gain, 1e4) makes the loss blow up
  float lr = 1e-3f;
  int max_epochs = 5;
  std::int64_t batch_size = 128;
  double ema = 0.0;                  // run keyword ema, read from a field
  int train_limit = 0;

  auto build_data() const { return nitro::data::fashion_mnist({.train_limit = train_limit, .test_limit = train_limit ? 1000 : 0}); }
  auto build_model() const {
    constexpr int W = decltype(width)::value;
    return nitro::nn::chain(nitro::nn::dense<784, W>(nitro::nn::relu), nitro::nn::dense<W, W>(nitro::nn::relu), nitro::nn::dense<W, 10>());
  }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const {
    auto [y, st2] = model(in.img, ps, st);
    return std::pair{y * float(gain), st2};
  }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label, smoothing); }
  auto metrics(nitro::Tensor const& logits, LossIn const& in) const {
    nitro::Tensor cm = nitro::Tensor::zeros({10, 10});
    for (std::int64_t j = 0; j < logits.batch(); ++j) {
      int p = 0, l = 0;
      for (int i = 1; i < 10; ++i) {
        if (logits(i, j) > logits(p, j)) p = i;
        if (in.label(i, j) > in.label(l, j)) l = i;
      }
      cm(l, p) += 1.0f;
    }
    return Metrics{{nitro::nn::correct_count(logits, in.label), double(in.label.batch())}, {cm}};
  }
  nitro::metric_values finalize_metrics(nitro::metric_values acc, std::string_view) const {
    if (acc.has("acc")) acc.scalars["error"] = 1.0 - acc.at("acc");
    return acc;
  }
  // BlowUp: from step 30 on, the logits are scaled by 1e5 (a Device field the schedule writes): the loss blows up
  auto schedules() const requires BlowUp {
    return nitro::schedule_map{nitro::key<"gain"> = [](std::int64_t) { return [](std::int64_t t) { return t < 30 ? 1.0 : 1e5; }; }};
  }
};
NITRO_EXPERIMENT(FashionMLP, width, smoothing, gain, lr, max_epochs, batch_size, ema, train_limit);

namespace trainer_e2e {

using nitro_test::tmp_dir;

std::vector<std::string> lines_of(fs::path const& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
std::string read_file(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
std::string read_stream(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  return s;
}

}  // namespace trainer_e2e

using namespace trainer_e2e;

// A program's key is the experiment type as the compiler spells it: g++ leaves out template
// arguments equal to their defaults, clang++ writes every one (the sanitizer build is clang's).
static std::string spelled(char const* gcc, [[maybe_unused]] char const* clang) {
#if defined(__clang__)
  return clang;
#else
  return gcc;
#endif
}

TEST_CASE("fashion_mlp with EMA and early stopping, end to end through train(): stopped early, averaged weights evaluated, the run recorded") {
  auto dir = tmp_dir("trainer_e2e/ema_early_stop");
  FashionMLP<64> e;
  e.train_limit = 2000;
  e.batch_size = 64;
  e.lr = 3e-3f;
  e.ema = 0.95;  // from the field
  std::FILE* console = std::tmpfile();
  nitro::Nitro h(e, nitro::check_divergence = false, nitro::max_epochs = 40, nitro::early_stop = 2, nitro::log_every_n_steps = 10,
                 nitro::run_ref = dir.string(),
                 nitro::logger = nitro::loggers(nitro::default_loggers, nitro::console_logger({.stream = console})));
  auto epochs = h.train(false);  // the default loggers without their console: the files, and ours
  const std::string shown = read_stream(console);
  std::fclose(console);
  CHECK(shown.find("stopped after " + std::to_string(h.step()) + " steps") != std::string::npos);
  CHECK(shown.find("valid_ema  acc ") != std::string::npos);
  CHECK(h.status() == nitro::run_status::stopped);
  CHECK(epochs.size() < 40);
  CHECK(epochs.size() >= 3);
  CHECK(h.status_reason().find("early stop: valid.loss did not improve") == 0);
  CHECK(h.monitor().wait() == 2);
  CHECK(h.step() == static_cast<std::int64_t>(epochs.size()) * (2000 / 64));
  CHECK(h.epoch() == static_cast<int>(epochs.size()));

  // the averaged weights were evaluated every epoch, and they are good weights
  auto const& hist = nitro::history(h);
  auto ema_acc = hist.series("valid_ema", "acc");
  auto raw_acc = hist.series("valid", "acc");
  REQUIRE(ema_acc.size() == epochs.size());
  REQUIRE(raw_acc.size() == epochs.size());
  CHECK(ema_acc.back().second > 0.72);
  CHECK(h.ema().updates() == h.step());
  CHECK(hist.series("valid", "error").size() == raw_acc.size());  // finalize_metrics ran on every evaluation
  CHECK(epochs.back().valid.at("acc") == raw_acc.back().second);

  // the run's record: JSONL with metadata first, CSV equal to the history, a TensorBoard file, the binding report
  auto jl = lines_of(dir / "metrics.jsonl");
  REQUIRE(jl.size() > 3);
  auto meta = nlohmann::json::parse(jl[0]);
  CHECK(meta["type"] == "metadata");
  CHECK(meta["experiment"] == spelled("FashionMLP<64>", "FashionMLP<64, false>"));
  CHECK(nlohmann::json::parse(jl.back())["status"] == "stopped");
  CHECK(read_file(dir / "metrics.csv") == hist.to_csv());
  int tb = 0;
  for (auto const& f : fs::directory_iterator(dir)) tb += f.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  CHECK(tb == 1);
  CHECK(read_file(dir / "binding_report.txt") == nitro::show_text(h.description()));
  // a handle trains once: train() again does nothing
  CHECK(h.train(false).empty());
}

TEST_CASE("a loss blow-up ends train() with status diverged; the last good checkpoint is kept; no exception") {
  auto dir = tmp_dir("trainer_e2e/diverged");
  FashionMLP<32, true> e;
  e.train_limit = 2000;  // 40 batches of 50: past the detector's 20-step warm-up
  e.batch_size = 50;
  nitro::Nitro h(e, nitro::max_epochs = 2, nitro::log_every_n_steps = 5, nitro::run_ref = dir.string(), nitro::logger = nitro::no_loggers,
                 nitro::kw::checkpointer = nitro::checkpoint_policy{.every = nitro::every_steps(10), .keep_last = 3});
  auto before = nitro::cache_stats().compiled.size();
  CHECK_NOTHROW(h.train());
  CHECK(h.status() == nitro::run_status::diverged);
  CHECK(h.step() == 30);
  CHECK(h.status_reason().find("at step 30 is more than 100 times its running baseline") != std::string::npos);
  CHECK(float(h.experiment().gain) == 1e5f);  // the schedule wrote the Device field: no new program
  CHECK(nitro::cache_stats().compiled.size() == before);
  auto const* ck = h.checkpoints();
  REQUIRE(ck != nullptr);
  REQUIRE(ck->index().latest());
  CHECK(ck->index().latest()->step == 20);  // step 30 diverged: not saved, nor a final checkpoint
  CHECK(ck->index().entries.size() == 2);
  // outside train(), a step on its own still throws on a NaN loss (E-TRAIN-001)
  FashionMLP<32> plain;  // no schedule writing gain
  plain.train_limit = 2000;
  nitro::Nitro raw(plain, nitro::max_epochs = 1);
  raw.set_device("gain", std::nan(""));
  auto const& split = raw.data().split("train");
  nitro::data::loader<decltype(raw)::batch_type> ld(split, {50, false, true, 1, 0});
  ld.start_epoch(0);
  CHECK_THROWS_WITH_AS(raw.train_step(*ld.next()), doctest::Contains("E-TRAIN-001"), nitro::error);
}

TEST_CASE("cache_stats: the handle enters its program when built; a second one with only a Device value changed enters no new program") {
  FashionMLP<16> a;
  a.train_limit = 500;
  FashionMLP<16> b = a;
  b.smoothing = 0.2f;
  auto key = nitro::program_key<FashionMLP<16>>();
  CHECK(key == spelled("FashionMLP<16>", "FashionMLP<16, false>"));
  const auto before = nitro::cache_stats();
  const auto entered_before = before.entries_of(key);
  const auto programs_before = before.entered.size();
  nitro::Nitro ha(a);
  CHECK(nitro::cache_stats().entries_of(key) == entered_before + 1);
  nitro::Nitro hb(b);
  auto s = nitro::cache_stats();
  CHECK(s.entries_of(key) == entered_before + 2);
  CHECK(s.entered.size() == programs_before + (entered_before == 0 ? 1 : 0));  // the second handle entered no new program
  bool compiled = false;
  for (auto const& c : s.compiled) compiled = compiled || (c.key == key && c.graph_consts == "width=16");
  CHECK(compiled);
  CHECK(s.cache("data.fashion_mnist").hits >= 1);  // the second handle's data came from the process cache
  CHECK(float(hb.experiment().smoothing) == 0.2f);
}

TEST_CASE("metrics through the handle's evaluation: finalized, the split's confusion matrix holds every sample") {
  FashionMLP<16> e;
  e.train_limit = 500;
  nitro::Nitro h(e);
  auto m = h.evaluate("valid");
  REQUIRE(m.has_tensor("confusion"));
  auto const& cm = m.tensor("confusion");
  CHECK(cm.shape() == nitro::shape{10, 10});
  double total = 0, diagonal = 0;
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 10; ++j) {
      total += cm(i, j);
      if (i == j) diagonal += cm(i, j);
    }
  CHECK(total == double(h.data().split("valid").size()));
  CHECK(diagonal / total == doctest::Approx(m.at("acc")));
  CHECK(m.at("error") == doctest::Approx(1.0 - m.at("acc")));  // finalize_metrics ran
  CHECK(m.accumulated_on == nitro::residency::device);
  nitro::Nitro quiet(e, nitro::eval_loss = false);
  CHECK_FALSE(quiet.evaluate("valid").has("loss"));
}

TEST_CASE("diagnostics: the gradient and parameter norms in every logged step, whatever autolog_schedules says") {
  auto dir = tmp_dir("trainer_e2e/diagnostics");
  FashionMLP<32> e;
  e.train_limit = 1600;
  e.batch_size = 32;
  e.ema = 0.9;
  std::FILE* console = std::tmpfile();
  nitro::Nitro h(e, nitro::max_epochs = 2, nitro::log_every_n_steps = 1, nitro::diagnostics = true, nitro::run_ref = dir.string(),
                 nitro::logger = nitro::loggers(nitro::default_loggers, nitro::console_logger({.stream = console})));
  h.train(false);
  std::fclose(console);
  CHECK(h.status() == nitro::run_status::finished);
  CHECK(nitro::history(h).series("train", "grad_norm").size() == 100);
  CHECK(nitro::history(h).series("train", "param_norm").back().second > 0);
  auto jl = lines_of(dir / "metrics.jsonl");
  CHECK(jl[1].find("\"grad_norm\":") != std::string::npos);
  nitro::Nitro plain(e, nitro::max_epochs = 1, nitro::logger = nitro::no_loggers);
  plain.train(false);
  CHECK(nitro::history(plain).series("train", "grad_norm").empty());
}

TEST_CASE("show(): the golden text for fashion_mlp") {
  fashion::FashionMLP<256> e;
  nitro::Nitro h(e);
  std::FILE* out = std::tmpfile();
  nitro::show(h, out);
  const std::string text = read_stream(out);
  std::fclose(out);
  CHECK(text == nitro::show_text(h.description()));
  CHECK(text ==
        "Nitro " + spelled("fashion::FashionMLP<256>", "fashion::FashionMLP<256, false>") + "\n"
        "  program     " + spelled("fashion::FashionMLP<256>", "fashion::FashionMLP<256, false>") + "  [width=256 two_groups=false]\n"
        "  backend     cpu (Eigen), gemm " + nitro::cpu::gemm_kernel_name() + "\n"
        "  model       " + h.model().describe() + "\n"
        "  parameters  269322 in 1 flat buffer, state 0\n"
        "  fields\n"
        "    width              GraphConst  256\n"
        "    two_groups         GraphConst  false\n"
        "    smoothing          Device      0.05\n"
        "    lr                 Host        0.003\n"
        "    max_epochs         Host        5\n"
        "    batch_size         Host        64\n"
        "    log_every_n_steps  Host        200\n"
        "    ema                Host        0\n"
        "    early_stop         Host        0\n"
        "    valid              Host        0\n"
        "    train_limit        Host        0\n"
        "    test_limit         Host        0\n"
        "  run keywords\n"
        "    seed                1                              default\n"
        "    run_dir             runs                           default\n"
        "    n_devs              1                              default\n"
        "    accum               1                              default\n"
        "    max_epochs          5                              field\n"
        "    schedules           eta, beta1                     accessor\n"
        "    gradient_clip_norm  0                              default\n"
        "    check_divergence    true                           default\n"
        "    autolog_schedules   true                           default\n"
        "    log_every_n_steps   200                            field\n"
        "    logger              default (console + run files)  default\n"
        "    checkpointer        framework default              default\n"
        "    early_stop          off                            field\n"
        "    monitor             valid.loss (min)               default\n"
        "    eval_loss           true                           default\n"
        "    ema                 off                            field\n"
        "    batch_size          64                             field\n"
        "    max_steps           0                              default\n"
        "    eval_every          0                              default\n"
        "    diagnostics         false                          default\n"
        "    data                build_data()                   accessor\n"
        "    weights             none                           default\n"
        "    resume              none                           default\n"
        "    run_ref             none                           default\n"
        "    w0                  none                           default\n"
        "    restore_optimizer   true                           default\n"
        "    restore_best        none                           default\n"
        "    eval_weights        none                           default\n"
        "    load_ema            true                           default\n"
        "    device              cpu (Eigen)                    default\n"
        "    replicas            none                           default\n"
        "bindings\n"
        "  data fashion_mnist\n"
        "    split  samples  batches  batch  prefetch\n"
        "    train    60000      937     64  loader thread, 2 ahead, shuffled, full batches; to_device(img, label); host only: idx\n"
        "    test     10000      157     64  loader thread, 2 ahead; to_device(img, label); host only: idx\n"
        "  hooks\n"
        "    forward(img) -> loss(label), metrics(label)\n"
        "    metrics accumulate on device; finalize_metrics runs on host\n"
        "    copies: none (the cpu backend's device memory is host memory: to_device and the metrics' read-back pass views)\n"
        "  gradient_clip_norm  none\n"
        "  schedules\n"
        "    key    source    binds to               curve\n"
        "    eta    accessor  opt: head.eta (x1)     one_cycle(max 0.003, pct_start 0.3, div 25, final_div 10000)\n"
        "    beta1  accessor  opt: head.adamw.beta1  one_cycle_momentum(0.95 -> 0.85 -> 0.95)\n"
        "  parameter groups\n"
        "    group  params     rate  ratio  anchor  decay  rule\n"
        "    head   269322  0.00012      1  zero     0.01  adamw(beta1=0.95, beta2=0.999, eps=1e-08)\n"
        "  optimizer  adamw(beta1=0.95, beta2=0.999, eps=1e-08)\n"
        "    scheduled value  group  lands in\n"
        "    eta              head   eta\n"
        "    beta1            head   adamw.beta1\n");
}

TEST_CASE("history(): the golden table of a short fashion_mlp run") {
  fashion::FashionMLP<128> e;
  e.valid = 200;
  e.train_limit = 1000;
  e.test_limit = 200;
  e.batch_size = 50;
  e.max_epochs = 2;
  e.log_every_n_steps = 10;
  e.ema = 0.9;
  nitro::Nitro h(e, nitro::seed = 5, nitro::logger = nitro::no_loggers);
  nitro::train_options o;
  o.evaluate_after = {"test"};
  h.train(o);
  auto const& t = nitro::history(h);
  CHECK(t.columns() == std::vector<std::string>{"loss", "eta", "beta1", "acc"});
  CHECK(t.size() == 4 + 2 + 2 + 1);  // steps 10..40; valid_ema and valid after each epoch; test at the end
  const std::string text = t.to_text(3);
  MESSAGE(text);
  CHECK(text ==
        "step  epoch  split      loss       eta  beta1    acc\n"
        "  10      1  train      2.22   0.00277  0.858\n"
        "  20      1  train      1.44   0.00244  0.869\n"
        "  20      1  valid_ema  1.49                   0.585\n"
        "  20      1  valid       1.2                   0.615\n"
        "  30      2  train       1.1  0.000849  0.922\n"
        "  40      2  train       1.1   1.2e-08   0.95\n"
        "  40      2  valid_ema  1.06                    0.68\n"
        "  40      2  valid      1.07                   0.695\n"
        "  40      2  test       1.02                   0.705\n");
  // exported to CSV: the same rows, numbers exact
  CHECK(nitro::run_history::from_csv(t.to_csv()).to_text(3) == text);
}
