// Checkpoints through the handle's own train() on real data. Exact resume: a run stopped after N
// steps (its last checkpoint written as it stops), continued by a fresh handle with
// `resume = run >> latest`, ends with the bytes of a run of 2N steps — parameters, optimizer state
// and the EMA, bit for bit. A trainer killed with SIGKILL at random moments, resumed each time from
// its latest checkpoint, ends with the bytes of an uninterrupted run, never losing more than one
// interval. And the grammar acting on the handle: weights (a path, another handle's run, an
// average), w0 = nitro::weights, restore_optimizer, restore_best (true, Average(Last(n))),
// eval_weights (ema, best), load_ema, the deprecated `checkpoint = path`.
#include <doctest/doctest.h>

#include <nitro/nitro.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../support/nitro_test.hpp"

namespace fs = std::filesystem;

namespace resume_test {

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };

// Valid = 0: no valid split (resume); 200: a valid split to rank checkpoints by.
template <int Valid = 0>
struct Mlp {
  float lr = 3e-3f;
  std::int64_t batch_size = 50;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = Valid, .train_limit = 1000, .test_limit = 200}); }
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<784, 32>(nitro::nn::relu), nitro::nn::dense<32, 10>()); }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label); }
  auto metrics(nitro::Tensor const& logits, LossIn const& in) const {
    return Metrics{.acc = {nitro::nn::correct_count(logits, in.label), double(in.label.batch())}};
  }
  // one-cycle over the horizon: a resumed run must continue the schedule where it stopped
  auto schedules() const { return nitro::schedule_map{nitro::key<"eta"> = nitro::sched::one_cycle(double(lr))}; }
};
NITRO_EXPERIMENT(Mlp, lr, batch_size);

// The first layer decays toward w0.
struct Anchored {
  std::int64_t batch_size = 50;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 0, .train_limit = 500, .test_limit = 100}); }
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<784, 16>(nitro::nn::relu), nitro::nn::dense<16, 10>()); }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label); }
  auto decay_anchor() const { return nitro::anchor::w0; }
};
NITRO_EXPERIMENT(Anchored, batch_size);

constexpr std::uint64_t seed = 21;
constexpr std::int64_t total_steps = 160;  // 8 epochs of 20 batches
constexpr std::int64_t interval = 5;       // the kill test's checkpoint interval

