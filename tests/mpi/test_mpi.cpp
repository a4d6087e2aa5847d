// Data-parallel training over MPI, run by CTest as `mpirun -np 2 --oversubscribe test_mpi` (and with
// one rank). Every rank runs every test case; the collectives inside them meet across the ranks.
//
// The claim of issue 10: each rank trains on its shard of the global batch, the gradients are
// summed over the ranks (one collective per parameter group) and divided by the number of ranks,
// and the parameters after N steps are those of ONE process (the handle's own train_step) with the
// same global batch and seed. Checked on Fashion-MNIST with SGD+Nesterov and with two groups under
// AdamW + OneCycle + global-norm clipping + accum = 2; resumed from rank 0's checkpoint; metrics
// reduced by the pair rules against one process's evaluation of the whole split.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "dist_step.hpp"

#include <nitro/dist.hpp>
#include <nitro/record/checkpoint.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace dist_test {

nitro::dist::communicator* world = nullptr;
nitro::dist::communicator& comm() { return *world; }

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics {
  BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc), (nitro::sum_of<nitro::Tensor>, class_counts), (nitro::sum_of<double>, seen),
                           (nitro::concat_of<nitro::Tensor>, pred));
};

inline auto small_data() { return nitro::data::fashion_mnist({.valid = 256, .train_limit = 1530, .test_limit = 300}); }

// SGD with Nesterov momentum, one group.
struct SgdMlp {
  float lr = 0.05f;
  std::int64_t batch_size = 64;
  auto build_data() const { return small_data(); }
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<784, 32>(nitro::nn::relu), nitro::nn::dense<32, 10>()); }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label); }
  auto optimizer() const { return nitro::optim::sgd({.momentum = 0.9, .nesterov = true}); }
};
NITRO_EXPERIMENT(SgdMlp, lr, batch_size);

// Two groups (the first layer at half the rate, decayed toward w0), AdamW under OneCycle, clipping
// by the global norm, two micro-batches per step.
struct GroupedMlp {
  float lr = 3e-3f;
  std::int64_t batch_size = 32;
  double gradient_clip_norm = 0.5;
  int accum = 2;
  auto build_data() const { return small_data(); }
  auto build_model() const {
    return nitro::nn::chain(nitro::nn::dense<784, 48>(nitro::nn::relu), nitro::nn::dense<48, 24>(nitro::nn::relu), nitro::nn::dense<24, 10>());
  }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label); }
  auto metrics(nitro::Tensor const& logits, LossIn const& in) const {
    Metrics m;
    m.acc = {nitro::nn::correct_count(logits, in.label), double(in.label.batch())};
    nitro::Tensor counts = nitro::Tensor::owned(nitro::shape{10});
    for (std::int64_t j = 0; j < in.label.batch(); ++j)
      for (std::int64_t c = 0; c < 10; ++c) counts[c] += in.label[j * 10 + c];
    m.class_counts = {counts};
    m.seen = {double(in.label.batch())};
    m.pred = {nitro::argmax(logits)};
    return m;
  }
  auto optimizer() const { return nitro::optim::adamw({.lambda = 1e-2}); }
  auto schedules() const { return nitro::schedule_map{nitro::key<"eta"> = nitro::sched::one_cycle(lr)}; }
  auto param_group(auto kp) const {
    if constexpr (kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
    else return nitro::group<"head">{};
  }
  double learning_rate(nitro::group<"encoder">) const { return 0.5 * lr; }
  auto decay_anchor(nitro::group<"encoder">) const { return nitro::anchor::w0; }
};
NITRO_EXPERIMENT(GroupedMlp, lr, batch_size, gradient_clip_norm, accum);

constexpr std::uint64_t seed = 7;

template <class H>
nitro::data::loader_options train_options(H const& h) {
  return {h.batch_size().value, true, true, 2, nitro::fold(h.seed().value, 2)};
}

