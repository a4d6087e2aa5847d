// cli/: the command line of a trainer binary, driven in-process on a small synthetic data set —
// the parser and its errors, help, variants, explain, run records, eval of the recorded weights,
// diff, bundle (a tar read back), sweeps across two compiled programs, and the weights reader's
// refusals. (tests/e2e drives the real binary on Fashion-MNIST.)
#include <nitro/nitro.hpp>
#include <nitro/main.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include "../support/nitro_test.hpp"

namespace cli_test {

struct Batch { BOOST_HANA_DEFINE_STRUCT(Batch, (nitro::Tensor, x), (nitro::Tensor, y)); };
struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, x)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, y)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };

// Which way the labels go: an enum knob, selected by name (--set rule=flipped).
enum class data_rule { signs, flipped };
NITRO_KNOB_ENUM(data_rule, signs, flipped)

// Two classes told apart by the sign of x0 + x1 - x2: learnable in a few steps. `held_out` sizes the
// valid and test splits (a list knob).
inline nitro::data::dataset<Batch> make_data(std::int64_t n, data_rule rule = data_rule::signs,
                                             std::array<std::int64_t, 2> held_out = {64, 64}) {
  auto split = [rule](std::int64_t count, std::uint64_t seed) {
    Batch b{nitro::Tensor::owned({4, count}), nitro::Tensor::owned({2, count})};
    nitro::rng g(seed);
    for (std::int64_t i = 0; i < count; ++i) {
      float s = 0;
      for (int f = 0; f < 4; ++f) {
        float v = float(g() % 2001) / 1000.0f - 1.0f;
        b.x(f, i) = v;
        s += f == 2 ? -v : (f == 3 ? 0.0f : v);
      }
      b.y((s > 0) == (rule == data_rule::signs) ? 1 : 0, i) = 1.0f;
    }
    return b;
  };
  nitro::data::dataset<Batch> d;
  d.name = "signs";
  d.fingerprint = std::string(nitro::symbol_name(rule)) + ":" + std::to_string(n) + ":" + std::to_string(held_out[0]) + ":" +
                  std::to_string(held_out[1]);
  d.splits.emplace_back("train", split(n, 1));
  d.splits.emplace_back("valid", split(held_out[0], 2));
  d.splits.emplace_back("test", split(held_out[1], 3));
  return d;
}

template <int Width = 8>
struct Tiny {
  nitro::GraphConst<int, Width> width;
  nitro::Device<float> smoothing{0.0f};
  float lr = 1e-2f;
  int max_epochs = 2;
  std::int64_t batch_size = 16;
  std::int64_t n_samples = 256;
  data_rule rule = data_rule::signs;
  std::array<std::int64_t, 2> held_out{64, 64};

  static constexpr auto knobs() {
    return nitro::knobs(nitro::knob<"lr">("learning rate"), nitro::knob<"width">("hidden width"), nitro::knob<"smoothing">(),
                        nitro::knob<"max_epochs">("epochs"), nitro::knob<"n_samples">("training samples"),
                        nitro::knob<"log_every_n_steps">("steps per train line"), nitro::knob<"rule">("label rule"),
                        nitro::knob<"held_out">("valid and test samples"));
  }
  static constexpr auto variants() {
    return nitro::variants(nitro::variant<"quick">(nitro::set<"max_epochs">(1), nitro::set<"n_samples">(128)),
                           nitro::variant<"wide">(nitro::set<"width">(16)));
  }
  static constexpr auto sweeps() {
    return nitro::sweeps(nitro::sweep<"widths">(nitro::axis<"width">(8, 16)),
                         nitro::sweep<"lrs">(nitro::base<"quick">, nitro::axis<"lr">(0.01, 0.05)));
  }

  // The 16-wide program says how it checkpoints (`check` and `eval` must still write nothing).
  auto checkpointer() const
    requires(Width == 16)
  {
    return nitro::checkpoint_policy{.every = nitro::every_epochs(1), .keep_last = 3, .keep_best = 1};
  }

  auto build_data() const { return make_data(n_samples, rule, held_out); }
  auto build_model() const {
    constexpr int W = decltype(width)::value;
    return nitro::nn::chain(nitro::nn::dense<4, W>(nitro::nn::relu), nitro::nn::dense<W, 2>());
  }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.x, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.y, smoothing); }
  auto metrics(nitro::Tensor const& logits, LossIn const& in) const {
    return Metrics{.acc = {nitro::nn::correct_count(logits, in.y), double(in.y.batch())}};
  }
};
NITRO_EXPERIMENT(Tiny, width, smoothing, lr, max_epochs, batch_size, n_samples, rule, held_out);

// The note's own example (spec/knobs-variants-sweeps.txt, "Seeing them"), declared in C++.
struct NoteRun {
  double lr = 0.0015;
  int layers = 4;
  int width = 256;
  int seq = 1024;
  static constexpr auto knobs() {
    return nitro::knobs(nitro::knob<"lr">("peak learning rate of the block matrices, the default group"),
                        nitro::knob<"layers">("transformer blocks"), nitro::knob<"width">("model width"),
                        nitro::knob<"seq">("sequence length in tokens; a window holds seq + 1"));
  }
  static constexpr auto variants() {
    return nitro::variants(nitro::variant<"small">(nitro::set<"layers">(2), nitro::set<"width">(128)),
                           nitro::variant<"smoke">(nitro::set<"layers">(2), nitro::set<"width">(128), nitro::set<"seq">(64)));
  }
  static constexpr auto sweeps() { return nitro::sweeps(nitro::sweep<"seeds">(nitro::axis<"seed">(1, 2, 3))); }
};
NITRO_EXPERIMENT(NoteRun, lr, layers, width, seq);

