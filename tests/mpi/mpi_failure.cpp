// A two-rank training run whose rank 1 fails at step 3; failure_check.cmake launches it with mpirun
// and checks that rank 0 ends the run with a clear status in run_dir/status.json — never a hang.
//
//   mpi_failure kill  <run_dir>   rank 1 is killed (SIGKILL): mpirun stops rank 0 (SIGTERM), which
//                                 is waiting in the gradient all-reduce: E-DIST-005
//   mpi_failure stop  <run_dir>   rank 1 hangs (SIGSTOP; the launcher does not notice): rank 0's
//                                 all-reduce passes its deadline (NITRO_DIST_TIMEOUT): E-DIST-003
//   mpi_failure throw <run_dir>   rank 1 throws a nitro::error: it tells rank 0 before ending the
//                                 job, and rank 0's status carries rank 1's message: E-DIST-005
//   mpi_failure none  <run_dir>   no failure: status finished
// Only rank 0 writes the run record, as the CLI's run does (knobs/records.hpp).
#include "dist_step.hpp"

#include <nitro/dist.hpp>
#include <nitro/knobs/records.hpp>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

namespace failure_test {

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };

struct Tiny {
  float lr = 0.05f;
  std::int64_t batch_size = 32;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 0, .train_limit = 320, .test_limit = 10}); }
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<784, 16>(nitro::nn::relu), nitro::nn::dense<16, 10>()); }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label); }
};
NITRO_EXPERIMENT(Tiny, lr, batch_size);

}  // namespace failure_test
using failure_test::Tiny;

int main(int argc, char** argv) {
  nitro::dist::session mpi(argc, argv);
  auto& world = mpi.world();
  if (argc != 3) {
    std::fprintf(stderr, "usage: mpi_failure kill|stop|throw|none <run_dir>\n");
    return mpi.finish(64, "bad arguments");
  }
  const std::string mode = argv[1];
  std::optional<nitro::run_record> rec;
  nitro::status_record st;
  st.slug = "failure-" + mode;
  st.started = nitro::iso_time_now();
  st.horizon_steps = 40;
  try {
    if (world.writes()) {
      std::filesystem::create_directories(argv[2]);
      rec.emplace(argv[2]);
      rec->write_status(st.json());
    }
    nitro::Nitro h(Tiny{}, nitro::seed = 3);
    using H = decltype(h);
    nitro::dist::shard_loader<H::batch_type> ld(h.data().split("train"), {h.batch_size().value, true, true, 2, nitro::fold(3, 2)},
                                                world.rank(), world.size());
    dist_test::dist_stepper<H> stepper(h, world);
    for (std::uint64_t epoch = 0; h.step() < st.horizon_steps; ++epoch) {
      ld.start_epoch(epoch);
      while (auto b = ld.next()) {
        if (world.rank() == 1 && h.step() == 3) {
          if (mode == "kill") std::raise(SIGKILL);
          if (mode == "stop") std::raise(SIGSTOP);
          if (mode == "throw")
            throw nitro::error("E-TRAIN-001", "the loss is nan at step 4 (on rank 1's shard)", "lower the learning rate");
        }
        const auto r = stepper.step(*b);
        if (rec) {
          st.step = h.step();
          st.epoch = static_cast<int>(epoch);
          st.last["train/loss"] = r.loss;
          rec->write_status(st.json());
        }
        if (h.step() >= st.horizon_steps) break;
      }
    }
    st.state = "finished";
  } catch (std::exception const& x) {
    st.state = "failed";
    st.error = x.what();
    std::fprintf(stderr, "rank %d: %s\n", world.rank(), x.what());
  }
  if (rec) {
    st.finished = nitro::iso_time_now();
    rec->write_status(st.json());
  }
  return mpi.finish(st.state == "finished" ? 0 : 2, st.error);
}