// One process: the handle's own train_step on global batches, for `steps` optimizer steps.
template <class H>
void train_alone(H& h, std::int64_t steps) {
  nitro::data::loader<typename H::batch_type> ld(h.data().split("train"), train_options(h));
  for (std::uint64_t epoch = 0; h.step() < steps; ++epoch) {
    ld.start_epoch(epoch);
    while (h.step() < steps) {
      auto b = ld.next();
      if (!b) break;
      h.train_step(*b);
    }
  }
}

// This rank: its shard of the same global batches, gradients summed over the ranks. Starts at
// (epoch, batch) and returns where it stopped.
template <class H>
std::pair<std::int64_t, std::int64_t> train_sharded(H& h, std::int64_t steps, std::int64_t epoch = 0, std::int64_t first = 0) {
  nitro::dist::shard_loader<typename H::batch_type> ld(h.data().split("train"), train_options(h), comm().rank(), comm().size());
  dist_stepper<H> stepper(h, comm());
  while (h.step() < steps) {
    ld.start_epoch(static_cast<std::uint64_t>(epoch), first);
    while (h.step() < steps) {
      auto b = ld.next();
      if (!b) break;
      CHECK(nitro::detail::batch_samples(*b) == h.batch_size().value / comm().size());
      stepper.step(*b);
      ++first;
    }
    if (first == ld.batches_per_epoch()) {
      ++epoch;
      first = 0;
    }
  }
  return {epoch, first};
}

template <class H, class G>
double max_abs_diff(H& a, G& b) {
  static_assert(H::param_store_type::size == G::param_store_type::size);
  double d = 0;
  for (std::int64_t i = 0; i < H::param_store_type::size; ++i)
    d = std::max(d, double(std::abs(a.param_buffer().values()[i] - b.param_buffer().values()[i])));
  return d;
}
template <class H>
double max_abs(H& a) {
  double d = 0;
  for (std::int64_t i = 0; i < H::param_store_type::size; ++i) d = std::max(d, double(std::abs(a.param_buffer().values()[i])));
  return d;
}

fs::path shared_dir(std::string const& name) {
  // rank 0's process id names the folder on every rank (the ranks share this host's file system)
  std::int64_t pid = ::getpid();
  nitro::dist::broadcast_value(comm(), pid, "the test folder's name");
  char const* t = std::getenv("NITRO_TEST_TMP");
  fs::path base = t ? fs::path(t) : fs::temp_directory_path() / "nitro-test";
  return base / ("mpi-" + name + "-" + std::to_string(pid));
}

}  // namespace dist_test

using namespace dist_test;

