// nitro/record/loggers/jsonl.hpp — metrics as JSON Lines: one JSON object per line.
//
//   nitro::jsonl_logger("metrics.jsonl")     // relative paths are inside the run directory
//
// The first line is the metadata: the caller's JSON object (run_info::metadata_json: the
// selection, seed, versions, ...) with "type": "metadata", "format": "nitro.metrics.v1", the
// experiment, the horizon and the wall time added. Every later line is
//   {"type":"metrics","split":"train","step":100,"epoch":1,"wall_time":1700000000.25,"loss":0.61,"eta":0.001}
//   {"type":"metrics","split":"valid","step":429,"epoch":1,"wall_time":...,"acc":0.84,"loss":0.45}
//   ... with a split's square [C, C] tensor metrics (a confusion matrix, sum_of) as
//   "confusion":{"shape":[10,10],"data":[...]}: row-major, entry (i, j) at i * C + j
//   {"type":"end","status":"finished","reason":"","step":2145,"wall_time":...}
// Numbers are the shortest text that reads back exactly; NaN and infinities are null (JSON has
// neither). A resumed run appends, starting with a metadata line carrying "resumed": true.
//
// Guarantee: each line is written with one write and flushed, so a crash leaves every earlier line
// intact and at worst a last line without its newline, which readers skip. After on_setup a line
// allocates nothing (its buffer is reused).
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/core/error.hpp"
#include "nitro/record/detail/record_text.hpp"
#include "nitro/record/logger.hpp"

#include <chrono>       // wall time
#include <cstdint>      // int64_t
#include <filesystem>   // paths
#include <string>       // the line buffer
#include <string_view>  // names

namespace nitro {

// The format the first line of metrics.jsonl names (also what the command line's metadata says).
inline constexpr char const* metrics_jsonl_format = "nitro.metrics.v1";

namespace detail {
inline double wall_time_now() noexcept {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
inline std::filesystem::path in_run_dir(std::filesystem::path const& dir, std::filesystem::path const& p) {
  return p.is_absolute() || dir.empty() ? p : dir / p;
}
}  // namespace detail

class jsonl_logger : public run_logger {
 public:
  explicit jsonl_logger(std::filesystem::path path = "metrics.jsonl") : m_path(std::move(path)) {}
  jsonl_logger(jsonl_logger const& o) : run_logger(o), m_path(o.m_path) {}  // a description: the file opens in on_setup
  jsonl_logger& operator=(jsonl_logger const&) = delete;

  std::string describe() const override { return "jsonl(" + m_path.string() + ")"; }
  // Where it writes (after on_setup: inside the run directory when the path was relative).
  std::filesystem::path const& path() const noexcept { return m_resolved.empty() ? m_path : m_resolved; }

  void on_setup(run_info const& info) override;

  void on_step(std::int64_t step, int epoch, scalars values) override;
  void on_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m) override;
  void on_end(run_status status, std::string_view reason) override;

 private:
  void begin_line(std::string_view split, std::int64_t step, int epoch);
  // `,"name":` after checking the name is not one of the line's own keys
  void field_name(std::string_view name);
  void field(std::string_view name, double v);
  // A [C, C] tensor (C <= 1000: a confusion matrix, not a concatenation of outputs), row-major.
  void square_tensor_field(std::string_view name, Tensor const& t);
  void end_line();

