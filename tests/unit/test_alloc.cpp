// No heap allocation in a training step after the first (DESIGN.md §6): every malloc and every
// operator new of the process is counted while steps run — the step's own work, the loader's
// thread gathering the next batches, Eigen's products.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <vector>

#include "alloc_counter.hpp"

namespace alloc_test {
struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };
struct Mlp {
  nitro::GraphConst<int, 256> width;
  nitro::Device<float> smoothing{0.05f};
  std::int64_t batch_size = 128;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 100, .train_limit = 2560, .test_limit = 100}); }
  auto build_model() const {
    return nitro::nn::chain(nitro::nn::dense<784, 256>(nitro::nn::relu), nitro::nn::dense<256, 256>(nitro::nn::gelu), nitro::nn::dense<256, 10>());
  }
  auto forward(auto const& m, auto const& ps, auto const& st, FwdIn const& in) const { return m(in.img, ps, st); }
  auto loss(nitro::Tensor const& y, LossIn const& in) const { return nitro::nn::logitcrossentropy(y, in.label, smoothing); }
};
NITRO_EXPERIMENT(Mlp, width, smoothing, batch_size);

// every image layer: convolutions (im2col scratch, threaded chunks), pooling, batch_norm (st_new),
// dropout (masks from the step's seed), flatten, layer_norm
struct Cnn {
  nitro::Device<float> smoothing{0.05f};
  std::int64_t batch_size = 64;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 100, .train_limit = 1280, .test_limit = 100}); }
  auto build_model() const {
    namespace nn = nitro::nn;
    return nn::chain(nn::conv2d<1, 8, 3, 1, 1>(nn::relu), nn::max_pool<2>(), nn::batch_norm<8>(),
                     nn::conv2d<8, 16, 3, 2, 1>(nn::gelu), nn::avg_pool<2, 1>(), nn::flatten, nn::dropout(0.3),
                     nn::dense<576, 32>(nn::relu), nn::layer_norm<32>(), nn::dense<32, 10>());
  }
  auto forward(auto const& m, auto const& ps, auto const& st, FwdIn const& in) const { return m(in.img, ps, st); }
  auto loss(nitro::Tensor const& y, LossIn const& in) const { return nitro::nn::logitcrossentropy(y, in.label, smoothing); }
};
NITRO_EXPERIMENT(Cnn, smoothing, batch_size);

// the optimizer program at full stretch: two groups with different rules, a w0 anchor, ASAM's two
// passes, accumulation, global clipping, and schedules writing rule fields and a Device field
struct Tuned {
  nitro::Device<float> smoothing{0.05f};
  std::int64_t batch_size = 64;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 100, .train_limit = 2560, .test_limit = 100}); }
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<784, 64>(nitro::nn::relu), nitro::nn::dense<64, 10>()); }
  auto forward(auto const& m, auto const& ps, auto const& st, FwdIn const& in) const { return m(in.img, ps, st); }
  auto loss(nitro::Tensor const& y, LossIn const& in) const { return nitro::nn::logitcrossentropy(y, in.label, smoothing); }
  auto param_group(auto kp) const {
    if constexpr (kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
    else return nitro::group<"head">{};
  }
  auto optimizer(nitro::group<"encoder">) const { return nitro::optim::asam(nitro::optim::adamw()); }
  auto optimizer(nitro::group<"head">) const { return nitro::optim::sgd({.momentum = 0.9, .nesterov = true}); }
  auto decay_anchor(nitro::group<"encoder">) const { return nitro::anchor::w0; }
  auto schedules() const {
    return nitro::schedule_map{nitro::key<"eta"> = nitro::sched::one_cycle(1e-3), nitro::key<"smoothing"> = nitro::sched::linear(0.0, 0.1)};
  }
};
NITRO_EXPERIMENT(Tuned, smoothing, batch_size);
}  // namespace alloc_test

TEST_CASE("training steps after the first allocate nothing") {
  if (!NITRO_TEST_ALLOC_COUNTING) {
    MESSAGE("skipped: allocation counting is off under AddressSanitizer or ThreadSanitizer, which own malloc");
    return;
  }
  nitro::Nitro h(alloc_test::Mlp{});
  auto const& split = h.data().split("train");
  nitro::data::loader<nitro::data::image_batch> ld(split, {.batch_size = 128, .shuffle = true, .drop_last = true, .prefetch = 2, .seed = 1});
  ld.start_epoch(0);
  long steps = 0;
  while (auto b = ld.next()) {
    if (steps == 2) g_counting = true;  // the first steps size the arena and the tape
    h.train_step(*b);
    ++steps;
  }
  g_counting = false;
  CHECK(steps == 20);
  CHECK(g_allocations.load() == 0);
  // the counter works: an allocation while counting is seen
  g_counting = true;
  void* p = std::malloc(16);
  asm volatile("" : : "g"(p) : "memory");  // keep the compiler from eliding the pair
  g_counting = false;
  std::free(p);
  CHECK(g_allocations.load() == 1);
}