TEST_CASE("the communicator: rank, size, barrier, sums, maximum, broadcast and gather in rank order") {
  auto& c = comm();
  const int r = c.rank(), k = c.size();
  REQUIRE(k >= 1);
  CHECK(r >= 0);
  CHECK(r < k);
  CHECK(c.writes() == (r == 0));  // only rank 0 writes the run directory
  c.barrier("the test's barrier");

  float f[3] = {float(r + 1), 1.0f, float(r) * 0.5f};
  c.sum(f, 3, "a float sum");
  CHECK(f[0] == float(k * (k + 1) / 2));
  CHECK(f[1] == float(k));
  double d[2] = {0.25 * r, 1e-3};
  c.sum(d, 2, "a double sum");
  CHECK(d[0] == doctest::Approx(0.25 * k * (k - 1) / 2));
  CHECK(d[1] == doctest::Approx(1e-3 * k));

  std::int64_t m[2] = {r, -r};
  c.max(m, 2, "a maximum");
  CHECK(m[0] == k - 1);
  CHECK(m[1] == 0);
  const auto s = nitro::dist::spread_of(c, 10 + r, "a spread");
  CHECK(s.min == 10);
  CHECK(s.max == 10 + k - 1);
  CHECK(s.same() == (k == 1));

  std::string text = r == 0 ? "rank 0's choice: runs/latest" : "something else";
  nitro::dist::broadcast_string(c, text, "a string");
  CHECK(text == "rank 0's choice: runs/latest");

  // every rank's bytes, in rank order, of different lengths
  std::string mine(static_cast<std::size_t>(r + 1), char('a' + r));
  std::vector<char> all;
  std::vector<std::size_t> sizes;
  c.gather(mine.data(), mine.size(), all, sizes, "a gather");
  REQUIRE(sizes.size() == static_cast<std::size_t>(k));
  std::string expect;
  for (int q = 0; q < k; ++q) {
    CHECK(sizes[static_cast<std::size_t>(q)] == static_cast<std::size_t>(q + 1));
    expect += std::string(static_cast<std::size_t>(q + 1), char('a' + q));
  }
  CHECK(std::string(all.begin(), all.end()) == expect);

  // several non-blocking sums in flight at once complete in any order
  std::vector<float> a(1000, 1.0f), b(77, float(r));
  auto qa = c.start_sum(a.data(), 1000, "sum a");
  auto qb = c.start_sum(b.data(), 77, "sum b");
  c.wait(qb);
  c.wait(qa);
  CHECK(a[999] == float(k));
  CHECK(b[0] == float(k * (k - 1) / 2));

  nitro::dist::require_same(c, 42, "a constant", "nothing to fix");
  nitro::dist::require_same_run(c, {.seed = 7, .global_batch = 64, .accum = 1, .parameters = 1000, .train_samples = 60000});
  if (k > 1)
    CHECK_THROWS_WITH_AS(nitro::dist::require_same_run(c, {.seed = 7 + std::uint64_t(r), .global_batch = 64}), doctest::Contains("disagree on the seed"),
                         nitro::error);
  if (k > 1) CHECK_THROWS_WITH_AS(nitro::dist::require_same(c, r, "the rank", "expected"), doctest::Contains("E-DIST-007"), nitro::error);
}

TEST_CASE("each rank reads its shard of the same permutation; together they read one process's global batch") {
  auto& c = comm();
  auto data = small_data();
  auto const& split = data.split("train");
  const nitro::data::loader_options o{64, true, true, 2, nitro::fold(seed, 2)};
  nitro::data::loader<nitro::data::image_batch> alone(split, o);
  nitro::dist::shard_loader<nitro::data::image_batch> mine(split, o, c.rank(), c.size());
  CHECK(mine.batches_per_epoch() == alone.batches_per_epoch());
  CHECK(mine.local_batch() == 64 / c.size());
  std::vector<char> all;
  std::vector<std::size_t> sizes;
  for (std::uint64_t epoch : {0u, 3u}) {
    const std::int64_t first = epoch == 3 ? 5 : 0;  // an exact resume starts mid-epoch
    alone.start_epoch(epoch, first);
    mine.start_epoch(epoch, first);
    std::int64_t batches = 0;
    while (auto g = alone.next()) {
      auto s = mine.next();
      REQUIRE(s);
      REQUIRE(s->idx.numel() == 64 / c.size());
      c.gather(s->idx.data(), sizeof(std::int64_t) * static_cast<std::size_t>(s->idx.numel()), all, sizes, "the shards' sample ids");
      REQUIRE(all.size() == sizeof(std::int64_t) * 64);
      CHECK(std::memcmp(all.data(), g->idx.data(), all.size()) == 0);
      // the images are those samples' images, this rank's block of columns
      const auto cols = mine.columns(first + batches);
      CHECK(std::memcmp(s->img.data(), g->img.data() + cols.first * 784, sizeof(float) * 784 * static_cast<std::size_t>(cols.count)) == 0);
      ++batches;
    }
    CHECK_FALSE(mine.next());
    CHECK(batches == alone.batches_per_epoch() - first);
  }
  // the global batch must split evenly (checked without launching 3 ranks)
  CHECK_THROWS_WITH_AS(nitro::dist::shard_loader<nitro::data::image_batch>(split, o, 0, 3), doctest::Contains("E-DIST-001"), nitro::error);
  CHECK(nitro::dist::shard_of(10, 0, 3).count == 3);
  CHECK(nitro::dist::shard_of(10, 2, 3).first == 6);
  CHECK(nitro::dist::shard_of(10, 2, 3).count == 4);
}