using App = nitro::cli::app<Tiny<8>, Tiny<16>>;

struct result {
  int rc;
  std::string out, err;
};
inline result cli(std::vector<std::string> args) {
  std::ostringstream out, err;
  nitro::cli::context ctx{"tiny", "/nonexistent/tiny", "tiny", out, err};
  int rc = App::run(ctx, args);
  return {rc, out.str(), err.str()};
}

using nitro_test::tmp_dir;

inline std::string error_text(auto&& f) {
  try {
    f();
  } catch (nitro::error const& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace cli_test

using namespace cli_test;

TEST_CASE("the parser: options in both spellings, selections, positional arguments") {
  auto a = nitro::cli::parse_args({"run", "--variant", "quick", "--set", "lr=0.5", "--set=seed=3", "--steps=10", "--eval-every", "5",
                                   "--diagnostics", "--run-dir", "R", "--id", "x1", "--quiet"});
  CHECK(a.command == "run");
  CHECK(a.selection.variant == "quick");
  CHECK(a.selection.sets == std::vector<std::pair<std::string, std::string>>{{"lr", "0.5"}, {"seed", "3"}});
  CHECK(a.selection.steps == 10);
  CHECK(a.selection.eval_every == 5);
  CHECK(a.selection.diagnostics);
  CHECK(a.run_dir == "R");
  CHECK(a.id == "x1");
  CHECK(a.quiet);
  auto d = nitro::cli::parse_args({"diff", "a", "--", "--b"});
  CHECK(d.positional == std::vector<std::string>{"a", "--b"});
  auto b = nitro::cli::parse_args({"bundle", "-o", "x.tar"});
  CHECK(b.out == "x.tar");
  CHECK(nitro::cli::parse_args({"eval", "-h"}).help);
  CHECK(nitro::cli::parse_args({}).help);
}

TEST_CASE("--set device: the backend as an override every trainer takes; recorded, repeated for sweep points, read back") {
  auto a = nitro::cli::parse_args({"run", "--set", "lr=0.5", "--set", "device=cuda"});
  CHECK(a.selection.sets == std::vector<std::pair<std::string, std::string>>{{"lr", "0.5"}});  // not a knob
  CHECK(a.selection.device == "cuda:0");
  CHECK(a.selection.cuda_index() == 0);
  CHECK(nitro::cli::parse_args({"run", "--set", "device=cuda:3"}).selection.cuda_index() == 3);
  auto cpu = nitro::cli::parse_args({"explain", "--set", "device=cpu"});
  CHECK(cpu.has_selection);
  CHECK(cpu.selection.device == "cpu");
  CHECK(cpu.selection.cuda_index() == -1);
  CHECK(nitro::cli::parse_args({"run"}).selection.cuda_index() == -1);
  // the children of `sweep --jobs` and Slurm's scripts ask for it again; the manifest keeps it
  CHECK(a.selection.to_args() == std::vector<std::string>{"--set", "lr=0.5", "--set", "device=cuda:0"});
  CHECK(a.selection.json()["overrides"]["device"] == "cuda:0");
  CHECK(nitro::selection_request::from_json(a.selection.json()) == a.selection);
  CHECK_FALSE(a.selection.empty());
  auto fails = [](std::vector<std::string> args) { return error_text([&] { nitro::cli::parse_args(args); }); };
  for (char const* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CUDA", ""})
    CHECK(fails({"run", "--set", std::string("device=") + bad}) ==
          "E-CLI-002: --set device takes cpu, cuda or cuda:N (the GPU's index), not '" + std::string(bad) + "'\n  fix: e.g. --set device=cuda");
  CHECK(fails({"run", "--set", "device=cpu", "--set", "device=cuda"}).rfind("E-KNOB-013: device is set twice ('cpu' and 'cuda')", 0) == 0);
}

TEST_CASE("the parser's errors: E-CLI-001, E-CLI-002, E-CLI-003") {
  auto fails = [](std::vector<std::string> args) { return error_text([&] { nitro::cli::parse_args(args); }); };
  CHECK(fails({"rn"}) ==
        "E-CLI-001: there is no command 'rn'; did you mean 'run'?\n"
        "  fix: commands: run, sweep, variants, check, explain, diff, watch, ir, bundle, eval, sample, report, new (--help lists them)");
  CHECK(fails({"run", "--stpes", "10"}) ==
        "E-CLI-002: `run` does not take the option '--stpes'; did you mean '--steps'?\n"
        "  fix: `run` takes: --variant, --set, --steps, --eval-every, --diagnostics, --run-dir, --id, --quiet, --resume, --weights, --help");
  CHECK(fails({"variants", "--set", "lr=1"}).rfind("E-CLI-002: `variants` does not take the option '--set'", 0) == 0);
  CHECK(fails({"run", "--set", "lr"}) == "E-CLI-002: --set takes KNOB=VALUE, not 'lr'\n  fix: e.g. --set lr=0.002");
  CHECK(fails({"run", "--steps", "0"}) == "E-CLI-002: --steps takes a whole number of at least 1, not '0'\n  fix: e.g. --steps 100");
  CHECK(fails({"run", "--steps"}) == "E-CLI-002: --steps needs a value (N)\n  fix: write --steps N");
  CHECK(fails({"run", "--quiet=yes"}).rfind("E-CLI-002: --quiet is a flag and takes no value", 0) == 0);
  CHECK(fails({"sweep"}) == "E-CLI-002: `sweep` needs NAME\n  fix: e.g. `sweep NAME` (--help shows more)");
  CHECK(fails({"run", "extra"}).rfind("E-CLI-002: `run` got an argument too many: 'extra'", 0) == 0);
  CHECK(fails({"sweep", "x", "--emit", "pbs"}) == "E-CLI-002: --emit knows 'slurm', not 'pbs'\n  fix: write --emit slurm");
  CHECK(fails({"run", "--id", "a/b"}).rfind("E-CLI-002: --id 'a/b' cannot end a folder name", 0) == 0);
  CHECK(fails({"run", "--variant", "a", "--variant", "b"}) ==
        "E-CLI-003: --variant is given twice ('a' and 'b')\n"
        "  fix: name one variant: variants do not compose (add --set for the knobs that differ)");
}

TEST_CASE("help: the overview, and each command's usage, options and exit codes") {
  auto r = cli({"--help"});
  CHECK(r.rc == 0);
  CHECK(r.out.find("usage: tiny COMMAND [OPTIONS]") == 0);
  auto none = cli({});
  CHECK(none.rc == 2);  // no command is a usage mistake, answered with the overview
  auto run = cli({"run", "--help"});
  CHECK(run.rc == 0);
  CHECK(run.out.find("usage: tiny run [OPTIONS]") == 0);
  CHECK(run.out.find("  --set KNOB=VALUE") != std::string::npos);
  CHECK(run.out.find("exit codes: 0 done (the run finished), 1 a run failed") != std::string::npos);
  for (auto const& c : nitro::cli::commands()) CHECK(cli({std::string(c.name), "--help"}).rc == 0);
}

TEST_CASE("variants prints the note's layout") {
  auto r = cli({"variants"});
  CHECK(r.rc == 0);
  CHECK(r.out ==
        "knobs:\n"
        "  lr                 0.01     learning rate\n"
        "  width              8        hidden width\n"
        "  smoothing          0\n"
        "  max_epochs         2        epochs\n"
        "  n_samples          256      training samples\n"
        "  log_every_n_steps  50       steps per train line\n"
        "  rule               signs    label rule\n"
        "  held_out           [64,64]  valid and test samples\n"
        "  seed               1        the run seed; every random stream folds it in\n"
        "variants:\n"
        "  quick  max_epochs=1 n_samples=128\n"
        "  wide   width=16\n"
        "sweeps:\n"
        "  widths  2 points over width\n"
        "  lrs     2 points over lr on variant quick\n");
}

TEST_CASE("variants prints the note's own example exactly as the note shows it") {
  CHECK(nitro::cli::variants_text(nitro::make_catalog<NoteRun>()) ==
        "knobs:\n"
        "  lr      0.0015  peak learning rate of the block matrices, the default group\n"
        "  layers  4       transformer blocks\n"
        "  width   256     model width\n"
        "  seq     1024    sequence length in tokens; a window holds seq + 1\n"
        "  seed    1       the run seed; every random stream folds it in\n"
        "variants:\n"
        "  small  layers=2 width=128\n"
        "  smoke  layers=2 width=128 seq=64\n"
        "sweeps:\n"
        "  seeds  3 points over seed\n");
}

TEST_CASE("explain shows every knob and run keyword with value, source and doc") {
  auto r = cli({"explain", "--variant", "quick", "--set", "lr=0.05", "--set", "log_every_n_steps=4", "--steps", "7"});
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK(r.out.find("program Tiny<width=8>  (variant quick)\n") == 0);
  CHECK(r.out.find("  lr                 0.05     set      learning rate\n") != std::string::npos);
  CHECK(r.out.find("  max_epochs         1        variant  epochs\n") != std::string::npos);
  CHECK(r.out.find("  width              8        default  hidden width\n") != std::string::npos);
  // a run keyword's row, its columns joined by one space
  auto row = [&](std::string const& name) {
    const auto at = r.out.find("\n  " + name + " ", r.out.find("run keywords:\n"));
    std::istringstream line(r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1));
    std::string word, joined;
    while (line >> word) joined += (joined.empty() ? "" : " ") + word;
    return joined;
  };
  // a run keyword that is a knob but not a field reaches the handle as a keyword
  CHECK(row("log_every_n_steps") == "log_every_n_steps 4 keyword steps between train log lines; the knob log_every_n_steps (set)");
  CHECK(row("max_epochs") == "max_epochs 1 field epochs to train; the knob max_epochs (variant)");
  CHECK(row("max_steps").rfind("max_steps 7 override optimizer steps to train", 0) == 0);
  // nobody set the seed: the handle's own default, not a keyword
  CHECK(row("seed") == "seed 1 default the run seed; every random stream folds it in; the knob seed (default)");
  // what `run` gives the handle: the command line's checkpoints (Tiny<8> names none)
  CHECK(row("checkpointer") == "checkpointer every epoch, keep last 10, best 1 by the run's monitor (min) keyword when checkpoints are written, which are kept");
  CHECK(r.out.find("overrides:\n  steps  7  override") != std::string::npos);
}

TEST_CASE("run records the selection everywhere, and eval reproduces the recorded metrics from the weights") {
  const std::string dir = tmp_dir("cli/run");
  auto r = cli({"run", "--variant", "quick", "--set", "n_samples=96", "--set", "log_every_n_steps=2", "--diagnostics", "--eval-every",
                "3", "--run-dir", dir, "--id", "a", "--quiet"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string run = dir + "/tiny-quick-n_samples=96-log_every_n_steps=2-a";
  REQUIRE(std::filesystem::exists(run + "/manifest.json"));
  auto m = nitro::read_json(run + "/manifest.json");
  CHECK(m["experiment"] == "Tiny");
  CHECK(m["program"]["name"] == "Tiny<width=8>");
  CHECK(m["knobs"]["n_samples"]["value"] == 96);
  CHECK(m["knobs"]["n_samples"]["source"] == "set");
  CHECK(m["knobs"]["max_epochs"]["source"] == "variant");
  CHECK(m["knobs"]["lr"]["source"] == "default");
  CHECK(m["overrides"]["diagnostics"]["source"] == "override");
  CHECK(m["run_keywords"]["log_every_n_steps"]["value"] == 2);
  CHECK(m["run_keywords"]["log_every_n_steps"]["source"] == "keyword");
  CHECK(m["run_keywords"]["max_epochs"]["source"] == "field");
  // the keywords the command line gives the handle, as it resolves them (they read `framework default`)
  CHECK(m["run_keywords"]["checkpointer"]["source"] == "keyword");
  CHECK(m["run_keywords"]["checkpointer"]["value"] == "every 3 steps, keep last 10, best 1 by the run's monitor (min)");
  CHECK(m["run_keywords"]["logger"]["source"] == "keyword");
  CHECK(m["run_keywords"]["run_ref"]["source"] == "keyword");
  CHECK(m["run_keywords"]["run_ref"]["value"] == run);
  CHECK(m["run_keywords"]["seed"]["source"] == "default");  // nobody set it (it read `keyword`)
  CHECK(m["run_keywords"]["eval_every"]["source"] == "override");
  CHECK(m["data"]["splits"]["train"] == 96);  // build_data saw the selected n_samples
  CHECK(m["backend"]["device"] == "cpu");     // the handle's backend, as show() names it
  CHECK(m["backend"]["name"] == "cpu (Eigen)");
  CHECK(m["backend"]["kernels"] == std::string("gemm ") + nitro::cpu::gemm_kernel_name());  // which kernels this CPU ran
  auto st = nitro::read_json(run + "/status.json");
  CHECK(st["state"] == "finished");
  CHECK(st["step"] == 6);  // one epoch of 96 / 16
  CHECK(st["selection"]["knobs"]["n_samples"]["value"] == 96);
  CHECK(st["horizon"]["steps"] == 6);
  auto lines = nitro::read_jsonl(run + "/metrics.jsonl");
  REQUIRE(lines.size() > 3);
  CHECK(lines[0]["type"] == "metadata");
  CHECK(lines[0]["selection"]["variant"] == "quick");
  int train_lines = 0, evals = 0, tests = 0;
  for (auto const& l : lines) {
    if (l["type"] == "metrics" && l["split"] == "train") {
      ++train_lines;
      CHECK(l["grad_norm"].get<double>() > 0);
      CHECK(l["param_norm"].get<double>() > 0);
    }
    if (l["type"] == "metrics" && l["split"] == "valid") ++evals;
    if (l["type"] == "metrics" && l["split"] == "test") ++tests;
  }
  CHECK(train_lines == 3);
  CHECK(evals == 2);  // at step 3 and at the epoch's end (step 6)
  CHECK(tests == 1);  // when training ended
  CHECK(lines.back()["type"] == "end");
  CHECK(lines.back()["status"] == "finished");
  CHECK(st["last"].contains("test/acc"));
  // the record: the binding report (show, explain, ir), the trainer's CSV and TensorBoard files, checkpoints with their index
  const std::string report = nitro::read_record_file(run + "/binding_report.txt");
  INFO(report.substr(0, 400));
  CHECK(report.find("Nitro cli_test::Tiny<8>\n") < 4);  // show(h) first
  CHECK(report.find("  parameter groups\n") != std::string::npos);
  CHECK(report.find("\nprogram Tiny<width=8>  (variant quick)\n") != std::string::npos);
  // one source of truth: every run keyword of the manifest is a row of the report's table, with its source
  {
    const auto table = report.substr(report.find("run keywords:\n"));
    for (auto const& item : m["run_keywords"].items()) {  // not a structured binding: clang 14 cannot capture one in doctest's lambdas
      const std::string name = item.key();
      auto const& kw = item.value();
      const auto at = table.find("\n  " + name + " ");
      REQUIRE_MESSAGE(at != std::string::npos, name);
      const auto line = table.substr(at + 1, table.find('\n', at + 1) - at - 1);
      CHECK_MESSAGE(line.find("  " + kw["source"].get<std::string>() + " ") != std::string::npos, line);
      if (kw["value"].is_string()) CHECK_MESSAGE(line.find("  " + kw["value"].get<std::string>() + " ") != std::string::npos, line);
    }
  }
  CHECK(std::filesystem::exists(run + "/metrics.csv"));
  int events = 0;
  for (auto const& f : std::filesystem::directory_iterator(run)) events += f.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  CHECK(events == 1);
  auto index = nitro::checkpoint_index::load(run + "/checkpoints");
  REQUIRE(index.latest());
  CHECK(index.latest()->step == 6);
  CHECK(index.monitor == "valid.loss");
  CHECK(index.latest()->metrics.count("valid.acc") == 1);

  auto e = cli({"eval", "--run-dir", dir, "tiny-quick", "--split", "valid"});
  INFO(e.err);
  CHECK(e.rc == 0);
  CHECK(e.out.find("  valid  acc   " + nitro::cli::metric_text(st["last"]["valid/acc"].get<double>()) + "\n") != std::string::npos);

  // a second run, then diff and bundle
  auto r2 = cli({"run", "--variant", "quick", "--set", "lr=0.05", "--run-dir", dir, "--id", "b", "--quiet"});
  CHECK(r2.rc == 0);
  auto d = cli({"diff", "--run-dir", dir, "tiny-quick-n", "tiny-quick-lr"});
  CHECK(d.rc == 0);
  CHECK(d.out.find("  lr                 0.01 (default)  0.05 (set)\n") != std::string::npos);
  CHECK(d.out.find("same in both: width=8") != std::string::npos);
  auto b = cli({"bundle", "--run-dir", dir, "--variant", "quick", "--set", "lr=0.05", "-o", dir + "/b.tar"});
  CHECK(b.rc == 0);
  auto files = nitro::cli::read_tar(nitro::read_record_file(dir + "/b.tar"));
  REQUIRE(files.size() == 5);
  CHECK(files[0].first == "tiny-quick-lr=0.05-b/manifest.json");
  CHECK(files[4].first == "tiny-quick-lr=0.05-b/weights.safetensors");
  auto b_index = nitro::checkpoint_index::load(dir + "/tiny-quick-lr=0.05-b/checkpoints");
  REQUIRE(b_index.latest());
  CHECK(files[4].second == nitro::read_record_file(dir + "/tiny-quick-lr=0.05-b/checkpoints/" + b_index.latest()->file));
  auto w = cli({"watch", "--run-dir", dir, "latest"});
  CHECK(w.rc == 0);
  CHECK(w.out.find("state: finished") != std::string::npos);
}

TEST_CASE("an enum knob is set by name, a list knob as a list; both reach the experiment and its records") {
  const std::string dir = tmp_dir("cli/typed");
  auto r = cli({"run", "--set", "rule=:flipped", "--set", "held_out=[32,48]", "--steps", "2", "--run-dir", dir, "--id", "t", "--quiet"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string run = dir + "/tiny-rule=_flipped-held_out=_32_48_-t";  // what a file name holds
  REQUIRE(std::filesystem::exists(run + "/manifest.json"));
  auto m = nitro::read_json(run + "/manifest.json");
  CHECK(m["knobs"]["rule"]["value"] == "flipped");  // the note's `:flipped` is the name
  CHECK(m["knobs"]["rule"]["source"] == "set");
  CHECK(m["knobs"]["held_out"]["value"] == nlohmann::ordered_json::array({32, 48}));
  CHECK(m["data"]["splits"]["valid"] == 32);  // build_data saw both
  CHECK(m["data"]["splits"]["test"] == 48);
  CHECK(m["data"]["fingerprint"] == "flipped:256:32:48");
  // explain prints them as --set takes them back
  auto e = cli({"explain", "--set", "rule=flipped", "--set", "held_out=16, 8"});
  INFO(e.out);
  CHECK(e.out.find("\n  rule               flipped  set      label rule\n") != std::string::npos);
  CHECK(e.out.find("\n  held_out           [16,8]   set      valid and test samples\n") != std::string::npos);
  // a recorded run resumes with its selection read back from the manifest
  auto again = cli({"run", "--resume", "tiny-rule=_flipped-held_out=_32_48_-t", "--steps", "4", "--set", "rule=flipped", "--set",
                    "held_out=32,48", "--run-dir", dir, "--id", "u", "--quiet"});
  INFO(again.err);
  CHECK(again.rc == 0);
  CHECK(nitro::read_json(dir + "/tiny-rule=flipped-held_out=32_48-u/status.json")["step"] == 4);
  // what they refuse, and what they accept
  CHECK(cli({"check", "--set", "rule=up"}).err ==
        "E-KNOB-010: --set gives the knob 'rule' the value 'up', which is not one of its values\n"
        "  fix: give one of signs, flipped, e.g. --set rule=flipped\n");
  CHECK(cli({"check", "--set", "held_out=[1,2,3]"}).err ==
        "E-KNOB-010: --set gives the knob 'held_out' the value '[1,2,3]', which is not a valid list\n"
        "  fix: give a list of exactly 2 items written [a,b] or a,b, each item a whole number from -9223372036854775808 to "
        "9223372036854775807, e.g. --set held_out=[1,1]\n");
  CHECK(cli({"check", "--set", "held_out=[1,x]"}).err.rfind("E-KNOB-010: --set gives the knob 'held_out' the value '[1,x]'", 0) == 0);
  CHECK(cli({"check", "--set", "held_out=[1,2"}).err.rfind("E-KNOB-010", 0) == 0);
}

TEST_CASE("selection errors end the command with exit 2 and the coded message on stderr") {
  auto r = cli({"run", "--set", "lrr=0.1"});
  CHECK(r.rc == 2);
  CHECK(r.err ==
        "E-KNOB-005: --set names 'lrr', which the experiment does not declare; did you mean 'lr'?\n"
        "  fix: set one of its knobs: lr, width, smoothing, max_epochs, n_samples, log_every_n_steps, rule, held_out, seed (see `variants`)\n");
  CHECK(cli({"check", "--set", "width=32"}).err.rfind("E-KNOB-011: --set asks for width=32", 0) == 0);
  CHECK(cli({"explain", "--variant", "narrow"}).err.rfind("E-KNOB-004: --variant names 'narrow'", 0) == 0);
  CHECK(cli({"sweep", "width"}).err.rfind("E-KNOB-012: `sweep` names 'width', which the experiment does not declare; did you mean 'widths'?", 0) == 0);
  auto missing = cli({"watch", "--run-dir", tmp_dir("cli/empty"), "nothing"});
  CHECK(missing.rc == 3);
  CHECK(missing.err.rfind("E-CLI-004: no run called 'nothing'", 0) == 0);
}

TEST_CASE("check binds and runs one batch of each split, writing nothing; ir shows the program") {
  auto listing = [] {
    std::vector<std::string> names;
    for (auto const& e : std::filesystem::directory_iterator(std::filesystem::current_path())) names.push_back(e.path().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const auto before = listing();
  auto r = cli({"check", "--variant", "wide"});  // Tiny<16> gives its own checkpointer: no run folder is made for it
  INFO(r.err);
  CHECK(r.rc == 0);
  CHECK(r.out.find("check Tiny<width=16>: the hooks bind\n") == 0);
  CHECK(r.out.find("  hooks      forward(x)  loss(y)  metrics(y)\n") != std::string::npos);
  CHECK(r.out.find("  train      one batch of 16: outputs [2, 16]") != std::string::npos);
  CHECK(r.out.find("nothing was written") != std::string::npos);
  CHECK(listing() == before);  // nothing was written where it ran
  auto ir = cli({"ir", "--variant", "wide"});
  CHECK(ir.out.find("  layer_1.weight  [16, 4]  64  offset 0\n") != std::string::npos);
  CHECK(ir.out.find("  layer_1  forward   gemm<float> [16 x 4] . [4 x B] + bias + relu (one pass)\n") != std::string::npos);
  CHECK(ir.out.find("  x  float tensor  transferred  declared by forward\n") != std::string::npos);
}

TEST_CASE("check and eval write nothing, with an experiment that gives its own checkpointer") {
  const std::string dir = tmp_dir("cli/read_only");
  auto run = cli({"run", "--variant", "wide", "--set", "max_epochs=1", "--set", "n_samples=64", "--run-dir", dir, "--id", "w", "--quiet"});
  INFO(run.err);
  REQUIRE(run.rc == 0);
  // a working directory of its own: a handle's default run_dir ("runs") is relative to it
  struct in_dir {
    std::filesystem::path was = std::filesystem::current_path();
    explicit in_dir(std::filesystem::path const& p) { std::filesystem::current_path(p); }
    ~in_dir() { std::filesystem::current_path(was); }
  };
  const std::filesystem::path here = tmp_dir("cli/read_only_cwd");
  const in_dir cd(here);
  auto tree = [&] {
    std::vector<std::string> names;
    for (auto const& root : {std::filesystem::path(dir), here})
      for (auto const& e : std::filesystem::recursive_directory_iterator(root))
        names.push_back(e.path().string() + " " + std::to_string(e.is_regular_file() ? e.file_size() : 0));
    std::sort(names.begin(), names.end());
    return names;
  };
  // the experiment's checkpointer wrote the run's checkpoints into its record
  auto index = nitro::checkpoint_index::load(dir + "/tiny-wide-max_epochs=1-n_samples=64-w/checkpoints");
  REQUIRE(index.latest());
  CHECK(index.latest()->step == 4);
  const auto before = tree();
  auto c = cli({"check", "--variant", "wide"});  // a handle's run_dir is "runs", under `here`
  INFO(c.err);
  CHECK(c.rc == 0);
  CHECK(c.out.find("nothing was written") != std::string::npos);
  CHECK(tree() == before);
  auto e = cli({"eval", "--run-dir", dir, "tiny-wide", "--split", "valid"});
  INFO(e.err);
  CHECK(e.rc == 0);
  CHECK(e.out.find("  valid  acc ") != std::string::npos);
  CHECK(tree() == before);
  // and a handle that only evaluates makes no run folder either, until it trains
  const auto sel = nitro::resolve_selection(App::cat(), {{"wide"}, {{"n_samples", "32"}, {"max_epochs", "1"}}});
  auto h = nitro::cli::program<Tiny<16>>::handle(App::cat(), sel, {.loggers = nitro::to_logger_set(nitro::no_loggers)});
  CHECK(h->run_directory().empty());
  CHECK(h->checkpoints() == nullptr);
  (void)h->evaluate("valid");
  CHECK(tree() == before);
  h->train(false);
  REQUIRE(h->checkpoints() != nullptr);
  CHECK(h->checkpoints()->index().latest()->step == 2);
  CHECK(std::filesystem::exists(h->run_directory() / "checkpoints"));
  std::filesystem::remove_all(h->run_directory());
}

TEST_CASE("sweep runs every point in the program compiled for it and tabulates them") {
  const std::string dir = tmp_dir("cli/sweep");
  auto r = cli({"sweep", "widths", "--variant", "quick", "--steps", "3", "--run-dir", dir, "--quiet"});
  INFO(r.err);
  CHECK(r.rc == 0);
  CHECK(r.out.find("0  Tiny<width=8>   --variant quick --set width=8   finished") != std::string::npos);
  CHECK(r.out.find("1  Tiny<width=16>  --variant quick --set width=16  finished") != std::string::npos);
  CHECK(nitro::list_runs(dir).size() == 2);
  auto s = cli({"sweep", "lrs", "--emit", "slurm", "--run-dir", dir, "-o", dir + "/lrs.slurm"});
  CHECK(s.rc == 0);
  auto script = nitro::read_record_file(dir + "/lrs.slurm");
  CHECK(script.find("#SBATCH --array=0-1\n") != std::string::npos);
  CHECK(script.find("  1) set -- '--variant' 'quick' '--set' 'lr=0.05' --id '") != std::string::npos);
}

TEST_CASE("sweep --jobs: a point that cannot start as a process is E-CLI-010, and the sweep fails") {
  const std::string dir = tmp_dir("cli/jobs");
  auto r = cli({"sweep", "widths", "--steps", "2", "--jobs", "2", "--run-dir", dir, "--quiet"});  // this binary is /nonexistent/tiny
  CHECK(r.rc == 1);
  CHECK(r.err.rfind("E-CLI-010: could not start point 0 as a process (", 0) == 0);
  CHECK(r.out.find("0  Tiny<width=8>   --set width=8   failed") != std::string::npos);
}

TEST_CASE("tar: members round-trip, long names use the prefix, damage is E-REC-002") {
  nitro::cli::tar_writer t;
  const std::string long_name = std::string(120, 'd') + "/" + std::string(90, 'f');
  t.add("a/b.txt", "hello", 0);
  t.add(long_name, std::string(1000, 'x'), 0);
  t.add("empty", "", 0);
  const std::string bytes = t.bytes();
  CHECK(bytes.size() % 512 == 0);
  auto files = nitro::cli::read_tar(bytes);
  REQUIRE(files.size() == 3);
  CHECK(files[0] == std::pair<std::string, std::string>{"a/b.txt", "hello"});
  CHECK(files[1].first == long_name);
  CHECK(files[1].second == std::string(1000, 'x'));
  CHECK(files[2].second.empty());
  std::string bad = bytes;
  bad[10] ^= 1;
  CHECK(error_text([&] { nitro::cli::read_tar(bad); }) ==
        "E-REC-002: the tar archive is damaged: a header's checksum does not match at byte 0\n  fix: write it again with `bundle`");
  CHECK(error_text([&] { nitro::cli::read_tar(bytes.substr(0, 700)); }).rfind("E-REC-002: the tar archive is damaged", 0) == 0);
  CHECK(error_text([&] { t.add(std::string(300, 'n'), "x"); }).rfind("E-REC-001", 0) == 0);
}

TEST_CASE("eval reads the checkpointer's files: another program's checkpoint, or a damaged one, is refused before anything is copied") {
  const std::string dir = tmp_dir("cli/weights");
  auto r = cli({"run", "--variant", "quick", "--run-dir", dir, "--id", "w", "--quiet"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string run = dir + "/tiny-quick-w";
  auto index = nitro::checkpoint_index::load(run + "/checkpoints");
  REQUIRE(index.latest());
  const std::string latest = run + "/checkpoints/" + index.latest()->file;
  auto info = nitro::read_checkpoint_info(nitro::safetensors_file::read(latest));
  CHECK(info.step == 8);  // one epoch of 128 / 16: the end of the run is a checkpoint
  CHECK(info.selection["variant"] == "quick");
  CHECK(info.selection["program"] == "Tiny<width=8>");

  // the run's own checkpoint loads into its program; the 16-wide program refuses it, naming both shapes
  auto own = nitro::cli::program<Tiny<8>>::handle(App::cat(), nitro::resolve_selection(App::cat(), {}), {.weights = nitro::weights_ref(latest)});
  CHECK(own->param_buffer().values()[0] != 0.0f);
  CHECK(error_text([&] {
          nitro::cli::program<Tiny<16>>::handle(App::cat(), nitro::resolve_selection(App::cat(), {{}, {{"width", "16"}}}),
                                                {.weights = nitro::weights_ref(latest)});
        }).rfind("E-CKPT-012: tensor 'params.layer_1.weight' of '" + latest + "' has nitro shape [8, 4] but the model's leaf is [16, 4]", 0) == 0);

  // damaged files: coded errors naming the file, exit 3
  std::string bytes = nitro::read_record_file(latest);
  nitro::write_record_atomic(run + "/checkpoints/short.safetensors", "abc");
  auto e = cli({"eval", run + "/checkpoints/short.safetensors"});
  CHECK(e.rc == 3);
  CHECK(e.err.find("E-CKPT-002") != std::string::npos);
  nitro::write_record_atomic(run + "/checkpoints/cut.safetensors", bytes.substr(0, bytes.size() - 8));
  e = cli({"eval", run + "/checkpoints/cut.safetensors"});
  CHECK(e.rc == 3);
  CHECK(e.err.find("E-CKPT-0") != std::string::npos);
  // --weights names a checkpoint of the run, or a file
  e = cli({"eval", "--run-dir", dir, "tiny-quick-w", "--weights", "best", "--split", "valid"});
  CHECK(e.rc == 0);
  CHECK(e.out.find("(step 8)") != std::string::npos);
  e = cli({"eval", "--run-dir", dir, "tiny-quick-w", "--weights", "nonsense"});
  CHECK(e.rc == 3);
  CHECK(e.err.rfind("E-REC-002: --weights nonsense names no checkpoint", 0) == 0);
}

// The bytes of the parameters and the optimizer's state in a run's latest checkpoint.
inline std::map<std::string, std::string> latest_params(std::string const& run) {
  auto index = nitro::checkpoint_index::load(run + "/checkpoints");
  REQUIRE(index.latest());
  auto f = nitro::safetensors_file::read(std::filesystem::path(run) / "checkpoints" / index.latest()->file);
  std::map<std::string, std::string> out;
  for (auto const& e : f.entries())
    if (e.name.rfind("params.", 0) == 0 || e.name.rfind("optim.", 0) == 0)
      out[e.name] = std::string(reinterpret_cast<char const*>(e.bytes.data()), e.bytes.size());
  return out;
}

TEST_CASE("run --resume continues a run exactly; --weights takes the grammar, averages included") {
  const std::string dir = tmp_dir("cli/resume");
  const std::vector<std::string> sel = {"--variant", "quick", "--set", "n_samples=96", "--eval-every", "2", "--run-dir", dir, "--quiet"};
  auto with = [&](std::vector<std::string> a) {
    a.insert(a.end(), sel.begin(), sel.end());
    return cli(a);
  };
  // A stops after 3 of the 6 steps of its epoch; R resumes it to 6; B runs the 6 steps at once
  auto a = with({"run", "--steps", "3", "--id", "a"});
  INFO(a.err);
  REQUIRE(a.rc == 0);
  auto r = cli({"run", "--resume", "tiny-quick-n_samples=96-a", "--steps", "6", "--variant", "quick", "--set", "n_samples=96", "--eval-every", "2",
                "--run-dir", dir, "--id", "r"});
  INFO(r.out, r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("  resume  run(" + dir + "/tiny-quick-n_samples=96-a) >> Last(1) at step 3\n") != std::string::npos);
  auto b = with({"run", "--steps", "6", "--id", "b"});
  REQUIRE(b.rc == 0);
  const std::string ra = dir + "/tiny-quick-n_samples=96-r", rb = dir + "/tiny-quick-n_samples=96-b";
  CHECK(nitro::read_json(ra + "/status.json")["step"] == 6);
  const auto pr = latest_params(ra), pb = latest_params(rb);
  REQUIRE(!pb.empty());
  CHECK(pr == pb);  // bit for bit

  // --weights on eval: the mean of the latest two checkpoints (steps 4 and 6)
  auto e = cli({"eval", "--run-dir", dir, "tiny-quick-n_samples=96-b", "--weights", "Average(Last(2))", "--split", "valid"});
  INFO(e.err);
  CHECK(e.rc == 0);
  CHECK(e.out.find("weights Average(Last(2)) of " + rb + " (the mean of steps 4, 6)\n") != std::string::npos);
  CHECK(e.out.find("  valid  acc") != std::string::npos);
  // ... and on run: start from it
  auto c = with({"run", "--steps", "1", "--id", "c", "--weights", "tiny-quick-n_samples=96-b >> Average(Last(2))"});
  INFO(c.err);
  CHECK(c.rc == 0);
  // mistakes are coded errors
  auto bad = cli({"eval", "--run-dir", dir, "tiny-quick-n_samples=96-b", "--weights", "Average(Last(x))"});
  CHECK(bad.rc != 0);
  CHECK(bad.err.find("E-CKPT-033") != std::string::npos);
  auto avg_resume = cli({"run", "--resume", "tiny-quick-n_samples=96-b >> Average(Last(2))", "--run-dir", dir, "--quiet"});
  CHECK(avg_resume.rc != 0);
  CHECK(avg_resume.err.find("E-CKPT-034") != std::string::npos);
}
