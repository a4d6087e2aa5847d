// nitro/cli/commands.hpp — the commands that read declarations and records only: variants, diff,
// watch (with sparkline curves), bundle, new (report is cli/report.hpp), and the pieces of sweep that need no program (Slurm scripts, the table).
//
// Each takes the catalog and what the command line said and writes to the context's streams;
// errors are nitro::error with E-CLI-* or E-REC-* codes (docs/cli.md lists the exit codes).
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/cli/args.hpp"
#include "nitro/cli/program.hpp"
#include "nitro/cli/table.hpp"
#include "nitro/cli/tar.hpp"
#include "nitro/core/error.hpp"
#include "nitro/record/weights_ref.hpp"
#include "nitro/record/weights_resolve.hpp"
#include "nitro/knobs/catalog.hpp"
#include "nitro/knobs/records.hpp"
#include "nitro/knobs/selection.hpp"

#include <algorithm>   // count, clamp
#include <cctype>      // toupper
#include <cmath>       // isfinite, lround: sparklines
#include <cerrno>      // errno after kill
#include <chrono>      // watch's clock
#include <cstdio>      // snprintf
#include <filesystem>  // files
#include <map>         // metrics
#include <optional>    // options
#include <set>         // metric columns
#include <sstream>     // texts
#include <string>      // names
#include <iostream>    // cout: is watch drawing on a terminal?
#include <thread>      // sleep_for
#include <vector>      // rows

#include <signal.h>     // kill(pid, 0): is the run's process alive?
#include <sys/types.h>  // pid_t
#include <unistd.h>     // isatty