fs::path fresh_dir(std::string const& name) {
  char const* t = std::getenv("NITRO_TEST_TMP");
  fs::path base = t ? fs::path(t) : fs::temp_directory_path() / "nitro-test";
  fs::path d = base / ("resume-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
using nitro_test::slurp;

// Every byte the next step depends on: the parameters, every buffer of the optimizer, the EMA.
template <class H>
std::string state_bytes(H& h) {
  using S = typename H::param_store_type;
  std::string s(reinterpret_cast<char const*>(h.param_buffer().values()), sizeof(float) * static_cast<std::size_t>(S::size));
  for (auto const& e : h.optimizer().state_tensors())
    std::visit([&](auto const& t) { s.append(reinterpret_cast<char const*>(t.data()), sizeof(*t.data()) * static_cast<std::size_t>(t.numel())); }, e.value);
  if (h.ema().enabled()) s.append(reinterpret_cast<char const*>(h.ema().values()), sizeof(float) * static_cast<std::size_t>(S::size));
  return s;
}
template <class H>
std::vector<float> params_of(H& h) {
  auto* p = h.param_buffer().values();
  return std::vector<float>(p, p + H::param_store_type::size);
}

// A logger that asks the run to stop after step `at` (train() stops between steps, as on Ctrl-C),
// and records the step it reached in a file (the kill test's progress).
struct stopper : nitro::run_logger {
  std::int64_t at = -1;
  std::shared_ptr<volatile std::sig_atomic_t> flag = std::make_shared<std::sig_atomic_t>(0);
  int progress_fd = -1;
  void on_batch(nitro::step_progress const& p) override {
    if (p.step == at) *flag = 1;
    if (progress_fd >= 0) {
      const std::int64_t s = p.step;
      if (::pwrite(progress_fd, &s, sizeof s, 0) != sizeof s) std::abort();
    }
  }
};

std::int64_t read_progress(fs::path const& f) {
  std::int64_t v = -1;
  int fd = ::open(f.c_str(), O_RDONLY);
  if (fd >= 0) {
    if (::pread(fd, &v, sizeof v, 0) != sizeof v) v = -1;
    ::close(fd);
  }
  return v;
}


// A handle of Mlp on the heap, its type made from the keywords given.
template <class... K>
auto make_handle(K... kw) {
  return std::make_unique<nitro::Nitro<Mlp<>, K...>>(Mlp<>{}, std::move(kw)...);
}

}  // namespace resume_test

using namespace resume_test;

TEST_CASE("exact resume through train(): stopped after N steps, a fresh handle with resume = run >> latest, N more == 2N steps, bit for bit") {
  const std::int64_t n = 30;  // mid-epoch: epoch 1, batch 10
  nitro::Nitro straight(Mlp<>{}, nitro::seed = seed, nitro::max_steps = 2 * n, nitro::ema = 0.9, nitro::logger = nitro::no_loggers);
  straight.train(false);
  REQUIRE(straight.step() == 2 * n);
  const std::string want = state_bytes(straight);

  const fs::path run = fresh_dir("exact") / "run-1";
  stopper stop;
  stop.at = n;
  {
    nitro::Nitro first(Mlp<>{}, nitro::seed = seed, nitro::max_steps = 2 * n, nitro::ema = 0.9, nitro::run_ref = run.string(),
                       nitro::kw::checkpointer = nitro::checkpoint_policy{.every = nitro::every_epochs(5)}, nitro::logger = nitro::loggers(stop));
    nitro::train_options o;
    o.console = false;
    o.stop = stop.flag.get();
    first.train(o);
    CHECK(first.status() == nitro::run_status::stopped);
    CHECK(first.status_reason().find("stop requested") == 0);
    CHECK(first.step() == n);
    auto latest = first.checkpoints()->index().latest();
    REQUIRE(latest);  // no epoch checkpoint was due: the stop wrote one
    CHECK(latest->step == n);
    CHECK(latest->epoch == 1);
    CHECK(latest->batch_in_epoch == 10);
  }
  nitro::Nitro second(Mlp<>{}, nitro::seed = seed, nitro::max_steps = 2 * n, nitro::ema = 0.9, nitro::logger = nitro::no_loggers,
                      nitro::resume = nitro::run_id(run.string()) >> nitro::latest);
  CHECK(second.step() == n);
  CHECK(second.epoch() == 1);
  second.train(false);
  CHECK(second.step() == 2 * n);
  CHECK(second.ema().updates() == 2 * n);  // the EMA came back with its update count
  const std::string got = state_bytes(second);
  REQUIRE(got.size() == want.size());
  CHECK(std::memcmp(got.data(), want.data(), got.size()) == 0);

  // without the optimizer's state the run is not the same: the test can tell
  nitro::Nitro weights_only(Mlp<>{}, nitro::seed = seed, nitro::max_steps = 2 * n, nitro::ema = 0.9, nitro::logger = nitro::no_loggers,
                            nitro::resume = nitro::run_id(run.string()) >> nitro::latest, nitro::restore_optimizer = false);
  CHECK(weights_only.step() == 0);  // the optimizer and its schedules restart
  weights_only.train(false);
  CHECK(state_bytes(weights_only) != want);
  // nor without the EMA the file holds
  nitro::Nitro no_ema(Mlp<>{}, nitro::seed = seed, nitro::max_steps = 2 * n, nitro::ema = 0.9, nitro::logger = nitro::no_loggers,
                      nitro::resume = nitro::run_id(run.string()) >> nitro::latest, nitro::load_ema = false);
  no_ema.train(false);
  CHECK(params_of(no_ema) == params_of(second));
  CHECK(state_bytes(no_ema) != want);
}

TEST_CASE("exact resume: a checkpoint refuses to continue a run with another seed or batch size") {
  const fs::path run = fresh_dir("compat") / "run-1";
  {
    nitro::Nitro h(Mlp<>{}, nitro::seed = seed, nitro::max_steps = 5, nitro::run_ref = run.string(), nitro::logger = nitro::no_loggers,
                   nitro::kw::checkpointer = nitro::checkpoint_policy{.every = nitro::every_steps(5)});
    h.train(false);
  }
  auto other_seed = nitro_test::code_and_sentence_of([&] { nitro::Nitro h(Mlp<>{}, nitro::seed = seed + 1, nitro::resume = nitro::run_id(run.string()) >> nitro::latest); });
  CHECK(other_seed.rfind("E-CKPT-030", 0) == 0);
  CHECK(other_seed.find("seed 21") != std::string::npos);
  auto other_batch = nitro_test::code_and_sentence_of([&] {
    nitro::Nitro h(Mlp<>{}, nitro::seed = seed, nitro::batch_size = 64, nitro::resume = nitro::run_id(run.string()) >> nitro::latest);
  });
  CHECK(other_batch.rfind("E-CKPT-030", 0) == 0);
  // a checkpoint of another model is refused before anything is copied
  CHECK(nitro_test::code_and_sentence_of([&] { nitro::Nitro h(Anchored{}, nitro::seed = seed, nitro::resume = nitro::run_id(run.string()) >> nitro::latest); })
            .rfind("E-CKPT-012", 0) == 0);

  // a run another process writes is not resumed (it would fork); once that process is gone, it is
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t writer = ::fork();
  REQUIRE(writer >= 0);
  if (writer == 0) {
    nitro::run_lock lock(run);
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  auto live = nitro_test::code_and_sentence_of([&] { nitro::Nitro h(Mlp<>{}, nitro::seed = seed, nitro::resume = nitro::run_id(run.string()) >> nitro::latest); });
  CHECK(live.rfind("E-REC-009", 0) == 0);
  CHECK(live.find("pid " + std::to_string(writer)) != std::string::npos);
  ::kill(writer, SIGKILL);
  ::waitpid(writer, nullptr, 0);
  CHECK_NOTHROW(nitro::Nitro(Mlp<>{}, nitro::seed = seed, nitro::resume = nitro::run_id(run.string()) >> nitro::latest));
  ::close(ready[0]);
  ::close(ready[1]);
}

// The worker the kill test starts in a child process (skipped in a normal run): trains to
// total_steps through train(), a checkpoint every `interval` steps, resuming from the latest one if
// the run has any, recording its step count after every step, and writing its final bytes when done.
TEST_CASE("kill-resume worker (started by the kill test in a child process)" * doctest::skip()) {
  char const* dir_env = std::getenv("NITRO_CKPT_KILL_DIR");
  REQUIRE(dir_env != nullptr);
  const fs::path dir = dir_env, run = dir / "run-1";
  std::optional<nitro::resume_ref> from;
  if (fs::exists(run / "checkpoints" / "index.json") && nitro::checkpoint_index::load(run / "checkpoints").latest())
    from = nitro::resume_ref(nitro::run_id(run.string()) >> nitro::latest);
  stopper progress;
  progress.progress_fd = ::open((dir / "progress").c_str(), O_WRONLY | O_CREAT, 0644);
  REQUIRE(progress.progress_fd >= 0);
  // the resume keyword given as an optional: one handle type, resumed or fresh
  auto h = make_handle(nitro::seed = seed, nitro::max_steps = total_steps, nitro::ema = 0.9, nitro::run_ref = run.string(),
                       nitro::kw::checkpointer = nitro::checkpoint_policy{.every = nitro::every_steps(interval), .keep_last = 2},
                       nitro::resume = from, nitro::logger = nitro::loggers(progress));
  h->train(false);
  ::close(progress.progress_fd);
  REQUIRE(h->status() == nitro::run_status::finished);
  nitro::atomic_write(dir / "final.bin", state_bytes(*h));
}

TEST_CASE("exact resume: killed with SIGKILL at random moments and resumed, a run ends with the uninterrupted bytes") {
  nitro::Nitro straight(Mlp<>{}, nitro::seed = seed, nitro::max_steps = total_steps, nitro::ema = 0.9, nitro::logger = nitro::no_loggers);
  straight.train(false);
  const std::string want = state_bytes(straight);

  const fs::path dir = fresh_dir("kill");
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  auto spawn = [&]() {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("NITRO_CKPT_KILL_DIR", dir.c_str(), 1);
      ::execl(self.c_str(), self.c_str(), "--test-case=kill-resume worker*", "--no-skip=true", "--no-version=true", "--minimal=true", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  };
  std::mt19937_64 gen(std::random_device{}());
  int kills = 0, after_checkpoint = 0;
  for (int round = 0; round < 5; ++round) {
    const std::int64_t done = std::max<std::int64_t>(0, read_progress(dir / "progress"));
    if (done >= total_steps - 2) break;
    const std::int64_t window = std::max<std::int64_t>(1, (total_steps - 2 - done) / 3);  // room for the rounds after
    const std::int64_t target = done + 1 + static_cast<std::int64_t>(gen() % static_cast<std::uint64_t>(window));
    pid_t pid = spawn();
    REQUIRE(pid > 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (read_progress(dir / "progress") < target && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::this_thread::sleep_for(std::chrono::microseconds(gen() % 3000));  // sometimes in the middle of a save
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFSIGNALED(status)) {  // it finished before the kill landed
      CHECK(WIFEXITED(status));
      break;
    }
    ++kills;
    const std::int64_t reached = read_progress(dir / "progress");
    std::int64_t saved = 0;
    if (fs::exists(dir / "run-1" / "checkpoints" / "index.json")) {
      auto idx = nitro::checkpoint_index::load(dir / "run-1" / "checkpoints");
      saved = idx.entries.empty() ? 0 : idx.latest()->step;
    }
    INFO("killed at step " << reached << ", latest checkpoint at step " << saved);
    CHECK(saved <= reached);
    CHECK(reached - saved <= interval);  // at most one interval of work lost
    after_checkpoint += saved > 0;
  }
  pid_t pid = spawn();  // the last resume runs to the end
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(kills >= 3);
  CHECK(after_checkpoint >= 1);
  const std::string got = slurp(dir / "final.bin");
  REQUIRE(got.size() == want.size());
  CHECK(std::memcmp(got.data(), want.data(), got.size()) == 0);
  fs::remove_all(dir);
}

TEST_CASE("restore_best: true ends with the run's best checkpoint; Average(Last(2)) with the mean of its latest two") {
  const fs::path runs = fresh_dir("best");
  // ranked by the largest valid loss: the best is an early epoch, so restoring it is visible
  const nitro::checkpoint_policy every_epoch{.every = nitro::every_epochs(1), .keep_last = 2, .keep_best = 1};
  nitro::Nitro h(Mlp<200>{}, nitro::seed = seed, nitro::max_epochs = 4, nitro::run_dir = runs.string(), nitro::logger = nitro::no_loggers,
                 nitro::monitor = nitro::maximize("valid.loss"), nitro::kw::checkpointer = every_epoch, nitro::restore_best = true);
  h.train(false);
  REQUIRE(h.run_directory().parent_path() == runs);  // a run directory made for the checkpointer
  auto const& idx = h.checkpoints()->index();
  CHECK(idx.monitor == "valid.loss");
  CHECK(idx.mode == nitro::monitor_mode::max);
  auto best = idx.best(1);
  REQUIRE(best.size() == 1);
  REQUIRE(idx.latest());
  CHECK(best[0].step < idx.latest()->step);
  using S = decltype(h)::param_store_type;
  S want(false);
  nitro::load_store(nitro::safetensors_file::read(h.checkpoints()->path_of(best[0])), "params.", want);
  CHECK(std::memcmp(h.param_buffer().values(), want.values(), sizeof(float) * S::size) == 0);

  nitro::Nitro avg(Mlp<200>{}, nitro::seed = seed, nitro::max_epochs = 4, nitro::run_dir = runs.string(), nitro::logger = nitro::no_loggers,
                   nitro::kw::checkpointer = every_epoch, nitro::restore_best = nitro::Average(nitro::Last(2)));
  avg.train(false);
  auto last = avg.checkpoints()->index().last(2);
  REQUIRE(last.size() == 2);
  S mean(false);
  nitro::load_store(nitro::average_checkpoints({avg.checkpoints()->path_of(last[1]), avg.checkpoints()->path_of(last[0])}), "params.", mean);
  CHECK(std::memcmp(avg.param_buffer().values(), mean.values(), sizeof(float) * S::size) == 0);
  CHECK(params_of(avg) != params_of(h));

  // weights = another handle's run: its best checkpoint, and the mean of its latest two
  nitro::Nitro from_best(Mlp<200>{}, nitro::weights = h >> nitro::best);
  CHECK(std::memcmp(from_best.param_buffer().values(), want.values(), sizeof(float) * S::size) == 0);
  CHECK(from_best.step() == 0);  // weights are weights: the optimizer starts fresh
  nitro::Nitro from_avg(Mlp<200>{}, nitro::weights = avg >> nitro::Average(nitro::Last(2)));
  CHECK(params_of(from_avg) == params_of(avg));
  // and by path
  nitro::Nitro by_path(Mlp<200>{}, nitro::weights = h.checkpoints()->path_of(best[0]));
  CHECK(params_of(by_path) == params_of(from_best));
}

TEST_CASE("eval_weights: nitro::ema evaluates the average, nitro::best this run's best checkpoint; the live weights stay") {
  const fs::path runs = fresh_dir("eval-weights");
  const nitro::checkpoint_policy policy{.every = nitro::every_epochs(1), .keep_last = 1, .keep_best = 1};
  nitro::Nitro h(Mlp<200>{}, nitro::seed = seed, nitro::max_epochs = 2, nitro::ema = 0.9, nitro::eval_weights = nitro::ema,
                 nitro::run_dir = runs.string(), nitro::logger = nitro::no_loggers);
  h.train(false);
  const auto live = params_of(h);
  const auto with_ema = h.evaluate("test");
  CHECK(params_of(h) == live);
  // the same numbers from a handle holding the average as its weights
  nitro::Nitro copy(Mlp<200>{});
  std::memcpy(copy.param_buffer().values(), h.ema().values(), sizeof(float) * decltype(h)::param_store_type::size);
  CHECK(copy.evaluate("test").at("acc") == with_ema.at("acc"));
  CHECK(copy.evaluate("test").at("loss") == with_ema.at("loss"));

  nitro::Nitro b(Mlp<200>{}, nitro::seed = seed, nitro::max_epochs = 3, nitro::eval_weights = nitro::best, nitro::run_dir = runs.string(),
                 nitro::kw::checkpointer = policy, nitro::logger = nitro::no_loggers);
  b.train(false);
  nitro::Nitro from_best(Mlp<200>{}, nitro::weights = b >> nitro::best);
  const auto live_b = params_of(b);
  CHECK(b.evaluate("valid").at("loss") == from_best.evaluate("valid").at("loss"));
  CHECK(params_of(b) == live_b);

  // an EMA asked for and not kept: a coded error
  nitro::Nitro none(Mlp<200>{}, nitro::eval_weights = nitro::ema);
  CHECK(nitro_test::code_and_sentence_of([&] { (void)none.evaluate("test"); }).rfind("E-CKPT-031", 0) == 0);
}

TEST_CASE("w0 = nitro::weights anchors decay at the loaded weights; checkpoint = path or run >> checkpoint still loads them, with a warning") {
  const fs::path runs = fresh_dir("w0");
  nitro::Nitro src(Anchored{}, nitro::seed = 3, nitro::max_epochs = 1, nitro::run_dir = runs.string(), nitro::logger = nitro::no_loggers,
                   nitro::kw::checkpointer = nitro::checkpoint_policy{});
  src.train(false);
  const fs::path file = src.checkpoints()->path_of(*src.checkpoints()->index().latest());
  nitro::Nitro h(Anchored{}, nitro::weights = file, nitro::w0 = nitro::weights);
  CHECK(params_of(h) == params_of(src));
  auto anchor = [](auto& handle) {
    for (auto& e : handle.optimizer().state_tensors())
      if (e.name == "optim.default.anchor") return std::get<nitro::Tensor>(e.value).to_vector();
    return std::vector<float>{};
  };
  const auto a = anchor(h);
  REQUIRE(!a.empty());
  CHECK(std::equal(a.begin(), a.end(), h.param_buffer().values()));  // the anchor is the loaded weights
  nitro::Nitro init(Anchored{}, nitro::weights = file);
  const auto b = anchor(init);
  CHECK(!std::equal(b.begin(), b.end(), init.param_buffer().values()));  // without w0 = weights: build_model's init

  // the deprecated spelling: loads the same weights and says so on stderr (W-CKPT-001)
  std::fflush(stderr);
  const fs::path log = runs / "stderr.txt";
  const int saved = ::dup(2);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, 2);
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
  nitro::Nitro old(Anchored{}, nitro::kw::checkpoint = file.string());
  // the note's deprecated spelling with a run reference (it read `weights = "" names no file`)
  nitro::Nitro by_run(Anchored{}, nitro::kw::checkpoint = src >> nitro::latest);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(fd);
  ::close(saved);
  CHECK(params_of(old) == params_of(src));
  CHECK(params_of(by_run) == params_of(src));
  const std::string warned = slurp(log);
  CHECK(warned.rfind("W-CKPT-001: `checkpoint = \"" + file.string() + "\"` is the deprecated spelling of `weights =", 0) == 0);
  const std::string ref = "run(" + src.run_directory().string() + ") >> Last(1)";
  CHECK(warned.find("\nW-CKPT-001: `checkpoint = " + ref + "` is the deprecated spelling of `weights = " + ref + "`; it still works.") !=
        std::string::npos);
  auto records = old.keywords().records();
  CHECK(records[21].name == "weights");
  CHECK(records[21].note.find("deprecated") != std::string::npos);
}
