// The gradient all-reduce overlapped with the backward pass (issue 10): tensor/tape.hpp's observer
// and dist/gradients.hpp's schedule, without MPI. A fake dist::replicas of two ranks (one process;
// every collective leaves the data as it is) records each start_sum, and what backward had done
// when it came: the handle of a 3-layer MLP (two parameter groups) given as the replicas of a job (nitro::kw::replicas = &rr)
// starts the head's sum before the first layer's backward node runs, from the second step on; a
// wrong schedule is E-DIST-013 before any gradient is written; the first of two micro-batches
// starts nothing; the observer costs nothing per step after the first.
#include <nitro/nitro.hpp>
#include <nitro/dist/gradients.hpp>
#include <nitro/dist/replicas.hpp>

#include <doctest/doctest.h>

#include <algorithm>  // all_of
#include <atomic>     // allocation counter
#include <cstddef>    // size_t
#include <cstdlib>    // setenv
#include <cstring>    // memcmp
#include <string>
#include <vector>

// ---- counting allocations (the observer allocates nothing per step), as test_alloc.cpp ----------
#include "alloc_counter.hpp"

namespace overlap_test {

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };

// Three dense layers; the first is group "encoder" (group 0), the other two "head" (group 1).
struct Mlp3 {
  float lr = 0.05f;
  std::int64_t batch_size = 32;
  int accum = 1;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 0, .train_limit = 256, .test_limit = 32}); }
  auto build_model() const {
    return nitro::nn::chain(nitro::nn::dense<784, 24>(nitro::nn::relu), nitro::nn::dense<24, 16>(nitro::nn::relu), nitro::nn::dense<16, 10>());
  }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label); }
  auto optimizer() const { return nitro::optim::sgd({.momentum = 0.9}); }
  auto param_group(auto kp) const {
    if constexpr (kp.view().starts_with("layer_1")) return nitro::group<"encoder">{};
    else return nitro::group<"head">{};
  }
};
NITRO_EXPERIMENT(Mlp3, lr, batch_size, accum);

// Two ranks in one process: each sum leaves the data as it is; start_sum runs `on_start` first.
struct recording_replicas final : nitro::dist::replicas {
  struct started {
    float const* data;
    std::int64_t n;
  };
  std::vector<started> starts;
  std::vector<float const*> waits_for;
  std::vector<request> open;
  void (*on_start)(void* ctx, float const* data, std::int64_t n) = nullptr;
  void* ctx = nullptr;

  recording_replicas() {
    starts.reserve(64);
    waits_for.reserve(64);
    open.reserve(64);
  }
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 2; }
  request start_sum(float* data, std::int64_t n, std::string_view) override {
    if (on_start) on_start(ctx, data, n);
    starts.push_back({data, n});
    open.push_back(static_cast<request>(starts.size()) - 1);
    return open.back();
  }
  request start_sum(double*, std::int64_t, std::string_view) override { return -1; }
  void wait(request r) override {
    if (r >= 0) waits_for.push_back(starts[static_cast<std::size_t>(r)].data);
  }
  void wait_all() override {}
  void reserve_requests(std::size_t) override {}
  int progress_calls = 0;
  std::size_t starts_at_first_progress = 0;  // of the calls since the counter was last zero
  void progress() noexcept override {
    if (progress_calls++ == 0) starts_at_first_progress = starts.size();
  }
  void max(std::int64_t*, std::int64_t, std::string_view) override {}
  void broadcast(void*, std::size_t, std::string_view) override {}
  void gather(void const* mine, std::size_t bytes, std::vector<char>& all, std::vector<std::size_t>& sizes, std::string_view) override {
    all.assign(static_cast<char const*>(mine), static_cast<char const*>(mine) + bytes);
    sizes.assign(1, bytes);
  }
  void barrier(std::string_view) override {}
};

template <class H>
nitro::data::loader<typename H::batch_type> train_loader(H& h) {
  return nitro::data::loader<typename H::batch_type>(h.data().split("train"), {h.batch_size().value, false, true, 2, 1});
}

template <class Store>
bool all_zero(Store const& s, std::size_t g) {
  auto const span = Store::groups[g];
  float const* p = s.grads() + span.offset;
  return std::all_of(p, p + span.size, [](float v) { return v == 0.0f; });
}

}  // namespace overlap_test

