// Exact resume on real data: training 2N steps equals training N, checkpointing, loading the
// checkpoint into a fresh handle and training N more — bit for bit (parameters and optimizer
// state). And a trainer killed with SIGKILL at random moments, resumed each time from its latest
// checkpoint, ends with the bytes of an uninterrupted run, never losing more than one interval.
//
// The loop here is what the handle's train() does (train_step over a loader seeded with
// fold(seed, 2), resumable with start_epoch(epoch, first_batch)), plus the checkpoint calls that
// docs/checkpoint-integration.md moves into the handle. The optimizer's state comes from its
// program: optimizer().state_tensors() / load_state().
#include <doctest/doctest.h>

// The optimizer's state comes from the optimizer program (issue 4, optim/program.hpp). A tree
// without it cannot resume an optimizer exactly: the file then builds no test and says so.
#if __has_include("nitro/optim/program.hpp")

#include <nitro/nitro.hpp>
#include <nitro/io/checkpoint.hpp>
#include <nitro/io/weights_ref.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace resume_test {

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };

struct Mlp {
  float lr = 3e-3f;
  std::int64_t batch_size = 50;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 0, .train_limit = 1000, .test_limit = 100}); }
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<784, 32>(nitro::nn::relu), nitro::nn::dense<32, 10>()); }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label); }
};
NITRO_EXPERIMENT(Mlp, lr, batch_size);

constexpr std::uint64_t seed = 21;
using handle_t = decltype(nitro::Nitro(Mlp{}, nitro::seed = seed));
using batch_t = handle_t::batch_type;

handle_t make_handle() { return handle_t(Mlp{}, nitro::seed = seed); }

// Where the loop is: the epoch and the batches of it already trained.
struct position {
  std::int64_t epoch = 0, batch = 0;
};

// Trains until h.step() == target, from `at`; calls after(at) after every step.
template <class After>
position train_until(handle_t& h, std::int64_t target, position at, After&& after) {
  nitro::data::loader<batch_t> ld(h.data().split("train"), {h.batch_size().value, true, true, 2, nitro::fold(seed, 2)});
  while (h.step() < target) {
    ld.start_epoch(static_cast<std::uint64_t>(at.epoch), at.batch);
    while (h.step() < target) {
      auto b = ld.next();
      if (!b) break;
      h.train_step(*b);
      ++at.batch;
      if (at.batch == ld.batches_per_epoch()) at = {at.epoch + 1, 0};
      after(at);
    }
  }
  return at;
}
position train_until(handle_t& h, std::int64_t target, position at) {
  return train_until(h, target, at, [](position) {});
}

// Every byte the next step depends on: the parameters and every buffer of the optimizer.
std::string state_bytes(handle_t& h) {
  std::string s(reinterpret_cast<char const*>(h.param_buffer().values()), sizeof(float) * static_cast<std::size_t>(handle_t::param_store_type::size));
  for (auto const& e : h.optimizer().state_tensors())
    std::visit([&](auto const& t) { s.append(reinterpret_cast<char const*>(t.data()), sizeof(*t.data()) * static_cast<std::size_t>(t.numel())); }, e.value);
  return s;
}

// The checkpoint the handle will write (docs/checkpoint-integration.md).
void save(nitro::checkpointer& ck, handle_t& h, position at) {
  nitro::safetensors_writer w;
  nitro::add_store(w, "params.", h.param_buffer());
  auto opt = h.optimizer().state_tensors();
  nitro::add_named(w, opt);
  ck.save(w, {.step = h.step(), .epoch = at.epoch, .batch_in_epoch = at.batch, .seed = h.seed().value, .batch_size = h.batch_size().value});
}

// ... and how a resume restores it; returns where to continue.
position resume(handle_t& h, fs::path const& run) {
  auto file = nitro::resolve(nitro::resume_ref(nitro::run_id(run.string()) >> nitro::latest), {}).load();
  auto info = nitro::read_checkpoint_info(file);
  auto p = nitro::resume_point_of(info, h.seed().value, h.batch_size().value, file.source());
  nitro::load_store(file, "params.", h.param_buffer());
  h.optimizer().load_state(nitro::read_named(file, h.optimizer().state_tensors(), "optim."));
  REQUIRE(h.step() == p.step);
  return {p.epoch, p.batch_in_epoch};
}

