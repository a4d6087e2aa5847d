// nitro/cli/args.hpp — the command line of every trainer binary: commands, options, --help.
//
//   auto a = nitro::cli::parse_args({"run", "--variant", "small", "--set", "lr=0.002"});
//   a.command == "run"; a.selection.variant == "small"; a.selection.sets[0] == {"lr", "0.002"}
//
// Each command accepts its own options (the table below); anything else is E-CLI-002 with the
// options the command does take. `--opt value` and `--opt=value` are the same. Mistakes:
//   E-CLI-001  an unknown command (did-you-mean)
//   E-CLI-002  an unknown option, a missing or malformed value, too many or too few arguments
//   E-CLI-003  --variant given twice (a selection names one variant or none)
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/core/error.hpp"
#include "nitro/knobs/detail/did_you_mean.hpp"
#include "nitro/knobs/selection.hpp"

#include <algorithm>    // max
#include <charconv>     // from_chars
#include <cstdint>      // int64_t
#include <optional>     // options
#include <string>       // arguments
#include <string_view>  // names
#include <vector>       // tables

namespace nitro::cli {

// Exit codes of every command (docs/cli.md).
inline constexpr int exit_ok = 0;        // done; for run/sweep/watch: the run(s) finished
inline constexpr int exit_failed = 1;    // a run failed, diverged or was stopped; watch saw it end so
inline constexpr int exit_usage = 2;     // a command-line or selection mistake (E-CLI-*, E-KNOB-*), or setup (E-DATA-*, E-CPU-*)
inline constexpr int exit_records = 3;   // a record could not be written or read (E-REC-*, E-CKPT-*, E-LOG-001/002, E-CLI-004)

// Errors of the run's record itself (its files could not be written or read): exit_records.
inline bool is_record_error(std::string_view code) {
  return code.starts_with("E-REC-") || code.starts_with("E-CKPT-") || code == "E-CLI-004" || code == "E-LOG-001" || code == "E-LOG-002";
}

struct option_spec {
  std::string_view name;   // "--set"
  std::string_view value;  // "KNOB=VALUE", or "" for a flag
  std::string_view help;
};

NITRO_RUNTIME_INLINE std::vector<option_spec> const& all_options();

struct command_spec {
  std::string_view name;
  std::string_view args;     // positional arguments, as shown in usage
  std::string_view summary;  // one line
  std::string_view details;  // a paragraph for --help
  std::vector<std::string_view> options;
  int min_positional = 0;
  int max_positional = 0;
  bool selection = false;    // takes --variant/--set/--steps/--eval-every/--diagnostics
};

NITRO_RUNTIME_INLINE std::vector<command_spec> const& commands();

NITRO_RUNTIME_INLINE command_spec const* find_command(std::string_view name);

struct parsed_args {
  std::string command;
  selection_request selection;
  bool has_selection = false;
  std::vector<std::string> positional;
  std::optional<std::string> run_dir, id, emit, split, weights, out, resume;
  std::optional<std::int64_t> jobs;
  std::optional<double> interval, timeout;
  std::optional<std::string> prompt;                  // sample
  std::optional<std::int64_t> tokens, top_k;
  std::optional<double> temperature;
  bool quiet = false, force = false, help = false;
};

namespace detail {
NITRO_RUNTIME_INLINE std::int64_t positive_integer(std::string_view opt, std::string_view text);
NITRO_RUNTIME_INLINE double positive_seconds(std::string_view opt, std::string_view text);
// --set device=VALUE: "cpu", or "cuda" / "cuda:N" as "cuda:N" (GPU N, 0 by default).
NITRO_RUNTIME_INLINE std::string device_choice(std::string_view text);
}  // namespace detail

// Parses the arguments after the program's name.
NITRO_RUNTIME_INLINE parsed_args parse_args(std::vector<std::string> const& args);

// --help text: the overview, or one command's usage, options and exit codes.
NITRO_RUNTIME_INLINE std::string help_text(std::string const& program, std::string const& command);

}  // namespace nitro::cli

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::cli {

NITRO_RUNTIME_INLINE std::vector<option_spec> const& all_options() {
  static const std::vector<option_spec> table = {
      {"--variant", "NAME", "start from a declared variant (once; variants do not compose)"},
      {"--set", "KNOB=VALUE", "set a declared knob; wins over the variant (repeatable; seed works everywhere; device=cpu|cuda|cuda:N picks the backend)"},
      {"--steps", "N", "train N optimizer steps instead of max_epochs epochs (an override)"},
      {"--eval-every", "N", "also evaluate the valid split every N steps (an override)"},
      {"--diagnostics", "", "log gradient and parameter norms with every train line (an override)"},
      {"--run-dir", "DIR", "where runs are recorded (default: the run_dir keyword, else runs)"},
      {"--id", "ID", "the run's id, the end of its slug (default: time and 4 hex digits)"},
      {"--quiet", "", "print only the result"},
      {"--jobs", "N", "run N points at once, each as its own process"},
      {"--emit", "slurm", "write a Slurm job-array script for the points instead of running them"},
      {"--split", "NAME", "the split to evaluate (default: test)"},
      {"--weights", "REF", "which weights: latest, best, Last(n), Best(n), Average(Last(n)), Average(Best(n)) (run: RUN >> ...), or a file"},
      {"--resume", "RUN", "continue RUN (a folder, slug or latest; RUN >> best etc. picks the checkpoint) exactly where it stopped"},
      {"--out", "PATH", "where to write the output file (-o)"},
      {"--interval", "SECONDS", "how often to look at the run (default: 1)"},
      {"--timeout", "SECONDS", "give up after this long (default: never)"},
      {"--force", "", "overwrite an existing file"},
      {"--prompt", "TEXT", "the text generation starts from (default: a newline)"},
      {"--tokens", "N", "bytes to generate (default: 300)"},
      {"--temperature", "T", "divides the logits before drawing; below 1 sharpens (default: 0.8)"},
      {"--top-k", "K", "draw among the K likeliest bytes (default: 40; 0: all)"},
      {"--help", "", "show this help (-h)"},
  };
  return table;
}

NITRO_RUNTIME_INLINE std::vector<command_spec> const& commands() {
  static const std::vector<command_spec> table = {
      {"run", "", "train the selected point and record it under <run-dir>/<slug>/",
       "Builds the experiment with the selected knob values (before any hook reads one), trains it, and records "
       "manifest.json, status.json, metrics.jsonl, binding_report.txt and checkpoints/ under <run-dir>/<slug>/. "
       "--resume RUN continues a stopped or killed run exactly from its latest checkpoint (RUN >> best, RUN >> Last(2), "
       "or a checkpoint file pick another), recorded as a new run with the old run's selection; --weights REF starts "
       "from weights: a file, RUN >> best, or an average such as \"latest >> Average(Last(10))\".",
       {"--run-dir", "--id", "--quiet", "--resume", "--weights"}, 0, 0, true},
      {"sweep", "NAME", "run every point of a declared sweep and print a table of them",
       "Points are the cross product of the sweep's axes, the last axis varying fastest, each on the sweep's base "
       "variant. Each point runs in the program compiled for its GraphConst values. --jobs N runs N points at once "
       "as separate processes; --emit slurm writes a job-array script instead of running.",
       {"--run-dir", "--jobs", "--emit", "--out", "--quiet"}, 1, 1, true},
      {"variants", "", "list the knobs, variants and sweeps the experiment declares", "", {}, 0, 0, false},
      {"check", "", "bind everything, run one forward and loss on one batch of each split; write nothing",
       "Builds the selected program and its data, takes the first batch of every split, and runs forward, loss and "
       "metrics on it. Nothing is trained and nothing is written.",
       {}, 0, 0, true},
      {"explain", "", "show each knob and run keyword: value, source, doc",
       "Sources: default, variant, set, override (knobs); keyword, accessor, field, default (run keywords).", {}, 0, 0, true},
      {"diff", "[RUN] [RUN]", "compare two runs: selection and final metrics",
       "A RUN is a run folder, a slug (or its unique start) under --run-dir, or `latest`. With selection flags, the "
       "newest run made with that selection stands in for a missing RUN.",
       {"--run-dir"}, 0, 2, true},
      {"watch", "[RUN]", "follow a running run from its status and metrics files until it ends",
       "Prints each new metrics line and the state, and the curves of train/loss and the monitored metric as "
       "sparklines (redrawn as the run writes on a terminal; once, at the end, into a file or pipe); ends when the "
       "run does (exit 0 if it finished). A run whose "
       "heartbeat stops while its process is gone is reported as lost (exit 1).",
       {"--run-dir", "--interval", "--timeout"}, 0, 1, true},
      {"ir", "", "show the compiled program: layers and shapes, kernels, groups, transferred batch fields", "", {}, 0, 0, true},
      {"bundle", "[RUN]", "write a tar of a run's manifest, binding report, metrics and chosen weights",
       "The tar holds <slug>/manifest.json, status.json, binding_report.txt, metrics.jsonl and weights.safetensors "
       "(--weights latest or best, from the run's checkpoints/index.json). Default output: <slug>.tar in the current folder.",
       {"--run-dir", "--weights", "--out"}, 0, 1, true},
      {"eval", "RUN|CHECKPOINT", "evaluate a run's weights on a split",
       "Rebuilds the run's program with its recorded selection, loads its weights (--weights latest, best or a "
       "file; a checkpoint named as RUN is its own), and prints the split's metrics.",
       {"--run-dir", "--split", "--weights"}, 1, 1, false},
      {"sample", "[RUN]", "generate text from a run's weights (a language model whose forward takes nitro::data::tokens_in)",
       "Rebuilds the run's program with its recorded selection, loads its weights (--weights latest, best, an average "
       "or a file; RUN >> best picks in RUN), feeds --prompt through the model once and then draws --tokens bytes one at "
       "a time, each from the last logits divided by --temperature and cut to the --top-k likeliest, printing them as they "
       "come. Attention keeps the keys and values of what came before (a KV cache), so a byte costs one token of work. "
       "The draws are seeded by the run's seed: one run, one prompt, one text.",
       {"--run-dir", "--weights", "--prompt", "--tokens", "--temperature", "--top-k"}, 0, 1, false},
      {"report", "[RUN|SWEEP]", "write one self-contained HTML page of a run or a sweep: curves, schedules, confusion matrix",
       "Reads the run's records only (manifest.json, status.json, metrics.jsonl, binding_report.txt), so it works on a "
       "finished, a crashed or a running run: every logged metric and scheduled value against steps, samples/s, a "
       "heatmap of each [C, C] tensor metric, the selection with sources and the binding report. A SWEEP is a sweep's "
       "summary (sweep-NAME-ID.json) or its name (the newest under --run-dir): the points' final metrics side by side "
       "and their curves overlaid. The page needs no network (inline SVG and CSS). Default output: <slug>.html in the "
       "current folder; nothing is written into the run folder.",
       {"--run-dir", "--out"}, 0, 1, true},
      {"new", "NAME", "write a new experiment source file from a template",
       "Writes NAME.cpp (or --out PATH): an experiment with knobs, variants, a sweep and main, ready to build. Change "
       "a knob with --set or a variant; copy the file with `new` only when the change is not a knob.",
       {"--out", "--force"}, 1, 1, false},
  };
  return table;
}

NITRO_RUNTIME_INLINE command_spec const* find_command(std::string_view name) {
  for (auto const& c : commands()) if (c.name == name) return &c;
  return nullptr;
}

}  // namespace nitro::cli