TEST_CASE("SGD + Nesterov: the parameters after N sharded steps equal one process's with the same global batch and seed") {
  using H = decltype(nitro::Nitro(SgdMlp{}, nitro::seed = seed));
  H alone(SgdMlp{}, nitro::seed = seed);
  H init(SgdMlp{}, nitro::seed = seed);
  H mine(SgdMlp{}, nitro::seed = seed);
  nitro::dist::require_identical(comm(), mine.param_buffer(), "the initial parameters");
  const std::int64_t steps = 30;  // over an epoch boundary (19 batches of 64 an epoch)
  train_alone(alone, steps);
  train_sharded(mine, steps);
  CHECK(mine.step() == steps);
  nitro::dist::require_identical(comm(), mine.param_buffer(), "the parameters after training");  // every rank holds the same copy
  const double moved = max_abs_diff(alone, init), diff = max_abs_diff(alone, mine);
  MESSAGE("rank " << comm().rank() << " of " << comm().size() << ": max |w_alone - w_sharded| = " << diff << ", training moved weights by up to " << moved);
  CHECK(moved > 1e-2);               // the run trained: the comparison below can fail
  CHECK(diff <= 2e-5 * max_abs(alone));
  // momentum buffers too
  auto a = alone.optimizer().state_tensors(), b = mine.optimizer().state_tensors();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 1; i < a.size(); ++i) {
    auto const& x = std::get<nitro::Tensor>(a[i].value);
    auto const& y = std::get<nitro::Tensor>(b[i].value);
    double dm = 0, am = 0;
    for (std::int64_t j = 0; j < x.numel(); ++j) {
      dm = std::max(dm, double(std::abs(x[j] - y[j])));
      am = std::max(am, double(std::abs(x[j])));
    }
    CHECK(dm <= 2e-5 * am);
  }
}

TEST_CASE("two groups, AdamW + OneCycle, clipping and accum = 2: sharded steps equal one process's") {
  using H = decltype(nitro::Nitro(GroupedMlp{}, nitro::seed = seed));
  static_assert(H::param_store_type::group_count == 2);
  static_assert(nitro::dist::gradient_reducer<H::param_store_type>::collectives_per_step() == 2);  // one per group
  H alone(GroupedMlp{}, nitro::seed = seed);
  H init(GroupedMlp{}, nitro::seed = seed);
  H mine(GroupedMlp{}, nitro::seed = seed);
  const std::int64_t steps = 25;  // 19 steps an epoch (39 batches of 32, accum 2)
  train_alone(alone, steps);
  train_sharded(mine, steps);
  nitro::dist::require_identical(comm(), mine.param_buffer(), "the parameters after training");
  CHECK(alone.optimizer().last_gradient_norm() == doctest::Approx(mine.optimizer().last_gradient_norm()).epsilon(1e-4));
  CHECK(alone.optimizer().last_gradient_norm() > 0.5);  // clipping was active
  const double moved = max_abs_diff(alone, init), diff = max_abs_diff(alone, mine);
  MESSAGE("rank " << comm().rank() << " of " << comm().size() << ": max |w_alone - w_sharded| = " << diff << ", training moved weights by up to " << moved);
  CHECK(moved > 1e-2);
  CHECK(diff <= 1e-4 * max_abs(alone));
}