fs::path fresh_dir(std::string const& name) {
  char const* t = std::getenv("NITRO_TEST_TMP");
  fs::path base = t ? fs::path(t) : fs::temp_directory_path() / "nitro-test";
  fs::path d = base / ("resume-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}
std::string slurp(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

constexpr std::int64_t total_steps = 160;  // 8 epochs of 20 batches
constexpr std::int64_t interval = 5;       // a checkpoint every 5 steps

std::int64_t read_progress(fs::path const& f) {
  std::int64_t v = -1;
  int fd = ::open(f.c_str(), O_RDONLY);
  if (fd >= 0) {
    if (::pread(fd, &v, sizeof v, 0) != sizeof v) v = -1;
    ::close(fd);
  }
  return v;
}

}  // namespace resume_test

using namespace resume_test;

TEST_CASE("exact resume: N steps, checkpoint, a fresh handle, N more steps == 2N steps, bit for bit") {
  const std::int64_t n = 30;  // mid-epoch: epoch 1, batch 10
  auto straight = make_handle();
  train_until(straight, 2 * n, {});
  const std::string want = state_bytes(straight);

  auto run = fresh_dir("exact") / "run-1";
  position at;
  {
    auto first = make_handle();
    nitro::checkpointer ck(run / "checkpoints", {.every = nitro::every_steps(n)});
    at = train_until(first, n, {}, [&](position p) { if (ck.due_after_step(first.step())) save(ck, first, p); });
    CHECK(ck.index().entries.size() == 1);
    CHECK(at.epoch == 1);
    CHECK(at.batch == 10);
  }
  auto second = make_handle();
  CHECK(state_bytes(second) != state_bytes(straight));  // a fresh handle: what the checkpoint restores matters
  const position from = resume(second, run);
  CHECK(from.epoch == at.epoch);
  CHECK(from.batch == at.batch);
  CHECK(second.step() == n);
  train_until(second, 2 * n, from);
  CHECK(second.step() == 2 * n);
  const std::string got = state_bytes(second);
  REQUIRE(got.size() == want.size());
  CHECK(std::memcmp(got.data(), want.data(), got.size()) == 0);

  // without the optimizer's state the run is not the same: the test can tell
  auto weights_only = make_handle();
  auto file = nitro::resolve(nitro::run_id(run.string()) >> nitro::latest, {}).load();
  nitro::load_store(file, "params.", weights_only.param_buffer());
  train_until(weights_only, n, {from.epoch, from.batch});
  CHECK(state_bytes(weights_only) != want);
}

TEST_CASE("exact resume: a checkpoint refuses to continue a run with another seed or batch size") {
  auto run = fresh_dir("compat") / "run-1";
  auto h = make_handle();
  nitro::checkpointer ck(run / "checkpoints", {.every = nitro::every_steps(5)});
  train_until(h, 5, {}, [&](position p) { if (ck.due_after_step(h.step())) save(ck, h, p); });
  auto file = nitro::resolve(nitro::run_id(run.string()) >> nitro::latest, {}).load();
  auto info = nitro::read_checkpoint_info(file);
  CHECK(info.batch_size == 50);
  std::string what;
  try {
    (void)nitro::resume_point_of(info, seed + 1, 50, file.source());
  } catch (nitro::error const& e) {
    what = e.code() + " " + e.sentence();
  }
  CHECK(what.rfind("E-CKPT-030", 0) == 0);
  CHECK(what.find("seed 21") != std::string::npos);
  CHECK_THROWS_AS((void)nitro::resume_point_of(info, seed, 64, file.source()), nitro::error);
  // a checkpoint of another model is refused before anything is copied
  using other_t = nitro::param_store<decltype(nitro::nn::chain(nitro::nn::dense<784, 16>(nitro::nn::relu), nitro::nn::dense<16, 10>()))::param_spec>;
  other_t other;
  CHECK_THROWS_AS(nitro::load_store(file, "params.", other), nitro::error);
}

// The worker the kill test starts in a child process (skipped in a normal run): trains to
// total_steps with a checkpoint every `interval` steps, resuming from the latest one if the run
// has any, recording its step count after every step, and writing its final bytes when done.
TEST_CASE("kill-resume worker (started by the kill test in a child process)" * doctest::skip()) {
  char const* dir_env = std::getenv("NITRO_CKPT_KILL_DIR");
  REQUIRE(dir_env != nullptr);
  const fs::path dir = dir_env, run = dir / "run-1";
  auto h = make_handle();
  nitro::checkpointer ck(run / "checkpoints", {.every = nitro::every_steps(interval), .keep_last = 2});
  position at;
  if (!ck.index().entries.empty()) at = resume(h, run);
  const int fd = ::open((dir / "progress").c_str(), O_WRONLY | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  train_until(h, total_steps, at, [&](position p) {
    const std::int64_t s = h.step();
    REQUIRE(::pwrite(fd, &s, sizeof s, 0) == sizeof s);
    if (ck.due_after_step(s)) save(ck, h, p);
  });
  ::close(fd);
  nitro::atomic_write(dir / "final.bin", state_bytes(h));
}

TEST_CASE("exact resume: killed with SIGKILL at random moments and resumed, a run ends with the uninterrupted bytes") {
  auto straight = make_handle();
  train_until(straight, total_steps, {});
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
    auto idx = nitro::checkpoint_index::load(dir / "run-1" / "checkpoints");
    const std::int64_t saved = idx.entries.empty() ? 0 : idx.latest()->step;
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

#else
#pragma message("test_checkpoint_resume: no optim/program.hpp in this tree, so the exact-resume tests are not built (they need the optimizer program's state_tensors()/load_state())")
#endif