namespace nitro::cli::detail {

NITRO_RUNTIME_INLINE std::int64_t positive_integer(std::string_view opt, std::string_view text) {
  std::int64_t v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc{} || r.ptr != text.data() + text.size() || v <= 0)
    throw error("E-CLI-002", std::string(opt) + " takes a whole number of at least 1, not '" + std::string(text) + "'",
                "e.g. " + std::string(opt) + " 100");
  return v;
}

NITRO_RUNTIME_INLINE std::string device_choice(std::string_view text) {
  if (text == "cpu") return "cpu";
  if (text == "cuda") return "cuda:0";
  int n = -1;
  if (text.rfind("cuda:", 0) == 0) {
    auto r = std::from_chars(text.data() + 5, text.data() + text.size(), n);
    if (r.ec != std::errc{} || r.ptr != text.data() + text.size() || text.size() == 5) n = -1;
  }
  if (n < 0)
    throw error("E-CLI-002", "--set device takes cpu, cuda or cuda:N (the GPU's index), not '" + std::string(text) + "'",
                "e.g. --set device=cuda");
  return "cuda:" + std::to_string(n);
}

NITRO_RUNTIME_INLINE double positive_seconds(std::string_view opt, std::string_view text) {
  double v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc{} || r.ptr != text.data() + text.size() || !(v > 0) || v > 1e9)
    throw error("E-CLI-002", std::string(opt) + " takes a number of seconds above 0, not '" + std::string(text) + "'",
                "e.g. " + std::string(opt) + " 0.5");
  return v;
}

}  // namespace nitro::cli::detail