TEST_CASE("every rank resumes from rank 0's checkpoint: N sharded steps + checkpoint + fresh handles + N == one process's 2N") {
  using H = decltype(nitro::Nitro(SgdMlp{}, nitro::seed = seed));
  auto& c = comm();
  const fs::path dir = shared_dir("resume");
  const std::int64_t n = 12;
  H alone(SgdMlp{}, nitro::seed = seed);
  train_alone(alone, 2 * n);

  std::pair<std::int64_t, std::int64_t> at;
  {
    H first(SgdMlp{}, nitro::seed = seed);
    at = train_sharded(first, n);
    if (c.writes()) {  // only rank 0 writes the checkpoint
      nitro::checkpointer ck(dir / "checkpoints", {});
      nitro::safetensors_writer w;
      nitro::add_store(w, "params.", first.param_buffer());
      nitro::add_named(w, first.optimizer().state_tensors());
      ck.save(w, {.step = first.step(), .epoch = at.first, .batch_in_epoch = at.second, .seed = seed, .batch_size = first.batch_size().value});
    }
  }
  // a fresh handle everywhere; the other ranks' weights and optimizer state are scrambled, which
  // the broadcast must overwrite
  H resumed(SgdMlp{}, nitro::seed = seed);
  if (!c.writes()) {
    for (std::int64_t i = 0; i < H::param_store_type::size; ++i) resumed.param_buffer().values()[i] = float(i % 7) - 3.0f;
    for (auto const& e : resumed.optimizer().state_tensors())
      if (auto const* t = std::get_if<nitro::Tensor>(&e.value))
        for (std::int64_t i = 0; i < t->numel(); ++i) const_cast<float*>(t->data())[i] = 1.0f;
  }
  std::int64_t pos[2] = {0, 0};
  if (c.writes()) {  // rank 0 chooses the checkpoint and reads it; the others never open a file
    auto file = nitro::resolve(nitro::resume_ref(nitro::run_id(dir.string()) >> nitro::latest), {}).load();
    auto info = nitro::read_checkpoint_info(file);
    nitro::load_store(file, "params.", resumed.param_buffer());
    resumed.optimizer().load_state(nitro::read_named(file, resumed.optimizer().state_tensors(), "optim."));
    pos[0] = info.epoch;
    pos[1] = info.batch_in_epoch;
  }
  nitro::dist::broadcast_store(c, resumed.param_buffer(), "the resumed parameters");
  nitro::dist::broadcast_entries(c, resumed.optimizer().state_tensors(), "the resumed optimizer state");
  nitro::dist::broadcast_value(c, pos, "the resume position");  // (the next begin_step derives the step's fields from optim.step)
  CHECK(resumed.step() == n);
  CHECK(pos[0] == at.first);
  CHECK(pos[1] == at.second);
  nitro::dist::require_identical(c, resumed.param_buffer(), "the resumed parameters");
  train_sharded(resumed, 2 * n, pos[0], pos[1]);
  const double diff = max_abs_diff(alone, resumed);
  MESSAGE("rank " << c.rank() << ": after resume, max |w_alone - w_sharded| = " << diff);
  CHECK(diff <= 2e-5 * max_abs(alone));
  c.barrier("the end of the resume test");
  if (c.writes()) fs::remove_all(dir);
}