using namespace overlap_test;

TEST_CASE("the tape's observer: the node count, each node after it ran, and the leaf gradients each node asks for") {
  nitro::arena memory;
  nitro::tape t(memory);
  float g[4] = {0, 0, 0, 0};
  const int a = t.leaf(g, 2 * sizeof(float)), b = t.leaf(g + 2, 2 * sizeof(float));
  const int out = t.new_var(sizeof(float));
  struct log_t {
    std::vector<std::string> events;
  } log;
  log.events.reserve(32);
  auto* lp = &log;
  t.record([=](nitro::tape& tp) { tp.grad<float>(a)[0] += 1; lp->events.push_back("node 0 ran"); });  // the first layer
  t.record([=](nitro::tape& tp) { tp.grad<float>(b)[0] += 1; lp->events.push_back("node 1 ran"); });  // the last layer
  const std::uint64_t fp = t.fingerprint();
  nitro::tape::observer o;
  o.ctx = lp;
  o.backward_begins = [](void* c, std::size_t n) { static_cast<log_t*>(c)->events.push_back("begins " + std::to_string(n)); };
  o.after_node = [](void* c, std::size_t i) { static_cast<log_t*>(c)->events.push_back("after " + std::to_string(i)); };
  o.leaf_gradient = [](void* c, std::size_t i, void const*, std::size_t bytes) {
    static_cast<log_t*>(c)->events.push_back("leaf by " + (i == nitro::tape::no_node ? std::string("none") : std::to_string(i)) + " " + std::to_string(bytes));
  };
  {
    nitro::tape::observe_scope watch(t, &o);
    CHECK(t.observed_by() == &o);
    t.grad<float>(a);  // outside backward: no node asks
    t.backward<float>(out, 1.0f);
  }
  CHECK(t.observed_by() == nullptr);
  const std::vector<std::string> expect = {"leaf by none 8", "begins 2", "leaf by 1 8", "node 1 ran", "after 1", "leaf by 0 8", "node 0 ran", "after 0"};
  CHECK(log.events == expect);
  CHECK(g[0] == 1.0f);
  CHECK(g[2] == 1.0f);
  // unobserved: the same nodes, no event
  log.events.clear();
  t.backward<float>(out, 1.0f);
  CHECK(log.events == std::vector<std::string>{"node 1 ran", "node 0 ran"});
  // the fingerprint: the same operations in the same order are the same; one more node is not
  CHECK(t.fingerprint() == fp);
  t.record([=](nitro::tape& tp) { tp.grad<float>(a)[1] += 1; });
  CHECK(t.fingerprint() != fp);
}