  std::filesystem::path m_path;
  std::filesystem::path m_resolved;
  detail::append_file m_file;
  std::string m_line;
  std::int64_t m_last_step = 0;
};

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
#include <nlohmann/json.hpp>

namespace nitro {

NITRO_RUNTIME_INLINE void jsonl_logger::on_setup(run_info const& info) {
  m_resolved = detail::in_run_dir(info.dir, m_path);
  const std::int64_t had = m_file.open(m_resolved, "JSONL metrics file");
  nlohmann::json caller;
  try {
    caller = nlohmann::json::parse(info.metadata_json.empty() ? std::string("{}") : info.metadata_json);
  } catch (nlohmann::json::exception const& e) {
    throw error("E-LOG-004", std::string("the run's metadata is not valid JSON: ") + e.what(), "pass a JSON object as run_info::metadata_json");
  }
  if (!caller.is_object()) throw error("E-LOG-004", "the run's metadata is JSON but not an object", "pass a JSON object, such as {\"selection\": {...}}");
  nlohmann::json meta = nlohmann::json::object();
  meta["type"] = "metadata";
  meta["format"] = metrics_jsonl_format;
  for (auto it = caller.begin(); it != caller.end(); ++it)
    if (it.key() != "type" && it.key() != "format") meta[it.key()] = it.value();
  meta["experiment"] = info.experiment;
  meta["steps_per_epoch"] = info.steps_per_epoch;
  meta["max_epochs"] = info.max_epochs;
  meta["total_steps"] = info.total_steps;
  meta["batch_size"] = info.batch_size;
  meta["start_step"] = info.start_step;
  meta["resumed"] = had > 0;
  meta["wall_time"] = detail::wall_time_now();
  m_line = meta.dump();
  m_line += '\n';
  m_file.write(m_line);
  m_line.reserve(1024);
}

NITRO_RUNTIME_INLINE void jsonl_logger::on_step(std::int64_t step, int epoch, scalars values) {
  begin_line("train", step, epoch);
  for (auto const& s : values) field(s.name, s.value);
  end_line();
}

NITRO_RUNTIME_INLINE void jsonl_logger::on_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m) {
  begin_line(split, step, epoch);
  for (auto const& [name, v] : m.scalars) field(name, v);
  for (auto const& [name, t] : m.tensors) square_tensor_field(name, t);
  end_line();
}

NITRO_RUNTIME_INLINE void jsonl_logger::on_end(run_status status, std::string_view reason) {
  m_line.clear();
  m_line += "{\"type\":\"end\",\"status\":";
  detail::append_json_string(m_line, to_string(status));
  m_line += ",\"reason\":";
  detail::append_json_string(m_line, reason);
  m_line += ",\"step\":";
  detail::append_integer(m_line, m_last_step);
  m_line += ",\"wall_time\":";
  detail::append_json_number(m_line, detail::wall_time_now());
  m_line += "}\n";
  m_file.write(m_line);
  m_file.close();
}

NITRO_RUNTIME_INLINE void jsonl_logger::begin_line(std::string_view split, std::int64_t step, int epoch) {
  m_last_step = step;
  m_line.clear();
  m_line += "{\"type\":\"metrics\",\"split\":";
  detail::append_json_string(m_line, split);
  m_line += ",\"step\":";
  detail::append_integer(m_line, step);
  m_line += ",\"epoch\":";
  detail::append_integer(m_line, epoch);
  m_line += ",\"wall_time\":";
  detail::append_json_number(m_line, detail::wall_time_now());
}

NITRO_RUNTIME_INLINE void jsonl_logger::field_name(std::string_view name) {
  detail::check_metric_name(name, {"type", "split", "step", "epoch", "wall_time"}, "JSONL record");
  m_line += ',';
  detail::append_json_string(m_line, name);
  m_line += ':';
}

NITRO_RUNTIME_INLINE void jsonl_logger::field(std::string_view name, double v) {
  field_name(name);
  detail::append_json_number(m_line, v);
}

NITRO_RUNTIME_INLINE void jsonl_logger::square_tensor_field(std::string_view name, Tensor const& t) {
  if (t.rank() != 2 || t.shape()[0] != t.shape()[1] || t.shape()[0] > 1000 || !t.defined()) return;
  const std::int64_t n = t.shape()[0];
  field_name(name);
  m_line += "{\"shape\":[";
  detail::append_integer(m_line, n);
  m_line += ',';
  detail::append_integer(m_line, n);
  m_line += "],\"data\":[";
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      if (i || j) m_line += ',';
      detail::append_json_number(m_line, static_cast<double>(t.data()[i + j * n]));  // column-major storage
    }
  m_line += "]}";
}

NITRO_RUNTIME_INLINE void jsonl_logger::end_line() {
  m_line += "}\n";
  m_file.write(m_line);
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