TEST_CASE("a split's metrics over the ranks' shards follow the pair rules and equal one process's") {
  using H = decltype(nitro::Nitro(GroupedMlp{}, nitro::seed = seed));
  auto& c = comm();
  H h(GroupedMlp{}, nitro::seed = seed);
  train_alone(h, 10);  // the same weights on every rank, no collective needed
  auto const& e = h.experiment();
  auto const& valid = h.data().split("valid");

  // one process, the whole split (the handle's evaluate)
  const nitro::metric_values one = h.evaluate("valid");

  // this rank's block of the split, in the per-rank batch; reduced over the ranks
  auto part = nitro::dist::split_shard(valid, c.rank(), c.size());
  CHECK(part.size() == nitro::dist::shard_of(valid.size(), c.rank(), c.size()).count);
  nitro::dist::metric_totals<Metrics> totals;
  nitro::data::loader<nitro::data::image_batch> ld(part, {h.batch_size().value / c.size(), false, false, 2, 0});
  ld.start_epoch(0);
  nitro::arena memory;
  while (auto b = ld.next()) {
    nitro::step_context ctx{&memory, nullptr, false, 0, 0};
    nitro::context_scope scope(ctx);
    auto ps = h.param_buffer().view();
    auto st = h.state();
    auto&& fwd = nitro::call_hook<nitro::hook::forward>(e, *b, h.model(), ps, st);
    auto const& out = std::get<0>(fwd);
    totals.add_mean("loss", nitro::mean_of(static_cast<double>(nitro::call_hook<nitro::hook::loss>(e, *b, out).item()), 1.0));
    totals.add(nitro::call_hook<nitro::hook::metrics>(e, *b, out));
    memory.reset();
  }
  const nitro::metric_values all = totals.reduce(c);

  // x => n: sums and counts summed, then divided
  CHECK(all.at("acc") == doctest::Approx(one.at("acc")).epsilon(1e-12));
  // => :sum (a number and a tensor): summed
  CHECK(all.at("seen") == doctest::Approx(double(valid.size())));
  CHECK(all.at("seen") == doctest::Approx(one.at("seen")));
  REQUIRE(all.has_tensor("class_counts"));
  auto const& cc = all.tensor("class_counts");
  auto const& cc1 = one.tensor("class_counts");
  REQUIRE(cc.numel() == 10);
  double total = 0;
  for (std::int64_t i = 0; i < 10; ++i) {
    CHECK(cc[i] == cc1[i]);
    total += cc[i];
  }
  CHECK(total == doctest::Approx(double(valid.size())));
  // => :concat: gathered in rank order = the split in order
  auto const& p = all.tensor("pred");
  auto const& p1 = one.tensor("pred");
  REQUIRE(p.shape() == p1.shape());
  CHECK(p.numel() == valid.size());
  CHECK(std::memcmp(p.data(), p1.data(), sizeof(float) * static_cast<std::size_t>(p.numel())) == 0);
  // the loss: the mean over every rank's batches; 256 = 2 x 128 samples, so each rank's batches of 16
  // are halves of one process's batches of 32 and the mean over batches is the same
  CHECK(all.at("loss") == doctest::Approx(one.at("loss")).epsilon(1e-5));
  CHECK(all.batches == static_cast<std::int64_t>(c.size()) * ld.batches_per_epoch());
}

TEST_CASE("the pair rules on known values: x => n, => :sum, => :concat in rank order") {
  struct M {
    BOOST_HANA_DEFINE_STRUCT(M, (nitro::mean_of, m), (nitro::sum_of<double>, s), (nitro::concat_of<nitro::Tensor>, cat));
  };
  auto& c = comm();
  const int r = c.rank(), k = c.size();
  nitro::dist::metric_totals<M> t;
  // rank r adds r + 1 batches; batch j has value r + 1 over a count of 2, and concatenates [r, j]
  for (int j = 0; j <= r; ++j) {
    nitro::Tensor x = nitro::Tensor::owned(nitro::shape{2, 1});
    x[0] = float(r);
    x[1] = float(j);
    t.add(M{{double(r + 1), 2.0}, {1.0}, {x}});
  }
  auto v = t.reduce(c);
  double sum = 0, count = 0;
  std::vector<float> expect;
  for (int q = 0; q < k; ++q)
    for (int j = 0; j <= q; ++j) {
      sum += q + 1;
      count += 2;
      expect.push_back(float(q));
      expect.push_back(float(j));
    }
  CHECK(v.at("m") == doctest::Approx(sum / count));  // not the mean of the ranks' means
  CHECK(v.at("s") == doctest::Approx(count / 2));    // summed, never divided
  auto const& cat = v.tensor("cat");
  CHECK(cat.shape() == nitro::shape{2, static_cast<std::int64_t>(expect.size() / 2)});
  for (std::size_t i = 0; i < expect.size(); ++i) CHECK(cat[static_cast<std::int64_t>(i)] == expect[i]);
  CHECK(v.batches == k * (k + 1) / 2);
}

