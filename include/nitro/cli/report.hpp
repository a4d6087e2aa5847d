// nitro/cli/report.hpp — `report RUN|SWEEP`: one self-contained HTML page of a run or a sweep,
// written from the run's own records (manifest.json, status.json, metrics.jsonl, binding_report.txt).
//
//   ./fashion_mlp report latest                      -> fashion_mlp-smoke-<id>.html in the current folder
//   ./fashion_mlp report widths --out widths.html    -> the newest `sweep widths`, points side by side
//
// The page carries everything inline: CSS and SVG charts, no script, no font, no image file; a
// Content-Security-Policy meta forbids the browser any request. A run's page: every logged metric
// against steps (train and each split, log-scaled when its values span a decade), every scheduled
// value (eta, beta1, Device fields), samples/s over the run, a heatmap of each [C, C] tensor metric
// (a confusion matrix; class names when the manifest's data lists them), the selection with sources,
// the run keywords and the binding report. A sweep's page: the points' final metrics in one table
// and their curves overlaid, one colour per point, the knob values in the legend.
//
// What the records lack is said on the page, never guessed: a torn metrics.jsonl line (a crash
// mid-write) is skipped and named, a missing file is listed. What cannot make a page is a coded
// error: E-REC-007 (not a run, a sweep summary or a sweep's name), E-REC-008 (a sweep none of whose
// points left a record). It reads nitro.metrics.v1 lines and says so for any other format.
//
// Not the place for: reading TensorBoard events, or anything that needs the experiment's program
// (the report is experiment-free: nothing here is instantiated per program).
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/cli/args.hpp"
#include "nitro/cli/table.hpp"
#include "nitro/core/error.hpp"
#include "nitro/knobs/records.hpp"
#include "nitro/record/record_file.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>   // sort, min, max
#include <cmath>       // log10, pow, isfinite
#include <cstdio>      // snprintf
#include <filesystem>  // folders
#include <map>         // series by name
#include <optional>    // a record that may be missing
#include <set>         // names
#include <string>      // the page
#include <utility>     // pair
#include <vector>      // points

namespace nitro::cli {

namespace detail {

// ---- text ---------------------------------------------------------------------------------------
NITRO_RUNTIME_INLINE std::string html_escape(std::string_view s);

// A number as a reader wants it on an axis or in a table: 4 significant digits.
NITRO_RUNTIME_INLINE std::string short_number(double v);
// An axis tick: enough digits to tell neighbouring ticks apart (1873.5 beside 1874).
NITRO_RUNTIME_INLINE std::string tick_text(double v);
// SVG coordinates: one decimal is plenty at this size.
NITRO_RUNTIME_INLINE std::string coord(double v);

NITRO_RUNTIME_INLINE std::string json_text(ordered_json const& v);

NITRO_RUNTIME_INLINE char const* palette(std::size_t i);
NITRO_RUNTIME_INLINE char const* split_colour(std::string const& split, std::size_t fallback);

// ---- metrics.jsonl, read as a report reads it: every problem counted and named ----------------------
struct jsonl_read {
  std::vector<ordered_json> lines;
  std::vector<std::string> problems;  // "line 7 is cut short ...": shown on the page
};

NITRO_RUNTIME_INLINE jsonl_read read_jsonl_reporting(std::string const& path);

// ---- one run's records --------------------------------------------------------------------------
struct series {
  std::string label;               // the legend's text: a split, or a sweep point's knob values
  std::string colour;
  std::string split, metric;       // data-* attributes for readers of the page (and its tests)
  std::vector<std::pair<double, double>> points;  // (step, value), finite values only
  std::size_t not_finite = 0;      // values recorded as null (NaN, inf)
};

struct square_tensor {
  std::string split, metric;
  std::int64_t step = 0;
  std::int64_t n = 0;
  std::vector<double> values;  // (i, j) at i * n + j: row = true class, column = predicted
};

struct run_view {
  std::string dir, slug;
  ordered_json manifest, status, metadata;  // null when missing
  std::string binding;                      // binding_report.txt, empty when missing
  std::vector<ordered_json> lines;          // metrics lines (type "metrics")
  ordered_json end;                         // the end line, null when the run has not ended
  std::vector<std::string> notes;           // what is missing or damaged, said on the page
  std::set<std::string> schedule_keys;      // from the run keyword `schedules`
  std::int64_t batch_size = 0;