TEST_CASE("data parallel: from the second step, the head's sum starts before the first layer's backward node runs") {
  recording_replicas rr;
  nitro::Nitro h(Mlp3{}, nitro::seed = 5, nitro::kw::replicas = &rr);
  using H = decltype(h);
  using Store = H::param_store_type;
  static_assert(Store::group_count == 2);
  REQUIRE(h.distributed() == &rr);
  // each start: is the encoder's gradient still all zero (its backward node has not run)?
  struct probe_t {
    Store* store;
    std::vector<std::pair<std::size_t, bool>> seen;  // (group, encoder gradient untouched)
  } probe{&h.param_buffer(), {}};
  probe.seen.reserve(64);
  rr.ctx = &probe;
  rr.on_start = [](void* c, float const* data, std::int64_t) {
    auto& p = *static_cast<probe_t*>(c);
    const std::size_t g = data == p.store->grads() + Store::groups[0].offset ? 0 : 1;
    p.seen.push_back({g, all_zero(*p.store, 0)});
  };
  auto ld = train_loader(h);
  ld.start_epoch(0);
  // step 1 learns the schedule: both sums start after backward, the head first
  h.train_step(*ld.next());
  REQUIRE(probe.seen.size() == 2);
  CHECK(probe.seen[0].first == 1);
  CHECK(probe.seen[0].second == false);  // backward had finished
  CHECK(probe.seen[1].first == 0);
  CHECK(rr.progress_calls == 0);  // nothing was in flight during step 1's backward
  // steps 2..4: the head's sum starts while the encoder's gradient is still untouched
  for (int s = 2; s <= 4; ++s) {
    probe.seen.clear();
    rr.progress_calls = 0;
    const std::size_t starts_before = rr.starts.size();
    h.train_step(*ld.next());
    // MPI was given the chance to move the head's sum on during the rest of backward: the first
    // progress call came after the head's start and before the encoder's
    CHECK(rr.progress_calls > 0);
    CHECK(rr.starts_at_first_progress == starts_before + 1);
    REQUIRE(probe.seen.size() == 2);
    CHECK(probe.seen[0].first == 1);
    CHECK(probe.seen[0].second == true);
    CHECK(probe.seen[1].first == 0);
    CHECK(probe.seen[1].second == false);
  }
  // every started sum was waited for, once
  CHECK(rr.waits_for.size() == rr.starts.size());
  CHECK(h.step() == 4);

  // bit for bit: the same steps on a handle whose sums all start after backward (the handle's
  // train_step by hand, no observer). The fake sums leave the data as it is: both scale by 1/2.
  recording_replicas plain;
  nitro::Nitro ref(Mlp3{}, nitro::seed = 5);
  auto ld2 = train_loader(ref);
  ld2.start_epoch(0);
  nitro::dist::gradient_reducer<Store> red(plain, ref.param_buffer());
  nitro::arena mem;
  nitro::tape tp(mem);
  auto& e = const_cast<Mlp3&>(ref.experiment());
  for (int s = 0; s < 4; ++s) {
    auto b = *ld2.next();
    ref.optimizer().begin_step(e);
    ref.param_buffer().zero_grads();
    nitro::step_context ctx{&mem, &tp, true, nitro::fold(nitro::fold(ref.seed().value, 3), static_cast<std::uint64_t>(s)), 0};
    nitro::context_scope scope(ctx);
    auto ps = ref.param_buffer().view(tp);
    auto st = ref.state();
    auto&& fwd = nitro::call_hook<nitro::hook::forward>(std::as_const(e), b, ref.model(), ps, st);
    auto loss = nitro::call_hook<nitro::hook::loss>(std::as_const(e), b, std::get<0>(fwd));
    tp.backward<float>(loss.var(), 1.0f);
    tp.clear();
    mem.reset();
    const float k = red.finish();
    CHECK(k == 0.5f);
    ref.optimizer().update(k);
  }
  CHECK(plain.starts.size() == 8);
  CHECK(std::memcmp(h.param_buffer().values(), ref.param_buffer().values(), sizeof(float) * Store::size) == 0);
}

TEST_CASE("data parallel: a wrong schedule is E-DIST-013, thrown before the node writes") {
  // a hand-built tape over the handle's parameter buffer: node 2 writes the head, node 1 writes the
  // encoder, and node 1 also writes the head when `late` says so (the same operations, so the same
  // fingerprint and node count: the schedule learned without it does not hold)
  recording_replicas rr;
  nitro::Nitro h(Mlp3{}, nitro::seed = 5);
  using Store = decltype(h)::param_store_type;
  nitro::dist::gradient_reducer<Store> red(rr, h.param_buffer());
  nitro::arena mem;
  nitro::tape t(mem);
  bool late = false;
  auto run = [&](bool late_now) {
    late = late_now;
    auto ps = h.param_buffer().view(t);
    // the first trainable leaf of each group: its variable and offset
    int enc = -1, head = -1;
    std::size_t i = 0;
    nitro::for_each_leaf(ps, [&](auto, nitro::Tensor const& leaf) {
      const auto& li = Store::leaves[i++];
      if (li.offset >= Store::groups[1].offset && head < 0) head = leaf.var();
      if (li.offset < Store::groups[1].offset && enc < 0) enc = leaf.var();
    });
    REQUIRE(enc >= 0);
    REQUIRE(head >= 0);
    const int out = t.new_var(sizeof(float));
    bool const* lp = &late;
    t.record([=](nitro::tape&) {});                                                              // node 0: touches nothing
    t.record([=](nitro::tape& tp) { tp.grad<float>(enc)[0] += 1; if (*lp) tp.grad<float>(head)[0] += 1; });  // node 1
    t.record([=](nitro::tape& tp) { tp.grad<float>(head)[0] += 1; });                                  // node 2
    nitro::tape::observe_scope watch(t, red.overlap(t));
    t.backward<float>(out, 1.0f);
  };
  h.param_buffer().zero_grads();
  run(false);  // learns: head complete after node 2, encoder after node 1
  t.clear();
  CHECK(red.finish() == 0.5f);
  CHECK(red.schedules_learned() == 1);
  CHECK(red.complete_after(1) == 2);
  CHECK(red.complete_after(0) == 1);
  CHECK(rr.starts.size() == 2);

  h.param_buffer().zero_grads();
  run(false);  // overlaps: the head's sum starts right after node 2
  t.clear();
  CHECK(red.overlapped());
  red.finish();
  CHECK(rr.starts.size() == 4);

  h.param_buffer().zero_grads();
  std::string code, message;
  try {
    run(true);
  } catch (nitro::error const& e) {
    code = e.code();
    message = e.what();
  }
  t.clear();
  CHECK(code == "E-DIST-013");
  CHECK(message.find("backward node 1 (of 3)") != std::string::npos);
  CHECK(message.find("group 'head'") != std::string::npos);
  // the head's gradient holds node 2's write only: node 1 was stopped before writing into it
  float const* head = h.param_buffer().grads() + Store::groups[1].offset;
  CHECK(head[0] == 1.0f);
  // the next step waits for the abandoned sum first and runs as before
  h.param_buffer().zero_grads();
  run(false);
  t.clear();
  CHECK(red.overlapped());
  red.finish();
}