TEST_CASE("the per-step agreement: every rank sees the global loss and any rank's stop at the same step") {
  auto& c = comm();
  nitro::dist::step_control ctl(c);
  for (int step = 1; step <= 4; ++step) {
    const bool stop = c.rank() == c.size() - 1 && step == 3;
    ctl.start(1.0 + c.rank(), stop);
    ctl.finish();
    CHECK(ctl.loss() == doctest::Approx(1.0 + (c.size() - 1) / 2.0));
    CHECK(ctl.stop() == (step == 3));
  }
  ctl.start(c.rank() == 0 ? std::numeric_limits<double>::quiet_NaN() : 0.5, false);
  ctl.finish();
  CHECK(std::isnan(ctl.loss()));  // divergence on one rank is divergence on every rank
}

TEST_CASE("one process: single_process is the identity and writes") {
  nitro::dist::single_process one;
  CHECK(one.rank() == 0);
  CHECK(one.size() == 1);
  CHECK(one.writes());
  float x[2] = {1.5f, -2.0f};
  one.sum(x, 2, "nothing");
  CHECK(x[0] == 1.5f);
  std::string s = "kept";
  nitro::dist::broadcast_string(one, s, "nothing");
  CHECK(s == "kept");
  using H = decltype(nitro::Nitro(SgdMlp{}, nitro::seed = seed));
  H a(SgdMlp{}, nitro::seed = seed), b(SgdMlp{}, nitro::seed = seed);
  train_alone(a, 5);
  // the stepper over one process is the handle's train_step, bit for bit
  nitro::data::loader<H::batch_type> ld(b.data().split("train"), train_options(b));
  dist_stepper<H> st(b, one);
  ld.start_epoch(0);
  while (b.step() < 5) st.step(*ld.next());
  CHECK(std::memcmp(a.param_buffer().values(), b.param_buffer().values(), sizeof(float) * H::param_store_type::size) == 0);
}

namespace dist_test {
// SGD under SAM: two passes, which data-parallel training refuses (E-DIST-011).
struct SamMlp {
  float lr = 0.05f;
  std::int64_t batch_size = 64;
  auto build_data() const { return small_data(); }
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<784, 8>(nitro::nn::relu), nitro::nn::dense<8, 10>()); }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label); }
  auto optimizer() const { return nitro::optim::sam(nitro::optim::sgd({.momentum = 0.9}), {.rho = 0.05}); }
};
NITRO_EXPERIMENT(SamMlp, lr, batch_size);
}  // namespace dist_test

