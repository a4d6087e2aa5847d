// nitro/record/loggers/csv.hpp — metrics as one CSV table, the same table history() prints.
//
//   nitro::csv_logger("metrics.csv")     // relative paths are inside the run directory
//
//   step,epoch,split,loss,eta,acc
//   100,1,train,0.6123,0.001,
//   429,1,valid,0.4521,,0.8412
//
// Columns are step, epoch, split, then each metric in the order it first appeared. A row whose
// metrics all have columns already is appended (one write, flushed); a row that brings a new
// metric rewrites the file with the wider header — atomically (written beside it, flushed to the
// disk, renamed over it), so a reader or a crash sees the old table or the new one, never a mix.
// A resumed run reads the table back and continues it. A logged step appends without allocating:
// the table reserves the rows the run's horizon will log (again after each evaluation).
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/record/detail/record_text.hpp"
#include "nitro/record/history.hpp"
#include "nitro/record/logger.hpp"

#include <algorithm>    // min
#include <cstdint>      // int64_t
#include <filesystem>   // paths
#include <fstream>      // reading a resumed table
#include <iterator>     // istreambuf_iterator
#include <string>       // the line buffer
#include <string_view>  // names

namespace nitro {

class csv_logger : public run_logger {
 public:
  explicit csv_logger(std::filesystem::path path = "metrics.csv") : m_path(std::move(path)) {}
  csv_logger(csv_logger const& o) : run_logger(o), m_path(o.m_path) {}  // a description: the file opens in on_setup
  csv_logger& operator=(csv_logger const&) = delete;

  std::string describe() const override { return "csv(" + m_path.string() + ")"; }
  std::filesystem::path const& path() const noexcept { return m_resolved.empty() ? m_path : m_resolved; }
  run_history const& table() const noexcept { return m_table; }
  // How often the file was rewritten for a new column (the rest were appends).
  int rewrites() const noexcept { return m_rewrites; }

  void on_setup(run_info const& info) override;
  void on_step(std::int64_t step, int epoch, scalars values) override;
  void on_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m) override;
  void on_end(run_status, std::string_view) override { m_file.close(); }

 private:
  void reserve();
  void write_last();
  void rewrite();

  std::filesystem::path m_path;
  std::filesystem::path m_resolved;
  run_history m_table;
  std::size_t m_written_columns = 0;
  detail::append_file m_file;
  std::string m_line;
  int m_rewrites = 0;
  std::int64_t m_total_steps = 0, m_last_step = 0;
  int m_log_every = 1;
};

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE void csv_logger::on_setup(run_info const& info) {
  m_resolved = info.dir.empty() || m_path.is_absolute() ? m_path : info.dir / m_path;
  m_table.clear();
  m_written_columns = 0;
  std::error_code ec;
  if (std::filesystem::exists(m_resolved, ec) && std::filesystem::file_size(m_resolved, ec) > 0) {
    std::ifstream in(m_resolved, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    m_table = run_history::from_csv(text, m_resolved.string());
    rewrite();  // drops a last line cut short by a crash
  } else {
    detail::ensure_parent_directory(m_resolved, "CSV metrics file");
  }
  m_line.reserve(512);
  m_total_steps = info.total_steps;
  m_log_every = info.log_every_n_steps > 0 ? info.log_every_n_steps : 1;
  m_last_step = info.start_step;
  reserve();
}

NITRO_RUNTIME_INLINE void csv_logger::on_step(std::int64_t step, int epoch, scalars values) {
  m_last_step = step;
  m_table.add(step, epoch, "train", values);
  write_last();
}

NITRO_RUNTIME_INLINE void csv_logger::on_eval(std::int64_t step, int epoch, std::string_view split, metric_values const& m) {
  m_table.add(step, epoch, split, m);
  write_last();
  reserve();  // outside the steps: room for the rows the steps ahead will log
}

NITRO_RUNTIME_INLINE void csv_logger::reserve() {
  const std::int64_t left = m_total_steps - m_last_step;
  const std::int64_t rows = std::min<std::int64_t>(left > 0 ? left / m_log_every + 2 : 2, 1 << 16);
  m_table.reserve(static_cast<std::size_t>(rows), m_table.columns().size() + 8);
}

NITRO_RUNTIME_INLINE void csv_logger::write_last() {
  if (m_table.columns().size() != m_written_columns || !m_file.is_open()) {
    rewrite();
    return;
  }
  m_line.clear();
  m_table.append_csv_row(m_line, m_table.rows().back());
  m_file.write(m_line);
}

NITRO_RUNTIME_INLINE void csv_logger::rewrite() {
  m_file.close();
  detail::replace_file_atomically(m_resolved, m_table.to_csv(), "CSV metrics file");
  m_written_columns = m_table.columns().size();
  m_file.open(m_resolved, "CSV metrics file");
  ++m_rewrites;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