TEST_CASE("data parallel: a leaf gradient handed out outside backward's nodes turns the overlap off for that step") {
  recording_replicas rr;
  nitro::Nitro h(Mlp3{}, nitro::seed = 5);
  using Store = decltype(h)::param_store_type;
  nitro::dist::gradient_reducer<Store> red(rr, h.param_buffer());
  nitro::arena mem;
  nitro::tape t(mem);
  auto run = [&](bool keep_pointer) {
    nitro::tape::observe_scope watch(t, red.overlap(t));
    auto ps = h.param_buffer().view(t);
    int head = -1;
    std::size_t i = 0;
    nitro::for_each_leaf(ps, [&](auto, nitro::Tensor const& leaf) {
      if (Store::leaves[i++].offset >= Store::groups[1].offset && head < 0) head = leaf.var();
    });
    float* kept = keep_pointer ? t.grad<float>(head) : nullptr;  // taken in "forward": no node asks
    const int out = t.new_var(sizeof(float));
    t.record([=](nitro::tape&) { if (kept) kept[1] += 1; });  // node 0: writes the head only through the kept pointer
    t.record([=](nitro::tape& tp) { tp.grad<float>(head)[0] += 1; });
    t.backward<float>(out, 1.0f);
  };
  run(false);
  t.clear();
  red.finish();
  run(false);
  t.clear();
  CHECK(red.overlapped());
  red.finish();
  const std::size_t before = rr.starts.size();
  run(true);
  t.clear();
  CHECK_FALSE(red.overlapped());  // the schedule says "the head after node 1", but node 0 writes through the kept pointer
  CHECK(rr.starts.size() == before);  // nothing started during that backward
  red.finish();
  CHECK(rr.starts.size() == before + 2);
}

TEST_CASE("data parallel: with accum = 2 the first micro-batch starts nothing, the second overlaps") {
  recording_replicas rr;
  Mlp3 e;
  e.accum = 2;
  nitro::Nitro h(e, nitro::seed = 5, nitro::kw::replicas = &rr);
  using Store = decltype(h)::param_store_type;
  struct probe_t {
    Store* store;
    std::vector<bool> encoder_untouched_since_micro;  // per start: encoder gradient equals the first micro-batch's
    std::vector<float> after_first;
  } probe{&h.param_buffer(), {}, {}};
  probe.encoder_untouched_since_micro.reserve(32);
  rr.ctx = &probe;
  rr.on_start = [](void* c, float const* data, std::int64_t) {
    auto& p = *static_cast<probe_t*>(c);
    if (data != p.store->grads() + Store::groups[1].offset) return;
    float const* enc = p.store->grads() + Store::groups[0].offset;
    p.encoder_untouched_since_micro.push_back(std::memcmp(enc, p.after_first.data(), sizeof(float) * p.after_first.size()) == 0);
  };
  auto ld = train_loader(h);
  ld.start_epoch(0);
  for (int s = 1; s <= 3; ++s) {
    const std::size_t before = rr.starts.size();
    h.train_step(*ld.next());  // micro-batch 1 of 2
    CHECK(rr.starts.size() == before);
    CHECK(h.step() == s - 1);
    auto const span = Store::groups[0];
    probe.after_first.assign(h.param_buffer().grads() + span.offset, h.param_buffer().grads() + span.offset + span.size);
    h.train_step(*ld.next());  // micro-batch 2 of 2: the sums
    CHECK(rr.starts.size() == before + 2);
    CHECK(h.step() == s);
  }
  // step 1 learned (the head's sum after backward), steps 2 and 3 started it before the encoder's node ran
  REQUIRE(probe.encoder_untouched_since_micro.size() == 3);
  CHECK(probe.encoder_untouched_since_micro[0] == false);
  CHECK(probe.encoder_untouched_since_micro[1] == true);
  CHECK(probe.encoder_untouched_since_micro[2] == true);
}

