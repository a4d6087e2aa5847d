// train/ with a real handle on Fashion-MNIST: the loop of docs/trainer-integration.md driven from
// outside the handle — EMA and early stopping end to end, divergence through a Device field written
// with set_device, loggers writing a run directory, show() for fashion_mlp, cache_stats across
// handles, metrics through the handle's evaluation.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc), (nitro::sum_of<nitro::Tensor>, confusion)); };

// The example's experiment (examples/fashion_mlp.cpp), with the trainer's keywords as fields.
template <int Width = 256>
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
};
NITRO_EXPERIMENT(FashionMLP, width, smoothing, gain, lr, max_epochs, batch_size, ema, train_limit);

namespace trainer_e2e {

fs::path tmp_dir(std::string const& name) {
  char const* t = std::getenv("NITRO_TEST_TMP");
  fs::path p = fs::path(t ? t : fs::temp_directory_path().string()) / "trainer_e2e" / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

struct run_result {
  nitro::run_status status;
  std::string reason;
  int epochs = 0;
};

// The handle's train() after integration, written against the handle's public API: resolve the
// keywords, make the loggers and the run control, then steps and evaluations, each followed by
// the run control's verdict.
template <class H, class... Kw>
run_result train_with_control(H& h, fs::path run_dir, std::vector<std::string> const& schedule_keys, nitro::run_control*& out,
                              std::unique_ptr<nitro::run_control>& keep, Kw const&... kws) {
  nitro::run_keywords kw(h.experiment(), kws...);
  kw.validate();
  auto const& split = h.data().split("train");
  nitro::data::loader<typename H::batch_type> ld(split, {kw.batch_size.value, true, true, 2, nitro::fold(kw.seed.value, 2)});
  nitro::run_info info;
  info.experiment = nitro::program_key<typename H::experiment_type>();
  auto desc = nitro::describe_handle(h, kw);
  info.binding_report = nitro::show_text(desc);
  info.metadata_json = R"({"selection": {"variant": null, "set": {}}})";
  info.dir = run_dir;
  info.steps_per_epoch = ld.batches_per_epoch();
  info.max_epochs = kw.max_epochs.value;
  info.total_steps = info.steps_per_epoch * info.max_epochs;
  info.batch_size = kw.batch_size.value;
  auto loggers = nitro::with_default_loggers(nitro::to_logger_set(kw.logger.value), info);
  keep = std::make_unique<nitro::run_control>(nitro::run_control_options_from(kw), loggers);
  nitro::run_control& rc = *keep;
  out = &rc;
  std::vector<std::size_t> slots;
  for (auto const& k : schedule_keys) slots.push_back(rc.schedules().declare(k));
  float* params = h.param_buffer().values();
  constexpr std::int64_t n = H::param_store_type::size;
  rc.begin(info, params, n);
  run_result r;
  for (int epoch = 1; epoch <= kw.max_epochs.value && !rc.should_stop(); ++epoch) {
    ld.start_epoch(static_cast<std::uint64_t>(epoch - 1));
    std::int64_t batch = 0;
    while (auto b = ld.next()) {
      for (std::size_t i = 0; i < slots.size(); ++i) rc.schedules().set(slots[i], h.learning_rate() * (i + 1));
      const double loss = h.train_step(*b);
      ++batch;
      if (!rc.after_step(h.step(), epoch, batch, loss, params, nitro::detail::batch_samples(*b))) break;
    }
    r.epochs = epoch;
    if (rc.should_stop()) break;
    auto valid = nitro::finalize_metrics(h.experiment(), h.evaluate("valid"), "valid");
    if (rc.ema().enabled()) {
      nitro::metric_values ema_valid;
      {
        nitro::ema_scope with_average(rc.ema(), params);
        ema_valid = nitro::finalize_metrics(h.experiment(), h.evaluate("valid"), "valid");
      }
      rc.after_eval(h.step(), epoch, "valid_ema", ema_valid);
    }
    if (!rc.after_eval(h.step(), epoch, "valid", valid)) break;
  }
  rc.end();
  r.status = rc.status();
  r.reason = rc.reason();
  return r;
}

std::vector<std::string> lines_of(fs::path const& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace trainer_e2e

using namespace trainer_e2e;

TEST_CASE("fashion_mlp with EMA and early stopping, end to end: stopped early, averaged weights evaluated, the run recorded") {
  auto dir = tmp_dir("ema_early_stop");
  FashionMLP<64> e;
  e.train_limit = 2000;
  e.batch_size = 64;
  e.lr = 3e-3f;
  e.ema = 0.95;  // from the field
  nitro::Nitro h(e, nitro::check_divergence = false, nitro::max_epochs = 40);
  nitro::run_control* rc = nullptr;
  std::unique_ptr<nitro::run_control> keep;
  std::FILE* console = std::tmpfile();
  auto r = train_with_control(h, dir, {"eta"}, rc, keep, nitro::max_epochs = 40, nitro::early_stop = 2, nitro::log_every_n_steps = 10,
                              nitro::logger = nitro::loggers(nitro::jsonl_logger(), nitro::csv_logger(), nitro::tensorboard_logger(),
                                                             nitro::console_logger({.stream = console})));
  std::fflush(console);
  std::rewind(console);
  std::string shown;
  for (int c; (c = std::fgetc(console)) != EOF;) shown += static_cast<char>(c);
  std::fclose(console);
  CHECK(shown.find("stopped after " + std::to_string(h.step()) + " steps") != std::string::npos);
  CHECK(shown.find("valid_ema  acc ") != std::string::npos);
  CHECK(r.status == nitro::run_status::stopped);
  CHECK(r.epochs < 40);
  CHECK(r.epochs >= 3);
  CHECK(r.reason.find("early stop: valid.loss did not improve") == 0);
  CHECK(rc->monitor().wait() == 2);

  // the averaged weights were evaluated every epoch, and they are good weights
  auto const& hist = rc->history();
  auto ema_acc = hist.series("valid_ema", "acc");
  auto raw_acc = hist.series("valid", "acc");
  REQUIRE(ema_acc.size() == static_cast<std::size_t>(r.epochs));
  REQUIRE(raw_acc.size() == static_cast<std::size_t>(r.epochs));
  CHECK(ema_acc.back().second > 0.72);
  CHECK(rc->ema().updates() == h.step());
  CHECK(hist.series("valid", "error").size() == raw_acc.size());  // finalize_metrics ran on every evaluation
  CHECK(hist.series("train", "eta").front().second == doctest::Approx(h.learning_rate()));  // autolog_schedules

  // the run's record: JSONL with metadata first, CSV equal to the history, a TensorBoard file
  auto jl = lines_of(dir / "metrics.jsonl");
  REQUIRE(jl.size() > 3);
  auto meta = nlohmann::json::parse(jl[0]);
  CHECK(meta["type"] == "metadata");
  CHECK(meta["experiment"] == "FashionMLP<64>");
  CHECK(meta.contains("selection"));
  CHECK(nlohmann::json::parse(jl.back())["status"] == "stopped");
  std::ifstream csv(dir / "metrics.csv");
  std::string csv_text((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
  CHECK(csv_text == hist.to_csv());
  int tb = 0;
  for (auto const& f : fs::directory_iterator(dir)) tb += f.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  CHECK(tb == 1);
}

TEST_CASE("a loss blow-up stops the run with status diverged; set_device reaches the next step, no new program") {
  FashionMLP<32> e;
  e.train_limit = 2000;  // 40 batches of 50: past the detector's 20-step warm-up
  e.batch_size = 50;
  nitro::Nitro h(e, nitro::check_divergence = false);
  auto before = nitro::cache_stats().compiled.size();
  nitro::run_keywords kw(h.experiment(), nitro::log_every_n_steps = 5);
  nitro::run_control rc(nitro::run_control_options_from(kw), nitro::loggers(nitro::no_loggers));
  nitro::run_info info;
  info.steps_per_epoch = 40;
  info.max_epochs = 1;
  info.total_steps = 40;
  rc.begin(info, h.param_buffer().values(), decltype(h)::param_store_type::size);
  nitro::data::loader<decltype(h)::batch_type> ld(h.data().split("train"), {50, true, true, 2, 7});
  ld.start_epoch(0);
  std::int64_t step = 0;
  bool went_on = true;
  while (auto b = ld.next()) {
    ++step;
    if (step == 30) h.set_device("gain", 1e5);  // between steps: the next step's forward reads it
    double loss = h.train_step(*b);
    went_on = rc.after_step(h.step(), 1, step, loss, h.param_buffer().values(), 50);
    if (!went_on) break;
  }
  CHECK_FALSE(went_on);
  CHECK(step == 30);
  CHECK(rc.status() == nitro::run_status::diverged);
  CHECK(rc.reason().find("at step 30 is more than 100 times its running baseline") != std::string::npos);
  CHECK(float(h.experiment().gain) == 1e5f);
  CHECK(nitro::cache_stats().compiled.size() == before);
}

TEST_CASE("cache_stats: a second handle with only a Device value changed enters no new program") {
  FashionMLP<16> a;
  a.train_limit = 500;
  FashionMLP<16> b = a;
  b.smoothing = 0.2f;
  auto key = nitro::program_key<FashionMLP<16>>();
  CHECK(key == "FashionMLP<16>");
  const auto entered_before = nitro::cache_stats().entries_of(key);
  nitro::Nitro ha(a);
  const bool first = nitro::enter_program<FashionMLP<16>, decltype(ha)>();  // the handle's constructor line
  nitro::Nitro hb(b);
  const bool second = nitro::enter_program<FashionMLP<16>, decltype(hb)>();
  CHECK(first == (entered_before == 0));
  CHECK_FALSE(second);
  auto s = nitro::cache_stats();
  CHECK(s.entries_of(key) == entered_before + 2);
  bool compiled = false;
  for (auto const& c : s.compiled) compiled = compiled || (c.key == key && c.graph_consts == "width=16");
  CHECK(compiled);
  CHECK(float(hb.experiment().smoothing) == 0.2f);
}

TEST_CASE("metrics through the handle's evaluation: the split's confusion matrix holds every sample") {
  FashionMLP<16> e;
  e.train_limit = 500;
  nitro::Nitro h(e);
  auto m = nitro::finalize_metrics(h.experiment(), h.evaluate("valid"), "valid");
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
  CHECK(m.at("error") == doctest::Approx(1.0 - m.at("acc")));
  CHECK(m.accumulated_on == nitro::residency::device);
}

TEST_CASE("show(): the golden text for fashion_mlp") {
  nitro::Nitro h(FashionMLP<256>{});
  nitro::run_keywords kw(h.experiment());
  auto d = nitro::describe_handle(h, kw);
  // what the optimizer room fills; today's handle trains one group with AdamW
  d.groups = {{"default", decltype(h)::param_store_type::count, h.learning_rate(), 1.0, "zero", 0.01, "adamw(beta1=0.9, beta2=0.999, eps=1e-08)"}};
  d.optimizer = "adamw";
  const std::string text = nitro::show_text(d);
  CHECK(text ==
        "Nitro FashionMLP<256>\n"
        "  program     FashionMLP<256>  [width=256]\n"
        "  backend     cpu (Eigen)\n"
        "  model       " + h.model().describe() + "\n"
        "  parameters  269322 in 1 flat buffer, state 0\n"
        "  fields\n"
        "    width        GraphConst  256\n"
        "    smoothing    Device      0.05\n"
        "    gain         Device      1\n"
        "    lr           Host        0.001\n"
        "    max_epochs   Host        5\n"
        "    batch_size   Host        128\n"
        "    ema          Host        0\n"
        "    train_limit  Host        0\n"
        "  run keywords\n"
        "    seed                1                              default\n"
        "    run_dir             runs                           default\n"
        "    n_devs              1                              default\n"
        "    accum               1                              default\n"
        "    max_epochs          5                              field\n"
        "    schedules           framework default              default\n"
        "    gradient_clip_norm  0                              default\n"
        "    check_divergence    true                           default\n"
        "    autolog_schedules   true                           default\n"
        "    log_every_n_steps   50                             default\n"
        "    logger              default (console + run files)  default\n"
        "    checkpointer        framework default              default\n"
        "    early_stop          off                            default\n"
        "    monitor             valid.loss (min)               default\n"
        "    eval_loss           true                           default\n"
        "    ema                 off                            field\n"
        "    batch_size          128                            field\n"
        "    data                build_data()                   accessor\n"
        "    weights             none                           default\n"
        "    resume              none                           default\n"
        "    run_ref             none                           default\n"
        "    w0                  none                           default\n"
        "    restore_optimizer   true                           default\n"
        "    restore_best        none                           default\n"
        "    eval_weights        none                           default\n"
        "    load_ema            true                           default\n"
        "bindings\n"
        "  data fashion_mnist\n"
        "    split  samples  batches  batch  prefetch\n"
        "    train    55000      429    128  loader thread, 2 ahead, shuffled, full batches; to_device(img, label); host only: idx\n"
        "    valid     5000       40    128  loader thread, 2 ahead; to_device(img, label); host only: idx\n"
        "    test     10000       79    128  loader thread, 2 ahead; to_device(img, label); host only: idx\n"
        "  hooks\n"
        "    forward(img) -> loss(label), metrics(label)\n"
        "    metrics accumulate on device; finalize_metrics runs on host\n"
        "  gradient_clip_norm  none\n"
        "  schedules  none\n"
        "  parameter groups\n"
        "    group    params   rate  ratio  anchor  decay  rule\n"
        "    default  269322  0.001      1  zero     0.01  adamw(beta1=0.9, beta2=0.999, eps=1e-08)\n"
        "  optimizer  adamw\n");
}