namespace nitro::cli {

// ---- variants ---------------------------------------------------------------------------------------
// Exactly the note's layout: knobs (name, default, doc), variants (name, knob=value ...), sweeps
// (name, "N points over knob, ...").
NITRO_RUNTIME_INLINE std::string variants_text(catalog const& c);

// ---- diff -------------------------------------------------------------------------------------------
NITRO_RUNTIME_INLINE std::map<std::string, double> final_metrics(ordered_json const& status);

NITRO_RUNTIME_INLINE std::string selection_words(ordered_json const& sel);

NITRO_RUNTIME_INLINE std::string diff_text(std::string const& dir_a, std::string const& dir_b);

// ---- watch ------------------------------------------------------------------------------------------
NITRO_RUNTIME_INLINE std::string metrics_line_text(ordered_json const& j);

// Unicode block characters, one per value (the newest `width` of them), scaled between their min
// and max; a value that is not finite is a space.
NITRO_RUNTIME_INLINE std::string sparkline(std::vector<double> const& values, std::size_t width = 48);

// The monitored metric as "split/name": status.json's best, else the manifest's `monitor` keyword
// ("valid.loss (min)"), else valid/loss.
NITRO_RUNTIME_INLINE std::string monitored_metric(ordered_json const& status, ordered_json const& manifest);

// Sparklines of train/loss and the monitored metric, from the metrics lines so far.
NITRO_RUNTIME_INLINE std::string curves_text(std::vector<ordered_json> const& lines, std::string const& monitor);

NITRO_RUNTIME_INLINE bool process_alive(ordered_json const& status);

// Follows a run until it ends. Returns exit_ok when it finished, exit_failed otherwise. On a
// terminal the curves (sparklines of train/loss and the monitored metric) are redrawn below the
// lines as they come; into a file or pipe they are printed once, when the run ends.
NITRO_RUNTIME_INLINE int watch(context& ctx, std::string const& dir, double interval, std::optional<double> timeout);

// ---- bundle -----------------------------------------------------------------------------------------
// The weights `which` names in a run: latest (also "final"), best, Last(n), Best(n) (from its
// checkpoints/index.json, best by the run's monitor), Average(Last(n)) / Average(Best(n)) (their
// mean), or a file.
NITRO_RUNTIME_INLINE weights_ref weights_in_run(std::string const& run, std::string const& which);
NITRO_RUNTIME_INLINE resolved_weights weights_of(std::string const& run, std::string const& which);

NITRO_RUNTIME_INLINE int bundle(context& ctx, std::string const& run, std::string const& which, std::optional<std::string> const& out);

// ---- new --------------------------------------------------------------------------------------------
NITRO_RUNTIME_INLINE std::string camel_case(std::string const& name);

NITRO_RUNTIME_INLINE std::string new_experiment_source(std::string const& name);

NITRO_RUNTIME_INLINE int new_experiment(context& ctx, std::string const& name, std::optional<std::string> const& out, bool force);

// ---- sweep pieces -----------------------------------------------------------------------------------
NITRO_RUNTIME_INLINE std::string shell_quote(std::string const& s);

NITRO_RUNTIME_INLINE std::string slurm_script(catalog const& c, std::string const& sweep, std::string const& self, std::string const& run_dir,
                                std::vector<selection_request> const& points, std::vector<std::string> const& ids);

struct sweep_row {
  std::size_t index = 0;
  std::string program, selection, state, slug;
  std::map<std::string, double> metrics;
};

NITRO_RUNTIME_INLINE std::string sweep_table(std::vector<sweep_row> const& rows);

}  // namespace nitro::cli

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::cli {


NITRO_RUNTIME_INLINE std::string variants_text(catalog const& c) {
  std::string s = "knobs:\n";
  table k;
  for (auto const& kn : c.knobs) k.row({kn.name, kn.default_value.str(), kn.doc});
  s += k.str();
  s += "variants:\n";
  table v;
  for (auto const& va : c.variants) {
    std::string sets;
    for (auto const& [name, value] : va.sets) sets += (sets.empty() ? "" : " ") + name + "=" + value.str();
    v.row({va.name, sets});
  }
  if (c.variants.empty()) v.row({"none"});
  s += v.str();
  s += "sweeps:\n";
  table w;
  for (auto const& sw : c.sweeps) {
    std::string axes;
    for (auto const& a : sw.axes) axes += (axes.empty() ? "" : ", ") + a.knob;
    std::string what = std::to_string(sw.points()) + (sw.points() == 1 ? " point over " : " points over ") + axes;
    if (!sw.base.empty()) what += " on variant " + sw.base;
    w.row({sw.name, what});
  }
  if (c.sweeps.empty()) w.row({"none"});
  s += w.str();
  return s;
}

NITRO_RUNTIME_INLINE std::map<std::string, double> final_metrics(ordered_json const& status) {
  std::map<std::string, double> m;
  if (status.contains("last") && status["last"].is_object())
    for (auto const& [k, v] : status["last"].items())
      if (v.is_number()) m[k] = v.get<double>();
  return m;
}

NITRO_RUNTIME_INLINE std::string selection_words(ordered_json const& sel) {
  selection_request r = selection_request::from_json(sel);
  std::string s;  // appended piece by piece: g++ 12 misreads "literal" + std::string&& (-Wrestrict, GCC bug 105329)
  if (r.variant) s.append("--variant ").append(*r.variant);
  for (auto const& [k, v] : r.sets) {
    if (!s.empty()) s += ' ';
    s.append("--set ").append(k).append("=").append(v);
  }
  return s.empty() ? "the defaults" : s;
}

NITRO_RUNTIME_INLINE std::string diff_text(std::string const& dir_a, std::string const& dir_b) {
  namespace fs = std::filesystem;
  auto manifest = [](std::string const& dir) {  // valid JSON that is not an object is as damaged as text that is not JSON
    const std::string path = (fs::path(dir) / "manifest.json").string();
    ordered_json m = read_json(path);
    if (!m.is_object())
      throw error("E-REC-002", "the record " + path + " is not a JSON object (damaged)",
                  "the run's other files are still readable; rerun the run to get a complete record");
    return m;
  };
  ordered_json ma = manifest(dir_a);
  ordered_json mb = manifest(dir_b);
  ordered_json sa = fs::exists(fs::path(dir_a) / "status.json") ? read_json((fs::path(dir_a) / "status.json").string()) : ordered_json::object();
  ordered_json sb = fs::exists(fs::path(dir_b) / "status.json") ? read_json((fs::path(dir_b) / "status.json").string()) : ordered_json::object();
  auto str = [](ordered_json const& j, char const* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string("?"); };
  std::ostringstream o;
  table head;
  head.row({"", "A", "B"});
  head.row({"run", fs::path(dir_a).filename().string(), fs::path(dir_b).filename().string()});
  head.row({"program", ma.contains("program") ? str(ma["program"], "name") : "?", mb.contains("program") ? str(mb["program"], "name") : "?"});
  head.row({"selection", selection_words(ma.value("selection", ordered_json::object())), selection_words(mb.value("selection", ordered_json::object()))});
  head.row({"state", str(sa, "state"), str(sb, "state")});
  head.row({"steps", sa.contains("step") ? sa["step"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : "?", sb.contains("step") ? sb["step"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : "?"});
  o << head.str("");

  o << "knobs that differ:\n";
  table kd;
  std::vector<std::string> same;
  auto ka = ma.value("knobs", ordered_json::object()), kb = mb.value("knobs", ordered_json::object());
  auto cell = [](ordered_json const& k) {
    if (!k.is_object()) return std::string("(not a knob)");
    std::string v = k.contains("value") ? (k["value"].is_string() ? k["value"].get<std::string>() : k["value"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) : "?";
    return v + " (" + (k.contains("source") && k["source"].is_string() ? k["source"].get<std::string>() : "?") + ")";
  };
  for (auto const& [name, a] : ka.items()) {
    ordered_json b = kb.contains(name) ? kb[name] : ordered_json();
    if (b.is_object() && a.contains("value") && b.contains("value") && a["value"] == b["value"]) {
      same.push_back(name + "=" + (a["value"].is_string() ? a["value"].get<std::string>() : a["value"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    } else {
      kd.row({name, cell(a), cell(b)});
    }
  }
  for (auto const& [name, b] : kb.items())
    if (!ka.contains(name)) kd.row({name, cell(ordered_json()), cell(b)});
  if (kd.empty()) kd.row({"none"});
  o << kd.str();
  if (!same.empty()) {
    std::string s;
    for (auto const& x : same) s += (s.empty() ? "" : ", ") + x;
    o << "same in both: " << s << "\n";
  }

  o << "final metrics:\n";
  auto fa = final_metrics(sa), fb = final_metrics(sb);
  std::set<std::string> names;
  for (auto const& [k, v] : fa) names.insert(k);
  for (auto const& [k, v] : fb) names.insert(k);
  table mt;
  for (auto const& n : names) {
    std::string a = fa.count(n) ? metric_text(fa[n]) : "-", b = fb.count(n) ? metric_text(fb[n]) : "-";
    std::string d;
    if (fa.count(n) && fb.count(n)) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%+.4f", fb[n] - fa[n]);
      d = buf;
    }
    mt.row({n, a, b, d});
  }
  if (names.empty()) mt.row({"none recorded"});
  o << mt.str();
  return o.str();
}

NITRO_RUNTIME_INLINE std::string metrics_line_text(ordered_json const& j) {
  std::string type = text_field(j, "type", "");
  auto num = [](ordered_json const& v) { return v.is_number_integer() ? v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : metric_text(v.get<double>()); };
  std::string s;
  if (type == "metadata") return "watching " + text_field(j, "slug", "?") + "  program " + text_field(j, "program", "?");
  if (type == "end") return "end: " + text_field(j, "status", "?") + " at step " + (j.contains("step") ? j["step"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : "?");
  if (type == "metrics") s = text_field(j, "split", "?");  // the trainer's lines: one per logged step or evaluation
  else s = type;
  for (auto const& [k, v] : j.items()) {
    if (k == "type" || k == "split" || k == "wall_time" || !v.is_number()) continue;
    s += "  " + k + " " + num(v);
  }
  return s;
}

NITRO_RUNTIME_INLINE std::string sparkline(std::vector<double> const& values, std::size_t width) {
  static char const* const bars[] = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
  const std::size_t from = values.size() > width ? values.size() - width : 0;
  double lo = 0, hi = 0;
  bool any = false;
  for (std::size_t i = from; i < values.size(); ++i)
    if (std::isfinite(values[i])) {
      lo = any ? std::min(lo, values[i]) : values[i];
      hi = any ? std::max(hi, values[i]) : values[i];
      any = true;
    }
  std::string s;
  for (std::size_t i = from; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) { s += ' '; continue; }
    const int k = hi > lo ? static_cast<int>(std::lround((values[i] - lo) / (hi - lo) * 7)) : 3;
    s += bars[std::clamp(k, 0, 7)];
  }
  return s;
}

NITRO_RUNTIME_INLINE std::string monitored_metric(ordered_json const& status, ordered_json const& manifest) {
  if (status.contains("best") && status["best"].is_object() && status["best"].contains("metric") && status["best"]["metric"].is_string())
    return status["best"]["metric"].get<std::string>();
  if (manifest.contains("run_keywords") && manifest["run_keywords"].contains("monitor") && manifest["run_keywords"]["monitor"].contains("value") &&
      manifest["run_keywords"]["monitor"]["value"].is_string()) {
    std::string m = manifest["run_keywords"]["monitor"]["value"].get<std::string>();
    m = m.substr(0, m.find(' '));
    if (auto dot = m.find('.'); dot != std::string::npos) m[dot] = '/';
    if (!m.empty() && m != "none") return m;
  }
  return "valid/loss";
}

NITRO_RUNTIME_INLINE std::string curves_text(std::vector<ordered_json> const& lines, std::string const& monitor) {
  std::string s;
  std::vector<std::string> names = {"train/loss"};
  if (monitor != "train/loss") names.push_back(monitor);
  std::size_t w = 0;
  for (auto const& n : names) w = std::max(w, n.size());
  for (auto const& n : names) {
    const auto slash = n.find('/');
    const std::string split = n.substr(0, slash), metric = slash == std::string::npos ? n : n.substr(slash + 1);
    std::vector<double> v;
    for (auto const& j : lines) {
      if (text_field(j, "type", "") != "metrics" || text_field(j, "split", "") != split || !j.contains(metric)) continue;
      v.push_back(j[metric].is_number() ? j[metric].get<double>() : std::nan(""));
    }
    if (v.empty()) continue;
    s += "  " + n + std::string(w + 2 - n.size(), ' ') + sparkline(v) + "  " + metric_text(v.back()) + (n == monitor ? "  (monitor)" : "") + "\n";
  }
  return s.empty() ? s : "curves:\n" + s;
}

NITRO_RUNTIME_INLINE bool process_alive(ordered_json const& status) {
  if (!status.contains("pid") || !status["pid"].is_number_integer()) return false;
  if (status.contains("host") && status["host"].is_string() && status["host"].get<std::string>() != host_name()) return true;  // cannot tell
  const long pid = status["pid"].get<long>();
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

NITRO_RUNTIME_INLINE int watch(context& ctx, std::string const& dir, double interval, std::optional<double> timeout) {
  namespace fs = std::filesystem;
  const std::string metrics = (fs::path(dir) / "metrics.jsonl").string();
  const std::string status_path = (fs::path(dir) / "status.json").string();
  const ordered_json manifest = fs::exists(fs::path(dir) / "manifest.json") ? read_json((fs::path(dir) / "manifest.json").string()) : ordered_json::object();
  const bool live = &ctx.out == &std::cout && ::isatty(STDOUT_FILENO);
  std::size_t shown = 0, drawn_lines = 0;
  std::vector<ordered_json> lines;
  const auto t0 = std::chrono::steady_clock::now();
  auto last_change = t0;
  std::string last_heartbeat;
  for (;;) {
    ordered_json st = fs::exists(status_path) ? read_json(status_path) : ordered_json::object();
    if (fs::exists(metrics)) {
      lines = read_jsonl(metrics);
      if (shown < lines.size()) {
        if (live && drawn_lines) ctx.out << "\x1b[" << drawn_lines << "A\x1b[J";  // erase the curves drawn last time
        for (; shown < lines.size(); ++shown) ctx.out << metrics_line_text(lines[shown]) << "\n";
        if (live) {
          const std::string c = curves_text(lines, monitored_metric(st, manifest));
          drawn_lines = static_cast<std::size_t>(std::count(c.begin(), c.end(), '\n'));
          ctx.out << c;
        }
      }
      ctx.out.flush();
    }
    const std::string state = text_field(st, "state", "running");
    if (state != "running") {
      if (!live) ctx.out << curves_text(lines, monitored_metric(st, manifest));
      std::string line = "state: " + state + "  step " + (st.contains("step") ? st["step"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : "?");
      for (auto const& [k, v] : final_metrics(st)) line += "  " + k + " " + metric_text(v);
      ctx.out << line << "\n";
      if (st.contains("error") && st["error"].is_string()) ctx.out << st["error"].get<std::string>() << "\n";
      return state == "finished" ? exit_ok : exit_failed;
    }
    const auto now = std::chrono::steady_clock::now();
    const std::string hb = text_field(st, "heartbeat", "");
    if (hb != last_heartbeat) { last_heartbeat = hb; last_change = now; }
    const double quiet_for = std::chrono::duration<double>(now - last_change).count();
    if (quiet_for > std::max(30.0, 20 * interval) && !process_alive(st)) {
      ctx.out << "state: lost  the run's process is gone and its status has not changed for " << static_cast<long>(quiet_for)
              << " s (last step " << (st.contains("step") ? st["step"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : "?") << ")\n";
      return exit_failed;
    }
    if (timeout && std::chrono::duration<double>(now - t0).count() > *timeout) {
      ctx.out << "state: running  still running after " << metric_text(*timeout) << " s (--timeout)\n";
      return exit_failed;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
  }
}

NITRO_RUNTIME_INLINE weights_ref weights_in_run(std::string const& run, std::string const& which) {
  namespace fs = std::filesystem;
  std::error_code ec;  // text that cannot be a path (a name too long) is not a file: it is read as a checkpoint
  if (fs::is_regular_file(which, ec)) return weights_ref(fs::path(which));
  weights_ref r = weights_ref::from_text(which == "final" ? std::string("latest") : which);
  if (r.which() == weights_ref::kind::path)
    throw error("E-REC-002", "--weights " + which + " names no checkpoint of the run " + run + " and no file",
                "give latest, best, Last(n), Best(n), Average(Last(n)), Average(Best(n)), or the path of a .safetensors file");
  if (r.run().k != run_pick::kind::unspecified)
    throw error("E-CLI-002", "--weights " + which + " names a run of its own, but the command already names the run " + run,
                "give only the checkpoint part (e.g. --weights \"Average(Last(10))\"); the run is the command's argument");
  return r.in_run_directory(run);
}

NITRO_RUNTIME_INLINE resolved_weights weights_of(std::string const& run, std::string const& which) {
  return resolve(weights_in_run(run, which), {.runs_dir = std::filesystem::path(run).parent_path()});
}

NITRO_RUNTIME_INLINE int bundle(context& ctx, std::string const& run, std::string const& which, std::optional<std::string> const& out) {
  namespace fs = std::filesystem;
  const std::string slug = fs::path(run).filename().string();
  tar_writer t;
  std::size_t files = 0;
  for (char const* name : {"manifest.json", "status.json", "binding_report.txt", "metrics.jsonl"}) {
    const std::string p = (fs::path(run) / name).string();
    if (!fs::exists(p)) {
      if (std::string(name) == "manifest.json") throw error("E-REC-002", "the run " + run + " has no manifest.json", "name a run folder");
      continue;
    }
    t.add(slug + "/" + name, read_record_file(p));
    ++files;
  }
  const resolved_weights w = weights_of(run, which);
  if (w.average)
    throw error("E-CLI-002", "bundle carries one checkpoint file, and --weights " + which + " names the mean of " + std::to_string(w.checkpoints.size()),
                "bundle one checkpoint (latest, best, Last(n), Best(n)); averages are for eval and run --weights");
  t.add(slug + "/weights.safetensors", read_record_file(w.checkpoints.at(0).file.string()));
  ++files;
  const std::string path = out ? *out : slug + ".tar";
  t.write(path);
  ctx.out << "bundle " << path << ": " << files << " files from " << run << " (weights: " << which << ")\n";
  return exit_ok;
}

NITRO_RUNTIME_INLINE std::string camel_case(std::string const& name) {
  std::string s;
  bool up = true;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) { up = true; continue; }
    s += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "Experiment" + s;
  return s;
}

NITRO_RUNTIME_INLINE std::string new_experiment_source(std::string const& name) {
  const std::string type = camel_case(name);
  std::string src = R"nitro(// @NAME@ — a nitro experiment: knobs, variants and sweeps declared in the struct, the
// command line from nitro::main. Build it like the examples (every examples/*.cpp is a binary), then
//   ./@NAME@ variants                    what it may vary
//   ./@NAME@ run --variant smoke         a quick run, recorded under runs/
//   ./@NAME@ sweep widths                one run per compiled width
#include <nitro/main.hpp>

namespace @NAME_ID@ {

struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };

template <int Width = 128>
struct @TYPE@ {
  nitro::GraphConst<int, Width> width;      // compiled in: each value is a program
  nitro::Device<float> smoothing{0.05f};    // label smoothing, changed without recompiling
  float lr = 1e-3f;                         // the base learning rate
  int max_epochs = 3;                       // a run keyword read from a field
  std::int64_t batch_size = 128;
  std::int64_t train_limit = 0;             // 0: every training image

  static constexpr auto knobs() {
    return nitro::knobs(nitro::knob<"lr">("base learning rate"), nitro::knob<"width">("hidden width (compiled in)"),
                        nitro::knob<"smoothing">("label smoothing"), nitro::knob<"max_epochs">("epochs to train"),
                        nitro::knob<"batch_size">("samples per batch"), nitro::knob<"train_limit">("training images kept (0: all)"));
  }
  static constexpr auto variants() {
    return nitro::variants(nitro::variant<"smoke">(nitro::set<"max_epochs">(1), nitro::set<"train_limit">(2000)));
  }
  static constexpr auto sweeps() {
    return nitro::sweeps(nitro::sweep<"seeds">(nitro::axis<"seed">(1, 2, 3)), nitro::sweep<"widths">(nitro::axis<"width">(128, 256)));
  }

  // Built after the selection, so it sees the selected train_limit.
  auto build_data() const { return nitro::data::fashion_mnist({.train_limit = train_limit}); }
  auto build_model() const {
    constexpr int W = decltype(width)::value;
    return nitro::nn::chain(nitro::nn::dense<784, W>(nitro::nn::relu), nitro::nn::dense<W, 10>());
  }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label, smoothing); }
  auto metrics(nitro::Tensor const& logits, LossIn const& in) const {
    return Metrics{.acc = {nitro::nn::correct(logits, in.label), double(in.label.batch())}};  // the count stays where the logits are
  }
};
NITRO_EXPERIMENT(@TYPE@, width, smoothing, lr, max_epochs, batch_size, train_limit);

}  // namespace @NAME_ID@

int main(int argc, char** argv) { return nitro::main<@NAME_ID@::@TYPE@<128>, @NAME_ID@::@TYPE@<256>>(argc, argv); }
)nitro";
  std::string id = snake_case(name);
  for (char& c : id) if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0]))) id = "x" + id;
  auto replace = [&](std::string const& from, std::string const& to) {
    for (std::size_t at = src.find(from); at != std::string::npos; at = src.find(from, at + to.size())) src.replace(at, from.size(), to);
  };
  replace("@NAME_ID@", id);
  replace("@NAME@", name);
  replace("@TYPE@", type);
  return src;
}

NITRO_RUNTIME_INLINE int new_experiment(context& ctx, std::string const& name, std::optional<std::string> const& out, bool force) {
  namespace fs = std::filesystem;
  if (name.empty() || name.find('/') != std::string::npos)
    throw error("E-CLI-002", "`new` needs a plain name, not '" + name + "'", "e.g. `new my_mlp` (and --out DIR/my_mlp.cpp for another folder)");
  const std::string path = out ? *out : name + ".cpp";
  if (fs::exists(path) && !force) throw error("E-CLI-009", "`new` would overwrite " + path, "choose another name or --out, or add --force");
  write_record_atomic(path, new_experiment_source(name));
  ctx.out << "new " << path << ": the experiment " << camel_case(name) << " with knobs, a variant `smoke` and sweeps `seeds` and `widths`\n";
  return exit_ok;
}

NITRO_RUNTIME_INLINE std::string shell_quote(std::string const& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

NITRO_RUNTIME_INLINE std::string slurm_script(catalog const& c, std::string const& sweep, std::string const& self, std::string const& run_dir,
                                std::vector<selection_request> const& points, std::vector<std::string> const& ids) {
  std::ostringstream o;
  o << "#!/bin/bash\n";
  o << "# nitro sweep '" << sweep << "' of " << c.experiment << ": " << points.size() << " points, one per array task.\n";
  o << "# Submit it with sbatch; each task runs one point with `run`, recorded under the run folder below.\n";
  o << "#SBATCH --job-name=" << snake_case(c.experiment) << "-" << sweep << "\n";
  o << "#SBATCH --array=0-" << (points.empty() ? 0 : points.size() - 1) << "\n";
  o << "#SBATCH --output=" << run_dir << "/slurm-%A_%a.out\n";
  o << "set -euo pipefail\n";
  o << "case \"${SLURM_ARRAY_TASK_ID:?this script runs as a Slurm array task}\" in\n";
  for (std::size_t i = 0; i < points.size(); ++i) {
    std::string args;
    for (auto const& a : points[i].to_args()) {
      args += ' ';
      args += shell_quote(a);
    }
    o << "  " << i << ") set --" << args << " --id " << shell_quote(ids[i]) << " ;;\n";
  }
  o << "  *) echo \"no point $SLURM_ARRAY_TASK_ID in this sweep\" >&2; exit 2 ;;\n";
  o << "esac\n";
  o << "exec " << shell_quote(self) << " run \"$@\" --run-dir " << shell_quote(run_dir) << " --quiet\n";
  return o.str();
}

NITRO_RUNTIME_INLINE std::string sweep_table(std::vector<sweep_row> const& rows) {
  std::set<std::string> names;
  for (auto const& r : rows)
    for (auto const& [k, v] : r.metrics)
      if (k.rfind("train/", 0) != 0) names.insert(k);
  table t;
  std::vector<std::string> head = {"#", "program", "selection", "state"};
  for (auto const& n : names) head.push_back(n);
  t.row(head);
  for (auto const& r : rows) {
    std::vector<std::string> cells = {std::to_string(r.index), r.program, r.selection, r.state};
    for (auto const& n : names) cells.push_back(r.metrics.count(n) ? metric_text(r.metrics.at(n)) : "-");
    t.row(cells);
  }
  return t.str("");
}

}  // namespace nitro::cli
#endif  // !NITRO_RUNTIME_EXTERN