TEST_CASE("data parallel: the observer allocates nothing per step after the first") {
  if (!NITRO_TEST_ALLOC_COUNTING) {
    MESSAGE("skipped: allocation counting is off under AddressSanitizer or ThreadSanitizer, which own malloc");
    return;
  }
  recording_replicas rr;
  nitro::Nitro h(Mlp3{}, nitro::seed = 5, nitro::kw::replicas = &rr);
  auto ld = train_loader(h);
  ld.start_epoch(0);
  std::vector<decltype(h)::batch_type> batches;
  for (int i = 0; i < 5; ++i) batches.push_back(*ld.next());
  h.train_step(batches[0]);
  h.train_step(batches[1]);
  g_allocations = 0;
  g_counting = true;
  for (int i = 2; i < 5; ++i) h.train_step(batches[i]);
  g_counting = false;
  CHECK(g_allocations.load() == 0);
  CHECK(rr.starts.size() == 10);  // two groups a step, three of them overlapped
  CHECK(h.step() == 5);
}

TEST_CASE("one process: no observer, no sum") {
  nitro::Nitro h(Mlp3{}, nitro::seed = 5);
  CHECK(h.distributed() == nullptr);
  recording_replicas rr;  // not installed
  auto ld = train_loader(h);
  ld.start_epoch(0);
  h.train_step(*ld.next());
  CHECK(rr.starts.empty());
  nitro::dist::single_process one;
  nitro::dist::gradient_reducer<decltype(h)::param_store_type> red(one, h.param_buffer());
  nitro::arena mem;
  nitro::tape t(mem);
  CHECK(red.overlap(t) == nullptr);  // a job of one rank: nothing to overlap
}

TEST_CASE("NITRO_DIST_OVERLAP=0: every sum starts after backward, on every step; another value is E-DIST-014") {
  struct env_scope {
    explicit env_scope(char const* v) { setenv("NITRO_DIST_OVERLAP", v, 1); }
    ~env_scope() { unsetenv("NITRO_DIST_OVERLAP"); }
  };
  {
    env_scope off("0");
    recording_replicas rr;
    nitro::Nitro h(Mlp3{}, nitro::seed = 5, nitro::kw::replicas = &rr);
    using Store = decltype(h)::param_store_type;
    struct probe_t {
      Store* store;
      int starts_with_encoder_untouched = 0;
    } probe{&h.param_buffer()};
    rr.ctx = &probe;
    rr.on_start = [](void* c, float const*, std::int64_t) {
      auto& p = *static_cast<probe_t*>(c);
      p.starts_with_encoder_untouched += all_zero(*p.store, 0);
    };
    auto ld = train_loader(h);
    ld.start_epoch(0);
    for (int s = 0; s < 4; ++s) h.train_step(*ld.next());
    CHECK(rr.starts.size() == 8);                       // still one sum per group and step
    CHECK(probe.starts_with_encoder_untouched == 0);    // none began before backward ended
    CHECK(rr.progress_calls == 0);
  }
  {
    env_scope bad("yes");
    CHECK_THROWS_WITH_AS(nitro::dist::overlap_from_environment(), doctest::Contains("E-DIST-014: NITRO_DIST_OVERLAP is 'yes', not 0 or 1"), nitro::error);
  }
  CHECK(nitro::dist::overlap_from_environment());  // unset: on
}
