// Writes a run's JSONL, CSV and TensorBoard files through nitro's loggers, for read_logs.py to
// check with its own reader. The values follow formulas read_logs.py knows:
//   steps 1..10, log_every_n_steps 2: train/loss = mean of 1/s over the logged window, train/eta = 0.001 s
//   evaluations at steps 5 and 10: valid/acc = 0.5 + s/100, valid/loss = 2/s; at step 10 valid/weird = NaN
// Usage: trainer_write_logs <directory>
#include <nitro/record/loggers/csv.hpp>
#include <nitro/record/loggers/jsonl.hpp>
#include <nitro/record/loggers/tensorboard.hpp>
#include <nitro/train/run_control.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <directory>\n", argv[0]);
    return 2;
  }
  try {
    std::filesystem::path dir = argv[1];
    std::filesystem::remove_all(dir);
    nitro::run_info info;
    info.experiment = "PyCheck<8>";
    info.binding_report = "Nitro PyCheck<8>\n  the binding report\n";
    info.metadata_json = R"({"selection": {"variant": "small", "set": {"lr": 0.002}}, "seed": 7})";
    info.dir = dir;
    info.steps_per_epoch = 5;
    info.max_epochs = 2;
    info.total_steps = 10;
    info.batch_size = 4;
    nitro::run_control rc({.log_every_n_steps = 2}, nitro::loggers(nitro::jsonl_logger(), nitro::csv_logger(), nitro::tensorboard_logger("tb")));
    auto eta = rc.schedules().declare("eta");
    float w = 0.0f;
    rc.begin(info, &w, 1);
    for (int s = 1; s <= 10; ++s) {
      rc.schedules().set(eta, 0.001 * s);
      rc.after_step(s, (s - 1) / 5 + 1, (s - 1) % 5 + 1, 1.0 / s, &w, 4);
      if (s % 5 == 0) {
        nitro::metric_values m;
        m.scalars["acc"] = 0.5 + s / 100.0;
        m.scalars["loss"] = 2.0 / s;
        if (s == 10) m.scalars["weird"] = std::nan("");
        rc.after_eval(s, s / 5, "valid", m);
      }
    }
    rc.end();
    return 0;
  } catch (nitro::error const& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