TEST_CASE("training steps of a CNN (conv, pooling, batch_norm, dropout, layer_norm) after the first allocate nothing but a worker's first packing buffers") {
  if (!NITRO_TEST_ALLOC_COUNTING) {
    MESSAGE("skipped: allocation counting is off under AddressSanitizer or ThreadSanitizer, which own malloc");
    return;
  }
  nitro::Nitro h(alloc_test::Cnn{});
  auto const& split = h.data().split("train");
  nitro::data::loader<nitro::data::image_batch> ld(split, {.batch_size = 64, .shuffle = true, .drop_last = true, .prefetch = 2, .seed = 1});
  ld.start_epoch(0);
  auto running_mean = [&] { return nitro::get<"running_mean">(nitro::get<"layer_3">(h.state())).to_vector(); };
  const std::vector<float> before = running_mean();
  g_allocations = 0;
  long steps = 0;
  while (auto b = ld.next()) {
    if (steps == 2) g_counting = true;  // the first steps size the arena, the tape and the products' buffers
    h.train_step(*b);
    ++steps;
  }
  g_counting = false;
  CHECK(steps == 20);
  // Convolutions run their chunks' products on the pool's workers, each packing into its own
  // thread's buffers (tensor/cpu/gemm.hpp, gemm_workspace). A worker sizes them the first time it
  // takes such a chunk — on a loaded machine possibly only after the warm-up steps — for the most
  // any product on one thread packs (cpu/gemm_blocked.inc), so never again, whichever products it
  // meets later: at most two allocations per worker, once per process, whatever the number of steps.
  const long workers = nitro::cpu::thread_pool::instance().size() - 1;
  CHECK(g_allocations.load() <= 2 * workers);
  CHECK(running_mean() != before);  // the steps did run batch_norm in training mode
}

TEST_CASE("optimizer steps (groups, ASAM, accumulation, clipping, schedules) after the first allocate nothing") {
  if (!NITRO_TEST_ALLOC_COUNTING) {
    MESSAGE("skipped: allocation counting is off under AddressSanitizer or ThreadSanitizer, which own malloc");
    return;
  }
  nitro::Nitro h(alloc_test::Tuned{}, nitro::accum = 2, nitro::gradient_clip_norm = 1.0);
  auto const& split = h.data().split("train");
  nitro::data::loader<nitro::data::image_batch> ld(split, {.batch_size = 64, .shuffle = true, .drop_last = true, .prefetch = 2, .seed = 1});
  ld.start_epoch(0);
  g_allocations = 0;
  long batches = 0;
  while (auto b = ld.next()) {
    if (batches == 2) g_counting = true;  // the first optimizer step sizes the arena and the tape
    h.train_step(*b);
    ++batches;
  }
  g_counting = false;
  CHECK(batches == 40);
  CHECK(h.step() == 20);
  CHECK(g_allocations.load() == 0);
  CHECK(float(h.experiment().smoothing) > 0.0f);  // the schedule wrote the Device field
}

// train() itself, with everything a run writes switched on: the default loggers (console, JSONL, CSV,
// TensorBoard) in a run directory, a logged row every third step, an EMA, diagnostics, and a
// checkpointer. A logger notes the process's allocation count after each step; between two steps
// nothing may allocate — logged steps included — except around a step that writes a checkpoint
// or ends an epoch (its evaluation and the next epoch's start), which may, and the first logged
// row (it makes the tables' columns).
namespace alloc_test {
struct step_counter : nitro::run_logger {
  std::shared_ptr<std::vector<long>> seen = std::make_shared<std::vector<long>>();
  void on_setup(nitro::run_info const& info) override { seen->assign(static_cast<std::size_t>(info.total_steps + 1), -1); }
  void on_batch(nitro::step_progress const& p) override {
    if (p.step == 4) { g_allocations = 0; g_counting = true; }  // after the first logged row (step 3) made the tables' columns
    if (p.step < static_cast<std::int64_t>(seen->size())) (*seen)[static_cast<std::size_t>(p.step)] = g_allocations.load();
  }
};
}  // namespace alloc_test

TEST_CASE("train() with loggers, EMA, diagnostics and a checkpointer: a step allocates nothing, logged steps included") {
  if (!NITRO_TEST_ALLOC_COUNTING) {
    MESSAGE("skipped: allocation counting is off under AddressSanitizer or ThreadSanitizer, which own malloc");
    return;
  }
  char const* t = std::getenv("NITRO_TEST_TMP");
  const std::filesystem::path dir = std::filesystem::path(t ? t : "/tmp") / "alloc-train";
  std::filesystem::remove_all(dir);
  alloc_test::step_counter counter;
  std::FILE* console = std::tmpfile();
  nitro::Nitro h(alloc_test::Mlp{}, nitro::max_epochs = 2, nitro::log_every_n_steps = 3, nitro::ema = 0.99, nitro::diagnostics = true,
                 nitro::run_ref = dir.string(),
                 nitro::kw::checkpointer = nitro::checkpoint_policy{.every = nitro::every_steps(7), .keep_last = 2},
                 nitro::logger = nitro::loggers(nitro::default_loggers, nitro::console_logger({.stream = console}), counter));
  h.train(false);
  g_counting = false;
  std::fclose(console);
  CHECK(h.status() == nitro::run_status::finished);
  auto const& seen = *counter.seen;
  REQUIRE(seen.size() == 41);  // 2 epochs of 2560 / 128
  int checked = 0, logged = 0;
  for (std::size_t s = 4; s + 1 < seen.size(); ++s) {
    if (s % 7 == 0 || s % 20 == 0) continue;  // after s: a checkpoint, or the epoch's evaluation
    INFO("between step " << s << " and step " << s + 1);
    CHECK(seen[s + 1] - seen[s] == 0);
    ++checked;
    logged += s % 3 == 0;
  }
  CHECK(checked == 30);
  CHECK(logged == 11);
  CHECK(seen[8] - seen[7] > 0);  // the counter sees a checkpoint being written: the test can tell
  CHECK(std::filesystem::exists(dir / "metrics.csv"));
  CHECK(h.checkpoints()->index().latest()->step == 40);
}