  std::string state() const {
    if (status.is_object() && status.contains("state") && status["state"].is_string()) return status["state"].get<std::string>();
    if (end.is_object() && end.contains("status") && end["status"].is_string()) return end["status"].get<std::string>();
    return "unknown";
  }
};

NITRO_RUNTIME_INLINE bool is_run_folder(std::filesystem::path const& p);

// A record read as the page reads it: missing or damaged is a note, not an error.
NITRO_RUNTIME_INLINE ordered_json read_json_noting(std::filesystem::path const& p, std::vector<std::string>& notes);

NITRO_RUNTIME_INLINE run_view load_run(std::string const& dir);

// Is this train field a scheduled value (eta, eta/encoder, beta1, a Device field)?
NITRO_RUNTIME_INLINE bool is_scheduled(run_view const& v, std::string const& split, std::string const& name);

NITRO_RUNTIME_INLINE bool is_line_field(std::string const& k);

// Every (split, metric) the run logged as numbers, in the order first seen; values null in JSON
// (NaN, inf) are counted, not drawn.
NITRO_RUNTIME_INLINE std::vector<series> run_series(run_view const& v);

// The last [C, C] tensor each split logged per metric ({"shape": [C, C], "data": [...]}, row-major).
NITRO_RUNTIME_INLINE std::vector<square_tensor> run_square_tensors(run_view const& v);

// Samples per second between consecutive train lines (batch_size × steps over wall time).
NITRO_RUNTIME_INLINE series throughput(run_view const& v);

// ---- SVG ----------------------------------------------------------------------------------------
NITRO_RUNTIME_INLINE std::vector<double> nice_ticks(double lo, double hi, int want = 5);

struct chart_options {
  std::string title;
  std::string x_label = "step";
  bool allow_log = true;
  int width = 460, height = 260;
};

// A line chart: one <g class="curve"> per series (a polyline, and markers when it has few points),
// axes with ticks, and a legend of the series' labels (<g class="legend-item">).
NITRO_RUNTIME_INLINE std::string svg_chart(std::vector<series> const& all, chart_options const& o);

// A C×C heatmap: <rect class="cell"> per entry, shaded by its share of the row (the true class).
NITRO_RUNTIME_INLINE std::string svg_heatmap(square_tensor const& t, std::vector<std::string> const& names);

// ---- the page -----------------------------------------------------------------------------------
NITRO_RUNTIME_INLINE std::string page_head(std::string const& title);
NITRO_RUNTIME_INLINE std::string page_tail();

NITRO_RUNTIME_INLINE std::string notes_html(std::vector<std::string> const& notes);

NITRO_RUNTIME_INLINE std::string source_table(ordered_json const& rows, bool with_doc);

NITRO_RUNTIME_INLINE std::string str_at(ordered_json const& j, std::initializer_list<char const*> path);

NITRO_RUNTIME_INLINE std::vector<std::string> class_names_of(run_view const& v);

// Charts of a run's metrics grouped by metric name (splits overlaid), then its scheduled values.
NITRO_RUNTIME_INLINE std::string run_charts(run_view const& v, std::vector<series> const& all, bool schedules);

NITRO_RUNTIME_INLINE std::string status_line(run_view const& v);

}  // namespace detail

// The HTML page of one run folder (E-REC-007 when it is not one).
NITRO_RUNTIME_INLINE std::string run_report_html(std::string const& dir);

// ---- sweeps ---------------------------------------------------------------------------------------
// A sweep's summary (<run-dir>/sweep-NAME-ID.json): `sweep` writes it when its points are done.
NITRO_RUNTIME_INLINE bool is_sweep_summary(ordered_json const& j);

NITRO_RUNTIME_INLINE std::string sweep_report_html(std::string const& summary_path);

// What `report X` names: a run folder, a sweep summary file, a run (slug, its start, latest), or a
// sweep's name (its newest summary under run_dir). The second of the pair: is it a sweep?
NITRO_RUNTIME_INLINE std::pair<std::string, bool> report_target(std::string const& run_dir, std::string const& ref);

// `report`: writes the page atomically to `out` (default: <slug>.html or <summary>.html in the
// current folder: a read-only command writes nothing into the run folder).
NITRO_RUNTIME_INLINE int report(std::ostream& out, std::string const& run_dir, std::string const& ref, std::optional<std::string> const& out_path);

}  // namespace nitro::cli

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::cli::detail {

NITRO_RUNTIME_INLINE std::string html_escape(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

NITRO_RUNTIME_INLINE std::string short_number(double v) {
  if (!std::isfinite(v)) return v != v ? "NaN" : (v > 0 ? "inf" : "-inf");
  char buf[48];
  if (v == static_cast<double>(static_cast<long long>(v)) && std::fabs(v) < 1e9) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

NITRO_RUNTIME_INLINE std::string tick_text(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

NITRO_RUNTIME_INLINE std::string coord(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

NITRO_RUNTIME_INLINE std::string json_text(ordered_json const& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return short_number(v.get<double>());
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

NITRO_RUNTIME_INLINE char const* palette(std::size_t i) {
  static char const* const colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return colours[i % 10];
}

NITRO_RUNTIME_INLINE char const* split_colour(std::string const& split, std::size_t fallback) {
  if (split == "train") return palette(0);
  if (split == "valid") return palette(1);
  if (split == "test") return palette(2);
  return palette(3 + fallback);
}

NITRO_RUNTIME_INLINE jsonl_read read_jsonl_reporting(std::string const& path) {
  jsonl_read r;
  const std::string text = read_record_file(path);
  std::size_t at = 0, number = 0;
  while (at < text.size()) {
    ++number;
    const std::size_t nl = text.find('\n', at);
    const bool complete = nl != std::string::npos;
    const std::string line = text.substr(at, complete ? nl - at : std::string::npos);
    at = complete ? nl + 1 : text.size();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ordered_json j = ordered_json::parse(line, nullptr, false);
    if (!complete) {
      r.problems.push_back("metrics.jsonl line " + std::to_string(number) + " has no newline (" + std::to_string(line.size()) +
                           " bytes): cut short by a crash, or still being written; skipped");
      continue;
    }
    if (j.is_discarded() || !j.is_object()) {
      r.problems.push_back("metrics.jsonl line " + std::to_string(number) + " is not a JSON object (torn or damaged); skipped");
      continue;
    }
    r.lines.push_back(std::move(j));
  }
  return r;
}

NITRO_RUNTIME_INLINE bool is_run_folder(std::filesystem::path const& p) {
  std::error_code ec;
  return std::filesystem::is_directory(p, ec) &&
         (std::filesystem::exists(p / "manifest.json", ec) || std::filesystem::exists(p / "metrics.jsonl", ec));
}

NITRO_RUNTIME_INLINE ordered_json read_json_noting(std::filesystem::path const& p, std::vector<std::string>& notes) {
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) {
    notes.push_back(p.filename().string() + " is missing");
    return nullptr;
  }
  ordered_json j = ordered_json::parse(read_record_file(p.string()), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    notes.push_back(p.filename().string() + " is not a JSON object (damaged or cut short); left out");
    return nullptr;
  }
  return j;
}

NITRO_RUNTIME_INLINE run_view load_run(std::string const& dir) {
  namespace fs = std::filesystem;
  const fs::path d(dir);
  if (!is_run_folder(d))
    throw error("E-REC-007", "the folder " + dir + " is not a run: it has neither manifest.json nor metrics.jsonl",
                "name a run folder (<run-dir>/<slug>), a slug or `latest`, or a sweep (its summary sweep-NAME-ID.json, or its name)");
  run_view v;
  v.dir = dir;
  v.slug = d.filename().string();
  if (v.slug.empty()) v.slug = d.parent_path().filename().string();
  v.manifest = read_json_noting(d / "manifest.json", v.notes);
  v.status = read_json_noting(d / "status.json", v.notes);
  std::error_code ec;
  if (fs::exists(d / "binding_report.txt", ec)) v.binding = read_record_file((d / "binding_report.txt").string());
  else v.notes.push_back("binding_report.txt is missing");
  if (fs::exists(d / "metrics.jsonl", ec)) {
    jsonl_read r = read_jsonl_reporting((d / "metrics.jsonl").string());
    for (auto& p : r.problems) v.notes.push_back(std::move(p));
    for (auto& j : r.lines) {
      const std::string type = text_field(j, "type", "");
      if (type == "metadata") {
        if (v.metadata.is_null()) v.metadata = j;  // a resumed run appends another: the first describes the run
        const std::string format = text_field(j, "format", "");
        if (format != "nitro.metrics.v1")
          v.notes.push_back("metrics.jsonl says format '" + format + "'; this report reads nitro.metrics.v1 and shows what it recognises");
      } else if (type == "metrics") {
        v.lines.push_back(std::move(j));
      } else if (type == "end") {
        v.end = std::move(j);
      }
    }
    if (v.metadata.is_null()) v.notes.push_back("metrics.jsonl has no metadata line (an older record, or its first line is damaged)");
  } else {
    v.notes.push_back("metrics.jsonl is missing: no curves");
  }
  if (v.manifest.is_object() && v.manifest.contains("run_keywords") && v.manifest["run_keywords"].contains("schedules")) {
    ordered_json const& s = v.manifest["run_keywords"]["schedules"];
    std::string text = s.is_object() && s.contains("value") && s["value"].is_string() ? s["value"].get<std::string>() : std::string();
    std::size_t at = 0;
    while (at <= text.size()) {
      std::size_t comma = text.find(',', at);
      std::string k = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      k.erase(0, k.find_first_not_of(' '));
      k.erase(k.find_last_not_of(' ') + 1);
      if (!k.empty() && k != "none") v.schedule_keys.insert(k);
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  if (v.metadata.is_object() && v.metadata.contains("batch_size") && v.metadata["batch_size"].is_number_integer())
    v.batch_size = v.metadata["batch_size"].get<std::int64_t>();
  return v;
}

NITRO_RUNTIME_INLINE bool is_scheduled(run_view const& v, std::string const& split, std::string const& name) {
  if (split != "train") return false;
  for (auto const& k : v.schedule_keys)
    if (name == k || (name.size() > k.size() && name.compare(0, k.size(), k) == 0 && std::string("/.:@[").find(name[k.size()]) != std::string::npos))
      return true;
  return false;
}

NITRO_RUNTIME_INLINE bool is_line_field(std::string const& k) { return k == "type" || k == "split" || k == "step" || k == "epoch" || k == "wall_time"; }

NITRO_RUNTIME_INLINE std::vector<series> run_series(run_view const& v) {
  std::vector<series> out;
  std::map<std::pair<std::string, std::string>, std::size_t> at;
  std::map<std::string, std::size_t> split_index;
  for (auto const& j : v.lines) {
    const std::string split = text_field(j, "split", "?");
    if (!j.contains("step") || !j["step"].is_number()) continue;
    const double step = j["step"].get<double>();
    for (auto const& [k, x] : j.items()) {
      if (is_line_field(k) || !(x.is_number() || x.is_null())) continue;
      auto key = std::make_pair(split, k);
      auto it = at.find(key);
      if (it == at.end()) {
        if (!split_index.count(split)) split_index.emplace(split, split_index.size());
        series s;
        s.label = split;
        s.split = split;
        s.metric = k;
        s.colour = split_colour(split, split_index[split]);
        it = at.emplace(key, out.size()).first;
        out.push_back(std::move(s));
      }
      series& s = out[it->second];
      if (x.is_number() && std::isfinite(x.get<double>())) s.points.emplace_back(step, x.get<double>());
      else ++s.not_finite;
    }
  }
  return out;
}

NITRO_RUNTIME_INLINE std::vector<square_tensor> run_square_tensors(run_view const& v) {
  std::map<std::pair<std::string, std::string>, square_tensor> last;
  for (auto const& j : v.lines) {
    for (auto const& [k, x] : j.items()) {
      if (!x.is_object() || !x.contains("shape") || !x.contains("data")) continue;
      auto const& sh = x["shape"];
      auto const& d = x["data"];
      if (!sh.is_array() || sh.size() != 2 || !sh[0].is_number_integer() || sh[0] != sh[1] || !d.is_array()) continue;
      const std::int64_t n = sh[0].get<std::int64_t>();
      if (n <= 0 || n > 1000 || static_cast<std::int64_t>(d.size()) != n * n) continue;
      square_tensor t;
      t.split = text_field(j, "split", "?");
      t.metric = k;
      t.step = j.contains("step") && j["step"].is_number_integer() ? j["step"].get<std::int64_t>() : 0;
      t.n = n;
      for (auto const& e : d) t.values.push_back(e.is_number() ? e.get<double>() : 0.0);
      last[{t.split, t.metric}] = std::move(t);
    }
  }
  std::vector<square_tensor> out;
  for (auto& [k, t] : last) out.push_back(std::move(t));
  return out;
}

NITRO_RUNTIME_INLINE series throughput(run_view const& v) {
  series s;
  s.label = "samples/s";
  s.split = "train";
  s.metric = "samples_per_second";
  s.colour = palette(4);
  if (v.batch_size <= 0) return s;
  double prev_step = -1, prev_time = 0;
  for (auto const& j : v.lines) {
    if (text_field(j, "split", "") != "train" || !j.contains("wall_time") || !j["wall_time"].is_number() || !j.contains("step")) continue;
    const double step = j["step"].get<double>(), t = j["wall_time"].get<double>();
    if (prev_step >= 0 && step > prev_step && t > prev_time) s.points.emplace_back(step, (step - prev_step) * double(v.batch_size) / (t - prev_time));
    prev_step = step;
    prev_time = t;
  }
  return s;
}

NITRO_RUNTIME_INLINE std::vector<double> nice_ticks(double lo, double hi, int want) {
  std::vector<double> t;
  if (!(hi > lo)) { t.push_back(lo); return t; }
  const double raw = (hi - lo) / want;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  const double step = (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
  for (double x = std::ceil(lo / step) * step; x <= hi + step * 1e-9; x += step) t.push_back(std::fabs(x) < step * 1e-9 ? 0.0 : x);
  return t;
}

NITRO_RUNTIME_INLINE std::string svg_chart(std::vector<series> const& all, chart_options const& o) {
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  std::size_t drawn = 0;
  for (auto const& s : all)
    for (auto const& [x, y] : s.points) {
      x0 = std::min(x0, x); x1 = std::max(x1, x);
      y0 = std::min(y0, y); y1 = std::max(y1, y);
      ++drawn;
    }
  const bool log_y = o.allow_log && drawn > 1 && y0 > 0 && y1 / y0 >= 10;
  if (drawn == 0) { x0 = 0; x1 = 1; y0 = 0; y1 = 1; }
  if (x1 <= x0) { x0 -= 1; x1 += 1; }
  if (y1 <= y0) {
    const double pad = y0 == 0 ? 1 : std::fabs(y0) * 0.05;
    y0 -= pad; y1 += pad;
  }
  if (!log_y && drawn > 1) {  // a little air above and below, so no curve runs along the frame
    const double pad = (y1 - y0) * 0.04;
    y0 -= y0 >= 0 && y0 - pad < 0 ? y0 : pad;
    y1 += pad;
  }
  auto ty = [&](double y) { return log_y ? std::log10(y) : y; };
  const double ly0 = ty(y0), ly1 = ty(y1);
  const int legend_rows = static_cast<int>(all.size());
  const double left = 58, right = 12, top = 26, bottom = 34 + 16.0 * legend_rows;
  const double W = o.width, H = o.height + 16.0 * legend_rows;
  const double pw = W - left - right, ph = H - top - bottom;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return top + ph - (ty(y) - ly0) / (ly1 - ly0) * ph; };

  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" + coord(W) + "\" height=\"" + coord(H) +
                  "\" viewBox=\"0 0 " + coord(W) + " " + coord(H) + "\" role=\"img\" aria-label=\"" + html_escape(o.title) + "\"" +
                  (log_y ? " data-scale=\"log\"" : " data-scale=\"linear\"") + ">\n";
  s += "<title>" + html_escape(o.title) + "</title>\n";
  s += "<text class=\"title\" x=\"" + coord(left) + "\" y=\"16\">" + html_escape(o.title) + (log_y ? " (log scale)" : "") + "</text>\n";
  s += "<rect class=\"plot\" x=\"" + coord(left) + "\" y=\"" + coord(top) + "\" width=\"" + coord(pw) + "\" height=\"" + coord(ph) + "\"/>\n";
  // y ticks
  std::vector<double> yt;
  if (log_y) {
    for (double e = std::floor(ly0); e <= std::ceil(ly1); e += 1) {
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, e);
        if (v >= y0 * (1 - 1e-9) && v <= y1 * (1 + 1e-9)) yt.push_back(v);
      }
    }
    if (yt.size() > 7) {
      std::vector<double> only;
      for (double v : yt) if (std::fabs(std::log10(v) - std::round(std::log10(v))) < 1e-9) only.push_back(v);
      if (only.size() >= 2) yt = only;
    }
    if (yt.size() < 2) { yt = {y0, y1}; }
  } else {
    yt = nice_ticks(y0, y1);
  }
  for (double v : yt) {
    const double y = py(v);
    s += "<line class=\"grid\" x1=\"" + coord(left) + "\" x2=\"" + coord(left + pw) + "\" y1=\"" + coord(y) + "\" y2=\"" + coord(y) + "\"/>";
    s += "<text class=\"tick\" x=\"" + coord(left - 4) + "\" y=\"" + coord(y + 3.5) + "\" text-anchor=\"end\">" + html_escape(tick_text(v)) + "</text>\n";
  }
  for (double v : nice_ticks(x0, x1, 6)) {
    const double x = px(v);
    s += "<line class=\"grid\" x1=\"" + coord(x) + "\" x2=\"" + coord(x) + "\" y1=\"" + coord(top) + "\" y2=\"" + coord(top + ph) + "\"/>";
    s += "<text class=\"tick\" x=\"" + coord(x) + "\" y=\"" + coord(top + ph + 13) + "\" text-anchor=\"middle\">" + html_escape(tick_text(v)) + "</text>\n";
  }
  s += "<text class=\"axis\" x=\"" + coord(left + pw / 2) + "\" y=\"" + coord(top + ph + 27) + "\" text-anchor=\"middle\">" + html_escape(o.x_label) + "</text>\n";
  if (drawn == 0) s += "<text class=\"empty\" x=\"" + coord(left + pw / 2) + "\" y=\"" + coord(top + ph / 2) + "\" text-anchor=\"middle\">no values recorded</text>\n";
  for (std::size_t i = 0; i < all.size(); ++i) {
    auto const& c = all[i];
    s += "<g class=\"curve\" data-split=\"" + html_escape(c.split) + "\" data-metric=\"" + html_escape(c.metric) + "\" data-label=\"" +
         html_escape(c.label) + "\" data-points=\"" + std::to_string(c.points.size()) + "\" stroke=\"" + c.colour + "\" fill=\"" + c.colour + "\">";
    if (c.points.size() >= 2) {
      s += "<polyline fill=\"none\" points=\"";
      for (auto const& [x, y] : c.points) s += coord(px(x)) + "," + coord(py(y)) + " ";
      s.pop_back();
      s += "\"/>";
    }
    if (c.points.size() <= 30)
      for (auto const& [x, y] : c.points) s += "<circle cx=\"" + coord(px(x)) + "\" cy=\"" + coord(py(y)) + "\" r=\"2.5\"/>";
    s += "</g>\n";
    const double ly = H - 16.0 * legend_rows + 16.0 * static_cast<double>(i) + 4;
    std::string last = c.points.empty() ? std::string("no values") : "last " + short_number(c.points.back().second);
    if (c.not_finite) last += ", " + std::to_string(c.not_finite) + " not finite";
    s += "<g class=\"legend-item\" data-label=\"" + html_escape(c.label) + "\"><rect x=\"" + coord(left) + "\" y=\"" + coord(ly) +
         "\" width=\"12\" height=\"8\" fill=\"" + c.colour + "\"/><text x=\"" + coord(left + 17) + "\" y=\"" + coord(ly + 8) + "\">" +
         html_escape(c.label) + " (" + html_escape(last) + ")</text></g>\n";
  }
  s += "</svg>\n";
  return s;
}

NITRO_RUNTIME_INLINE std::string svg_heatmap(square_tensor const& t, std::vector<std::string> const& names) {
  const std::int64_t n = t.n;
  const bool named = static_cast<std::int64_t>(names.size()) == n;
  const double cell = n <= 12 ? 34 : std::max(4.0, 420.0 / double(n));
  const double left = named ? 96 : 40, top = 44;
  const double W = left + cell * double(n) + 16, H = top + cell * double(n) + 40;
  auto label = [&](std::int64_t i) { return named ? names[static_cast<std::size_t>(i)] : std::to_string(i); };
  const std::string title = t.split + " " + t.metric + " at step " + std::to_string(t.step);
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"heatmap\" data-split=\"" + html_escape(t.split) + "\" data-metric=\"" +
                  html_escape(t.metric) + "\" data-classes=\"" + std::to_string(n) + "\" width=\"" + coord(W) + "\" height=\"" + coord(H) +
                  "\" viewBox=\"0 0 " + coord(W) + " " + coord(H) + "\" role=\"img\" aria-label=\"" + html_escape(title) + "\">\n";
  s += "<title>" + html_escape(title) + "</title>\n";
  s += "<text class=\"title\" x=\"" + coord(left) + "\" y=\"16\">" + html_escape(title) + "</text>\n";
  s += "<text class=\"axis\" x=\"" + coord(left + cell * double(n) / 2) + "\" y=\"34\" text-anchor=\"middle\">predicted</text>\n";
  s += "<text class=\"axis\" x=\"" + coord(left + cell * double(n) / 2) + "\" y=\"" + coord(H - 6) + "\" text-anchor=\"middle\">rows: true class</text>\n";
  for (std::int64_t i = 0; i < n; ++i) {
    double row = 0;
    for (std::int64_t j = 0; j < n; ++j) row += t.values[static_cast<std::size_t>(i * n + j)];
    if (cell >= 12)
      s += "<text class=\"tick\" x=\"" + coord(left - 4) + "\" y=\"" + coord(top + cell * (double(i) + 0.5) + 3.5) + "\" text-anchor=\"end\">" +
           html_escape(label(i)) + "</text>\n";
    for (std::int64_t j = 0; j < n; ++j) {
      const double v = t.values[static_cast<std::size_t>(i * n + j)];
      const double share = row > 0 ? v / row : 0.0;
      const int shade = static_cast<int>(std::lround(255 - 200 * share));
      char fill[16];
      std::snprintf(fill, sizeof fill, "#%02x%02xff", shade, shade);
      s += "<rect class=\"cell\" data-i=\"" + std::to_string(i) + "\" data-j=\"" + std::to_string(j) + "\" data-value=\"" + short_number(v) + "\" x=\"" +
           coord(left + cell * double(j)) + "\" y=\"" + coord(top + cell * double(i)) + "\" width=\"" + coord(cell) + "\" height=\"" + coord(cell) +
           "\" fill=\"" + fill + "\"><title>" + html_escape(label(i) + " predicted as " + label(j) + ": " + short_number(v)) + "</title></rect>";
      if (n <= 12)
        s += "<text class=\"count\" x=\"" + coord(left + cell * (double(j) + 0.5)) + "\" y=\"" + coord(top + cell * (double(i) + 0.5) + 3.5) +
             "\" text-anchor=\"middle\"" + (share > 0.55 ? " style=\"fill:#fff\"" : "") + ">" + short_number(v) + "</text>";
    }
    s += "\n";
  }
  if (cell >= 12)
    for (std::int64_t j = 0; j < n; ++j)
      s += "<text class=\"tick\" transform=\"translate(" + coord(left + cell * (double(j) + 0.5) + 3) + "," + coord(top + cell * double(n) + 6) +
           ") rotate(-90)\" text-anchor=\"end\">" + (named ? html_escape(label(j).substr(0, 3)) : std::to_string(j)) + "</text>\n";
  s += "</svg>\n";
  return s;
}

NITRO_RUNTIME_INLINE std::string page_head(std::string const& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n"
         "<meta name=\"generator\" content=\"nitro report\">\n"
         "<title>" + html_escape(title) + "</title>\n<style>\n"
         "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}\n"
         "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd}\n"
         ".charts{display:flex;flex-wrap:wrap;gap:12px}\n"
         "svg text{font:11px system-ui,sans-serif;fill:#333}svg text.title{font-size:12px;font-weight:600}\n"
         "svg .plot{fill:#fafafa;stroke:#bbb}svg .grid{stroke:#e4e4e4}svg .curve polyline{stroke-width:1.6}\n"
         "svg .curve circle{stroke:none}svg text.count{font-size:10px}\n"
         "table{border-collapse:collapse;margin:4px 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}\n"
         "th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
         "pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}\n"
         ".notes{background:#fff4e0;border:1px solid #f0c36d;padding:6px 12px}\n"
         ".state{font-weight:600}.state-finished{color:#2a7d2a}.state-running{color:#1f5fa8}\n"
         ".state-failed,.state-diverged,.state-lost{color:#b22}.state-stopped{color:#a60}\n"
         "</style>\n</head>\n<body>\n";
}

NITRO_RUNTIME_INLINE std::string page_tail() { return "</body>\n</html>\n"; }

NITRO_RUNTIME_INLINE std::string notes_html(std::vector<std::string> const& notes) {
  if (notes.empty()) return "";
  std::string s = "<section class=\"notes\" id=\"notes\"><b>What the records lack</b><ul>\n";
  for (auto const& n : notes) s += "<li class=\"note\">" + html_escape(n) + "</li>\n";
  return s + "</ul></section>\n";
}

NITRO_RUNTIME_INLINE std::string source_table(ordered_json const& rows, bool with_doc) {
  std::string s = "<table><tr><th>name</th><th>value</th><th>source</th>" + std::string(with_doc ? "<th>doc</th>" : "") + "</tr>\n";
  for (auto const& [k, v] : rows.items()) {
    if (!v.is_object()) continue;
    s += "<tr><td>" + html_escape(k) + "</td><td>" + html_escape(v.contains("value") ? json_text(v["value"]) : "?") + "</td><td>" +
         html_escape(v.contains("source") ? json_text(v["source"]) : "?") + "</td>";
    if (with_doc) s += "<td>" + html_escape(v.contains("doc") ? json_text(v["doc"]) : "") + "</td>";
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

NITRO_RUNTIME_INLINE std::string str_at(ordered_json const& j, std::initializer_list<char const*> path) {
  ordered_json const* at = &j;
  for (char const* k : path) {
    if (!at->is_object() || !at->contains(k)) return "";
    at = &(*at)[k];
  }
  return at->is_null() ? std::string() : json_text(*at);
}

NITRO_RUNTIME_INLINE std::vector<std::string> class_names_of(run_view const& v) {
  std::vector<std::string> names;
  for (ordered_json const* j : {&v.manifest, &v.metadata}) {
    if (!j->is_object() || !j->contains("data") || !(*j)["data"].is_object()) continue;
    auto const& d = (*j)["data"];
    if (d.contains("classes") && d["classes"].is_array()) {
      for (auto const& c : d["classes"]) names.push_back(c.is_string() ? c.get<std::string>() : json_text(c));
      return names;
    }
  }
  return names;
}

NITRO_RUNTIME_INLINE std::string run_charts(run_view const& v, std::vector<series> const& all, bool schedules) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<series>> by;
  for (auto const& s : all) {
    if (is_scheduled(v, s.split, s.metric) != schedules) continue;
    if (!by.count(s.metric)) order.push_back(s.metric);
    by[s.metric].push_back(s);
  }
  std::string h = "<div class=\"charts\">\n";
  for (auto const& m : order) h += svg_chart(by[m], {.title = m, .allow_log = !schedules || m.rfind("eta", 0) == 0});
  return h + "</div>\n";
}

NITRO_RUNTIME_INLINE std::string status_line(run_view const& v) {
  const std::string state = v.state();
  std::string s = "<p><span class=\"state state-" + html_escape(state) + "\">" + html_escape(state) + "</span>";
  if (v.status.is_object()) {
    s += " · step " + html_escape(str_at(v.status, {"step"}));
    const std::string hs = str_at(v.status, {"horizon", "steps"}), he = str_at(v.status, {"horizon", "epochs"});
    if (!hs.empty()) s += " of " + html_escape(hs);
    s += " · epoch " + html_escape(str_at(v.status, {"epoch"})) + (he.empty() ? "" : " of " + html_escape(he));
    if (v.status.contains("best") && v.status["best"].is_object())
      s += " · best " + html_escape(str_at(v.status, {"best", "metric"})) + " " + html_escape(str_at(v.status, {"best", "value"})) + " at step " +
           html_escape(str_at(v.status, {"best", "step"}));
    const std::string reason = str_at(v.status, {"reason"}), err = str_at(v.status, {"error"});
    if (!reason.empty()) s += " · " + html_escape(reason);
    if (!err.empty()) s += "</p>\n<pre class=\"error\">" + html_escape(err) + "</pre>\n<p>";
    s += " · started " + html_escape(str_at(v.status, {"started"}));
    const std::string fin = str_at(v.status, {"finished"});
    s += fin.empty() ? " · last heartbeat " + html_escape(str_at(v.status, {"heartbeat"})) : " · finished " + html_escape(fin);
  }
  return s + "</p>\n";
}

}  // namespace nitro::cli::detail

namespace nitro::cli {

NITRO_RUNTIME_INLINE std::string run_report_html(std::string const& dir) {
  using namespace detail;
  run_view v = load_run(dir);
  const auto all = run_series(v);
  const std::string program = str_at(v.manifest, {"program", "name"}).empty() ? str_at(v.metadata, {"program"}) : str_at(v.manifest, {"program", "name"});
  std::string h = page_head("nitro report: " + v.slug);
  h += "<header><h1>" + html_escape(v.slug) + "</h1>\n<p>" + html_escape(str_at(v.manifest, {"experiment"})) + " · program " + html_escape(program) +
       " · seed " + html_escape(str_at(v.manifest, {"seed"})) + " · data " + html_escape(str_at(v.manifest, {"data", "name"})) + "</p>\n" +
       status_line(v) + "</header>\n";
  h += notes_html(v.notes);

  std::size_t metric_curves = 0, schedule_curves = 0;
  for (auto const& s : all) (is_scheduled(v, s.split, s.metric) ? schedule_curves : metric_curves) += 1;
  h += "<section id=\"metrics\" data-curves=\"" + std::to_string(metric_curves) + "\"><h2>Metrics</h2>\n";
  h += metric_curves ? run_charts(v, all, false) : "<p>No metrics were logged.</p>\n";
  h += "</section>\n<section id=\"schedules\" data-curves=\"" + std::to_string(schedule_curves) + "\"><h2>Scheduled values</h2>\n";
  h += schedule_curves ? run_charts(v, all, true) : "<p>No scheduled value was logged.</p>\n";
  h += "</section>\n";

  const auto tensors = run_square_tensors(v);
  if (!tensors.empty()) {
    const auto names = class_names_of(v);
    h += "<section id=\"confusion\"><h2>Confusion matrices</h2>\n<p>Each row is a true class, each column the predicted one; the shade is the share of the row.";
    if (names.empty()) h += " The data set names no classes: they are numbered.";
    h += "</p>\n<div class=\"charts\">\n";
    for (auto const& t : tensors) h += svg_heatmap(t, names);
    h += "</div>\n</section>\n";
  }

  series tp = throughput(v);
  h += "<section id=\"timing\"><h2>Timing</h2>\n";
  if (!v.lines.empty() && v.lines.front().contains("wall_time") && v.lines.back().contains("wall_time") && v.metadata.is_object() &&
      v.metadata.contains("wall_time") && v.metadata["wall_time"].is_number()) {
    const double t0 = v.metadata["wall_time"].get<double>();
    const double t1 = v.end.is_object() && v.end.contains("wall_time") && v.end["wall_time"].is_number() ? v.end["wall_time"].get<double>()
                                                                                                          : v.lines.back()["wall_time"].get<double>();
    h += "<p>" + short_number(t1 - t0) + " s from the first record to the " + (v.end.is_object() ? "end" : "last line");
    if (!tp.points.empty()) {
      double sum = 0;
      for (auto const& p : tp.points) sum += p.second;
      h += "; " + short_number(sum / double(tp.points.size())) + " samples/s on average between train lines (batch " + std::to_string(v.batch_size) + ")";
    }
    h += ".</p>\n";
  }
  if (tp.points.empty()) h += "<p>Samples/s needs two train lines and the batch size; this run has fewer.</p>\n";
  else h += "<div class=\"charts\">\n" + svg_chart({tp}, {.title = "samples/s", .allow_log = false}) + "</div>\n";
  h += "</section>\n";

  h += "<section id=\"selection\"><h2>Selection</h2>\n";
  if (v.manifest.is_object()) {
    h += "<p>variant " + html_escape(str_at(v.manifest, {"selection", "variant"}).empty() ? "none" : str_at(v.manifest, {"selection", "variant"})) + "; command <code>" +
         html_escape(str_at(v.manifest, {"command"})) + "</code></p>\n";
    if (v.manifest.contains("knobs")) h += "<h3>Knobs</h3>\n" + source_table(v.manifest["knobs"], true);
    if (v.manifest.contains("overrides") && v.manifest["overrides"].is_object() && !v.manifest["overrides"].empty())
      h += "<h3>Overrides</h3>\n" + source_table(v.manifest["overrides"], false);
    if (v.manifest.contains("run_keywords")) h += "<h3>Run keywords</h3>\n" + source_table(v.manifest["run_keywords"], false);
  } else {
    h += "<p>No manifest.json: the selection is unknown.</p>\n";
  }
  h += "</section>\n<section id=\"binding\"><h2>Binding report</h2>\n";
  h += v.binding.empty() ? "<p>No binding_report.txt.</p>\n" : "<pre>" + html_escape(v.binding) + "</pre>\n";
  h += "</section>\n<footer><p>Written by <code>report</code> from " + html_escape(v.dir) + " (" + std::to_string(v.lines.size()) + " metrics lines).</p></footer>\n";
  return h + page_tail();
}

NITRO_RUNTIME_INLINE bool is_sweep_summary(ordered_json const& j) { return j.is_object() && j.contains("sweep") && j.contains("points") && j["points"].is_array(); }

NITRO_RUNTIME_INLINE std::string sweep_report_html(std::string const& summary_path) {
  using namespace detail;
  namespace fs = std::filesystem;
  ordered_json sum = read_json(summary_path);
  if (!is_sweep_summary(sum))
    throw error("E-REC-007", "the file " + summary_path + " is not a sweep summary (it has no \"sweep\" and \"points\")",
                "name a sweep summary sweep-NAME-ID.json, a sweep's name, or a run");
  const std::string name = sum["sweep"].is_string() ? sum["sweep"].get<std::string>() : "?";
  auto const& points = sum["points"];
  if (points.empty())
    throw error("E-REC-008", "the sweep summary " + summary_path + " lists no points", "run the sweep again (`sweep " + name + "`), or name another sweep");
  const fs::path base = fs::path(summary_path).parent_path();

  struct point {
    std::size_t index = 0;
    std::string slug, program, state;
    std::vector<std::pair<std::string, std::string>> sets;
    std::map<std::string, double> metrics;
    std::optional<run_view> run;
  };
  std::vector<point> ps;
  std::vector<std::string> notes;
  for (auto const& p : points) {
    point x;
    x.index = p.value("index", ps.size());
    x.slug = p.value("slug", std::string());
    x.program = p.value("program", std::string());
    x.state = p.value("state", std::string("?"));
    if (p.contains("selection") && p["selection"].contains("sets") && p["selection"]["sets"].is_array())
      for (auto const& kv : p["selection"]["sets"])
        if (kv.is_array() && kv.size() == 2) x.sets.emplace_back(json_text(kv[0]), json_text(kv[1]));
    if (p.contains("metrics") && p["metrics"].is_object())
      for (auto const& [k, m] : p["metrics"].items()) if (m.is_number()) x.metrics[k] = m.get<double>();
    const fs::path dir = base / x.slug;
    if (!x.slug.empty() && is_run_folder(dir)) {
      x.run = load_run(dir.string());
      for (auto const& n : x.run->notes) notes.push_back("point " + std::to_string(x.index) + ": " + n);
      if (x.run->status.is_object()) {  // the run's own status is newer than the summary
        x.state = x.run->state();
        std::map<std::string, double> fm;
        if (x.run->status.contains("last") && x.run->status["last"].is_object())
          for (auto const& [k, m] : x.run->status["last"].items()) if (m.is_number()) fm[k] = m.get<double>();
        if (!fm.empty()) x.metrics = fm;
      }
    } else {
      notes.push_back("point " + std::to_string(x.index) + " (" + x.slug + ") has no run folder beside the summary: only its summary row is shown");
    }
    ps.push_back(std::move(x));
  }
  bool any_run = false;
  for (auto const& p : ps) any_run = any_run || p.run.has_value();
  if (!any_run)
    throw error("E-REC-008", "none of the " + std::to_string(ps.size()) + " points of the sweep " + summary_path + " left a run folder beside it",
                "keep the summary in the run directory its points were recorded in, or run the sweep again");

  // The legend: the knobs whose values differ between points (the sweep's axes), else all set knobs.
  std::vector<std::string> axes;
  {
    std::map<std::string, std::set<std::string>> values;
    std::vector<std::string> order;
    for (auto const& p : ps)
      for (auto const& [k, val] : p.sets) {
        if (!values.count(k)) order.push_back(k);
        values[k].insert(val);
      }
    for (auto const& k : order) if (values[k].size() > 1) axes.push_back(k);
    if (axes.empty()) axes = order;
  }
  auto legend = [&](point const& p) {
    std::string s;
    for (auto const& a : axes)
      for (auto const& [k, val] : p.sets)
        if (k == a) s += (s.empty() ? "" : " ") + k + "=" + val;
    return s.empty() ? "point " + std::to_string(p.index) : s;
  };

  std::string h = page_head("nitro report: sweep " + name);
  h += "<header><h1>sweep " + html_escape(name) + "</h1>\n<p>" + html_escape(json_text(sum.value("experiment", ordered_json("?")))) + " · " +
       std::to_string(ps.size()) + " points · over " + html_escape(axes.empty() ? std::string("no knob") : [&] {
         std::string a;
         for (auto const& x : axes) a += (a.empty() ? "" : ", ") + x;
         return a;
       }()) + " · " + html_escape(summary_path) + "</p>\n</header>\n";
  h += notes_html(notes);

  // final metrics side by side
  std::set<std::string> names;
  for (auto const& p : ps) for (auto const& [k, m] : p.metrics) names.insert(k);
  h += "<section id=\"final\"><h2>Final metrics</h2>\n<table><tr><th>#</th>";
  for (auto const& a : axes) h += "<th>" + html_escape(a) + "</th>";
  h += "<th>program</th><th>state</th>";
  for (auto const& n : names) h += "<th>" + html_escape(n) + "</th>";
  h += "</tr>\n";
  for (std::size_t i = 0; i < ps.size(); ++i) {
    auto const& p = ps[i];
    h += "<tr class=\"point\" data-point=\"" + std::to_string(p.index) + "\"><td><span style=\"color:" + palette(i) + "\">&#9632;</span> " + std::to_string(p.index) + "</td>";
    for (auto const& a : axes) {
      std::string val = "-";
      for (auto const& [k, x] : p.sets) if (k == a) val = x;
      h += "<td>" + html_escape(val) + "</td>";
    }
    h += "<td>" + html_escape(p.program) + "</td><td class=\"state state-" + html_escape(p.state) + "\">" + html_escape(p.state) + "</td>";
    for (auto const& n : names) h += "<td class=\"num\">" + (p.metrics.count(n) ? html_escape(short_number(p.metrics.at(n))) : std::string("-")) + "</td>";
    h += "</tr>\n";
  }
  h += "</table>\n</section>\n";

  // curves overlaid: one chart per (split, metric), one series per point
  std::vector<std::pair<std::string, std::string>> order;
  std::map<std::pair<std::string, std::string>, std::vector<series>> by;
  std::map<std::pair<std::string, std::string>, bool> scheduled;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (!ps[i].run) continue;
    for (auto s : run_series(*ps[i].run)) {
      auto key = std::make_pair(s.split, s.metric);
      if (!by.count(key)) { order.push_back(key); scheduled[key] = is_scheduled(*ps[i].run, s.split, s.metric); }
      s.label = legend(ps[i]);
      s.colour = palette(i);
      by[key].push_back(std::move(s));
    }
  }
  std::size_t curves = 0;
  for (auto const& [k, v] : by) if (!scheduled[k]) curves += v.size();
  h += "<section id=\"curves\" data-curves=\"" + std::to_string(curves) + "\"><h2>Curves</h2>\n<div class=\"charts\">\n";
  for (auto const& k : order)
    if (!scheduled[k]) h += svg_chart(by[k], {.title = k.first + " " + k.second});
  h += "</div>\n</section>\n<section id=\"schedules\"><h2>Scheduled values</h2>\n<div class=\"charts\">\n";
  for (auto const& k : order)
    if (scheduled[k]) h += svg_chart(by[k], {.title = k.first + " " + k.second, .allow_log = k.second.rfind("eta", 0) == 0});
  h += "</div>\n</section>\n";
  h += "<footer><p>Written by <code>report</code> from " + html_escape(summary_path) + " and its points' run folders.</p></footer>\n";
  return h + page_tail();
}

NITRO_RUNTIME_INLINE std::pair<std::string, bool> report_target(std::string const& run_dir, std::string const& ref) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(ref, ec)) {
    ordered_json j = ordered_json::parse(read_record_file(ref), nullptr, false);
    if (is_sweep_summary(j)) return {ref, true};
    throw error("E-REC-007", "the file " + ref + " is not a sweep summary", "name a run folder, a slug or `latest`, or a sweep (sweep-NAME-ID.json or its name)");
  }
  if (detail::is_run_folder(ref)) return {ref, false};
  if (fs::is_directory(ref, ec)) {
    std::size_t runs = 0;
    for (auto const& d : fs::directory_iterator(ref, ec)) runs += detail::is_run_folder(d.path()) ? 1 : 0;
    throw error("E-REC-007",
                "the folder " + ref + " is not a run: it has neither manifest.json nor metrics.jsonl" +
                    (runs ? " (it holds " + std::to_string(runs) + " run folders)" : std::string()),
                runs ? "name one of its runs (`report " + ref + "/<slug>`), or `--run-dir " + ref + " latest`"
                     : "name a run folder (<run-dir>/<slug>), a slug or `latest`, or a sweep (sweep-NAME-ID.json or its name)");
  }
  // a sweep's name, or the start of a summary's file name
  std::string newest;
  if (fs::is_directory(run_dir, ec))
    for (auto const& d : fs::directory_iterator(run_dir, ec)) {
      const std::string f = d.path().filename().string();
      if (!d.is_regular_file() || f.size() < 5 || f.compare(f.size() - 5, 5, ".json") != 0 || f.rfind("sweep-", 0) != 0) continue;
      if (f.rfind("sweep-" + ref + "-", 0) == 0 || f.rfind(ref, 0) == 0)
        if (newest.empty() || f > newest.substr(newest.find_last_of('/') + 1)) newest = d.path().string();
    }
  if (!newest.empty()) return {newest, true};
  return {find_run(run_dir, ref), false};  // E-CLI-004 names what it looked for
}

NITRO_RUNTIME_INLINE int report(std::ostream& out, std::string const& run_dir, std::string const& ref, std::optional<std::string> const& out_path) {
  namespace fs = std::filesystem;
  const auto [target, sweep] = report_target(run_dir, ref);
  const std::string html = sweep ? sweep_report_html(target) : run_report_html(target);
  std::string name = fs::path(target).filename().string();
  if (name.empty()) name = fs::path(target).parent_path().filename().string();
  if (sweep && name.size() > 5) name = name.substr(0, name.size() - 5);
  const std::string path = out_path ? *out_path : name + ".html";
  write_record_atomic(path, html);
  out << "report " << path << ": " << (sweep ? "the sweep " : "the run ") << target << "\n";
  return exit_ok;
}

}  // namespace nitro::cli
#endif  // !NITRO_RUNTIME_EXTERN