TEST_CASE("the handle's own train() as a replica of the job equals one process's train(), valid metrics included") {
  constexpr std::int64_t steps = 25;  // over an epoch boundary (19 batches of 64 an epoch), then the valid split
  using H = decltype(nitro::Nitro(SgdMlp{}, nitro::seed = seed, nitro::max_steps = steps));
  H init(SgdMlp{}, nitro::seed = seed, nitro::max_steps = steps);
  using R = decltype(nitro::Nitro(SgdMlp{}, nitro::seed = seed, nitro::max_steps = steps, nitro::kw::replicas = &comm()));
  std::optional<R> replica;
  replica.emplace(SgdMlp{}, nitro::seed = seed, nitro::max_steps = steps, nitro::kw::replicas = &comm());
  CHECK((replica->distributed() != nullptr) == (comm().size() > 1));  // a job of one rank is one process
  CHECK(replica->writes_records() == (comm().rank() == 0));
  replica->train(false);
  H alone(SgdMlp{}, nitro::seed = seed, nitro::max_steps = steps);
  CHECK(alone.distributed() == nullptr);  // built without the replicas fact
  alone.train(false);
  CHECK(replica->step() == steps);
  nitro::dist::require_identical(comm(), replica->param_buffer(), "the parameters after train()");
  const double moved = max_abs_diff(alone, init), diff = max_abs_diff(alone, *replica);
  MESSAGE("rank " << comm().rank() << ": train() under the scope vs alone: max |dw| = " << diff << ", training moved weights by up to " << moved);
  CHECK(moved > 1e-2);
  CHECK(diff <= 2e-5 * max_abs(alone));
  // the run's history: the train loss logged each step is the global batch's, and valid's accuracy is the split's
  const auto la = alone.history().series("train", "loss"), lb = replica->history().series("train", "loss");
  REQUIRE(!la.empty());
  REQUIRE(la.size() == lb.size());
  for (std::size_t i = 0; i < la.size(); ++i) {
    CHECK(lb[i].first == la[i].first);
    CHECK(lb[i].second == doctest::Approx(la[i].second).epsilon(1e-5));
  }
  const auto va = alone.evaluate("valid"), vb = replica->evaluate("valid");  // the same values on every rank
  CHECK(vb.at("loss") == doctest::Approx(va.at("loss")).epsilon(1e-3));     // a mean over batches: the ranks' batches differ
}

TEST_CASE("the handle's sums overlapped with backward equal sums started after backward, bit for bit") {
  // two groups, accum = 2, clipping: the handle's train_step on this rank's shards starts each
  // group's sum during the last micro-batch's backward from its second step on (dist/gradients.hpp);
  // the stepper starts them all after backward. The same sums, so the same bits.
  constexpr std::int64_t steps = 6;
  using H = decltype(nitro::Nitro(GroupedMlp{}, nitro::seed = seed));
  using R = decltype(nitro::Nitro(GroupedMlp{}, nitro::seed = seed, nitro::kw::replicas = &comm()));
  std::optional<R> overlapped;
  overlapped.emplace(GroupedMlp{}, nitro::seed = seed, nitro::kw::replicas = &comm());
  H after(GroupedMlp{}, nitro::seed = seed);
  nitro::dist::shard_loader<H::batch_type> ld(overlapped->data().split("train"), train_options(*overlapped), comm().rank(), comm().size());
  ld.start_epoch(0, 0);
  while (overlapped->step() < steps) overlapped->train_step(*ld.next());
  train_sharded(after, steps);
  REQUIRE(after.step() == steps);
  CHECK(std::memcmp(overlapped->param_buffer().values(), after.param_buffer().values(), sizeof(float) * H::param_store_type::size) == 0);
  nitro::dist::require_identical(comm(), overlapped->param_buffer(), "the parameters after overlapped steps");
}

TEST_CASE("a two-pass optimizer (SAM) in a data-parallel handle is E-DIST-011") {
  if (comm().size() == 1) {
    nitro::Nitro h(SamMlp{}, nitro::kw::replicas = &comm());  // one process: SAM as always
    CHECK(h.distributed() == nullptr);
    return;
  }
  std::string code;
  try {
    nitro::Nitro h(SamMlp{}, nitro::kw::replicas = &comm());
  } catch (nitro::error const& e) {
    code = e.code();
  }
  CHECK(code == "E-DIST-011");
}

int main(int argc, char** argv) {
  nitro::dist::session mpi(argc, argv);
  world = &mpi.world();
  doctest::Context ctx(argc, argv);
  if (mpi.rank() != 0) ctx.setOption("no-version", true);
  int rc = ctx.run();
  // every rank's verdict: a failure on any rank fails the run on all
  std::int64_t failed = rc != 0;
  mpi.world().max(&failed, 1, "the test verdict");
  if (ctx.shouldExit()) return mpi.finish(rc);
  return mpi.finish(failed != 0 ? (rc != 0 ? rc : 1) : 0);
}