namespace nitro::cli {

NITRO_RUNTIME_INLINE parsed_args parse_args(std::vector<std::string> const& args) {
  parsed_args a;
  if (args.empty()) { a.help = true; return a; }
  std::size_t i = 0;
  const std::string& first = args[0];
  if (first == "--help" || first == "-h" || first == "help") {
    a.help = true;
    if (args.size() > 1) {
      if (!find_command(args[1])) {
        std::vector<std::string> names;
        for (auto const& c : commands()) names.emplace_back(c.name);
        std::string near = nitro::detail::did_you_mean(args[1], names);
        throw error("E-CLI-001", "there is no command '" + args[1] + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?"),
                    "commands: " + nitro::detail::join_names(names));
      }
      a.command = args[1];
    }
    return a;
  }
  command_spec const* cmd = find_command(first);
  if (!cmd) {
    std::vector<std::string> names;
    for (auto const& c : commands()) names.emplace_back(c.name);
    std::string near = nitro::detail::did_you_mean(first, names);
    throw error("E-CLI-001",
                "there is no command '" + first + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?"),
                "commands: " + nitro::detail::join_names(names) + " (--help lists them)");
  }
  a.command = first;
  ++i;

  auto accepts = [&](std::string_view opt) {
    if (opt == "--help") return true;
    if (cmd->selection && (opt == "--variant" || opt == "--set" || opt == "--steps" || opt == "--eval-every" || opt == "--diagnostics"))
      return true;
    for (auto o : cmd->options) if (o == opt) return true;
    return false;
  };
  auto accepted_list = [&] {
    std::vector<std::string> names;
    if (cmd->selection) for (auto o : {"--variant", "--set", "--steps", "--eval-every", "--diagnostics"}) names.emplace_back(o);
    for (auto o : cmd->options) names.emplace_back(o);
    names.emplace_back("--help");
    return names;
  };

  bool only_positional = false;
  for (; i < args.size(); ++i) {
    std::string arg = args[i];
    if (only_positional || arg.empty() || arg[0] != '-' || arg == "-") {
      a.positional.push_back(arg);
      continue;
    }
    if (arg == "--") { only_positional = true; continue; }
    if (arg == "-h") arg = "--help";
    if (arg == "-o") arg = "--out";
    std::string value;
    bool has_value = false;
    if (auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    option_spec const* spec = nullptr;
    for (auto const& o : all_options()) if (o.name == arg) spec = &o;
    if (!spec || !accepts(arg)) {
      auto names = accepted_list();
      std::string near = nitro::detail::did_you_mean(arg, names);
      throw error("E-CLI-002",
                  "`" + a.command + "` does not take the option '" + arg + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?"),
                  "`" + a.command + "` takes: " + nitro::detail::join_names(names));
    }
    if (spec->value.empty()) {
      if (has_value) throw error("E-CLI-002", arg + " is a flag and takes no value ('" + arg + "=" + value + "')", "write " + arg + " alone");
    } else if (!has_value) {
      if (i + 1 >= args.size())
        throw error("E-CLI-002", arg + " needs a value (" + std::string(spec->value) + ")", "write " + arg + " " + std::string(spec->value));
      value = args[++i];
      has_value = true;
    }

    if (arg == "--help") a.help = true;
    else if (arg == "--variant") {
      if (a.selection.variant)
        throw error("E-CLI-003", "--variant is given twice ('" + *a.selection.variant + "' and '" + value + "')",
                    "name one variant: variants do not compose (add --set for the knobs that differ)");
      if (value.empty()) throw error("E-CLI-002", "--variant needs a variant's name", "write --variant NAME (see `variants`)");
      a.selection.variant = value;
      a.has_selection = true;
    } else if (arg == "--set") {
      auto eq = value.find('=');
      if (eq == std::string::npos || eq == 0)
        throw error("E-CLI-002", "--set takes KNOB=VALUE, not '" + value + "'", "e.g. --set lr=0.002");
      if (value.substr(0, eq) == "device") {  // the backend: an override every trainer takes, not a knob
        if (a.selection.device)
          throw error("E-KNOB-013", "device is set twice ('" + *a.selection.device + "' and '" + value.substr(eq + 1) + "')", "set it once");
        a.selection.device = detail::device_choice(value.substr(eq + 1));
      } else {
        a.selection.sets.emplace_back(value.substr(0, eq), value.substr(eq + 1));
      }
      a.has_selection = true;
    } else if (arg == "--steps") {
      a.selection.steps = detail::positive_integer(arg, value);
      a.has_selection = true;
    } else if (arg == "--eval-every") {
      a.selection.eval_every = detail::positive_integer(arg, value);
      a.has_selection = true;
    } else if (arg == "--diagnostics") {
      a.selection.diagnostics = true;
      a.has_selection = true;
    } else if (arg == "--run-dir") a.run_dir = value;
    else if (arg == "--id") {
      if (value.empty() || value.find('/') != std::string::npos || value == "." || value == "..")
        throw error("E-CLI-002", "--id '" + value + "' cannot end a folder name", "use letters, digits, '-', '_' and '.'");
      a.id = value;
    } else if (arg == "--quiet") a.quiet = true;
    else if (arg == "--jobs") a.jobs = detail::positive_integer(arg, value);
    else if (arg == "--emit") {
      if (value != "slurm") throw error("E-CLI-002", "--emit knows 'slurm', not '" + value + "'", "write --emit slurm");
      a.emit = value;
    } else if (arg == "--split") a.split = value;
    else if (arg == "--weights") a.weights = value;
    else if (arg == "--resume") a.resume = value;
    else if (arg == "--out") a.out = value;
    else if (arg == "--interval") a.interval = detail::positive_seconds(arg, value);
    else if (arg == "--timeout") a.timeout = detail::positive_seconds(arg, value);
    else if (arg == "--force") a.force = true;
    else if (arg == "--prompt") a.prompt = value;
    else if (arg == "--tokens") a.tokens = detail::positive_integer(arg, value);
    else if (arg == "--top-k") {
      a.top_k = value == "0" ? 0 : detail::positive_integer(arg, value);
    } else if (arg == "--temperature") {
      double t = 0;
      auto r = std::from_chars(value.data(), value.data() + value.size(), t);
      if (r.ec != std::errc{} || r.ptr != value.data() + value.size() || !(t > 0) || t > 100)
        throw error("E-CLI-002", "--temperature takes a number above 0, not '" + value + "'", "e.g. --temperature 0.8");
      a.temperature = t;
    }
  }
  if (a.help) return a;
  const int n = static_cast<int>(a.positional.size());
  if (n < cmd->min_positional)
    throw error("E-CLI-002", "`" + a.command + "` needs " + std::string(cmd->args),
                "e.g. `" + a.command + " " + std::string(cmd->args) + "` (--help shows more)");
  if (n > cmd->max_positional)
    throw error("E-CLI-002", "`" + a.command + "` got an argument too many: '" + a.positional[static_cast<std::size_t>(cmd->max_positional)] + "'",
                cmd->max_positional == 0 ? "`" + a.command + "` takes options only (--help lists them)"
                                         : "`" + a.command + "` takes " + std::string(cmd->args));
  return a;
}

NITRO_RUNTIME_INLINE std::string help_text(std::string const& program, std::string const& command) {
  std::string s;
  if (command.empty()) {
    s += "usage: " + program + " COMMAND [OPTIONS]\n\ncommands:\n";
    std::size_t w = 0;
    for (auto const& c : commands()) w = std::max(w, c.name.size());
    for (auto const& c : commands()) s += "  " + std::string(c.name) + std::string(w + 2 - c.name.size(), ' ') + std::string(c.summary) + "\n";
    s += "\nselection (run, sweep, check, explain, diff, watch, ir, bundle, report):\n"
         "  --set KNOB=VALUE wins over --variant NAME, which wins over the declared default.\n"
         "\n" + program + " COMMAND --help shows a command's options and exit codes.\n";
    return s;
  }
  command_spec const& c = *find_command(command);
  std::vector<std::string_view> opts;
  if (c.selection) for (auto o : {"--variant", "--set", "--steps", "--eval-every", "--diagnostics"}) opts.emplace_back(o);
  for (auto o : c.options) opts.push_back(o);
  s += "usage: " + program + " " + std::string(c.name);
  if (!c.args.empty()) s += " " + std::string(c.args);
  if (!opts.empty()) s += " [OPTIONS]";
  s += "\n\n" + std::string(c.summary) + ".\n";
  if (!c.details.empty()) s += std::string(c.details) + "\n";
  opts.emplace_back("--help");
  s += "\noptions:\n";
  std::size_t w = 0;
  std::vector<std::pair<std::string, std::string_view>> rows;
  for (auto o : opts)
    for (auto const& spec : all_options())
      if (spec.name == o) {
        std::string left = std::string(spec.name) + (spec.value.empty() ? "" : " " + std::string(spec.value));
        w = std::max(w, left.size());
        rows.emplace_back(left, spec.help);
      }
  for (auto const& [l, h] : rows) s += "  " + l + std::string(w + 2 - l.size(), ' ') + std::string(h) + "\n";
  s += "\nexit codes: 0 done";
  if (c.name == "run" || c.name == "sweep" || c.name == "watch") s += " (the run finished)";
  if (c.name == "run" || c.name == "sweep" || c.name == "watch") s += ", 1 a run failed, diverged, was stopped or lost";
  s += ", 2 a mistake on the command line or in the selection, 3 a record could not be written or read.\n";
  return s;
}

}  // namespace nitro::cli
#endif  // !NITRO_RUNTIME_EXTERN
