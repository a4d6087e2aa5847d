// nitro/record/history.hpp — the run as a table: one row per logged step and per evaluation.
//
//   auto const& t = nitro::history(h);      // or h.history()
//   std::puts(t.to_text().c_str());         //  step  epoch  split  loss    acc     eta
//   t.write_csv("history.csv");             //   100      1  train  0.6123          0.001
//   auto acc = t.series("valid", "acc");    //   429      1  valid  0.4521  0.8412
//
// Columns are step, epoch (1 for the first), split, then every metric name in the order it first
// appeared; a row leaves empty what its split did not report. Numbers in CSV are the shortest text
// that reads back exactly; the text table rounds to `precision` significant digits.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/record/detail/record_text.hpp"
#include "nitro/record/logger.hpp"
#include "nitro/nn/metrics.hpp"

#include <algorithm>    // max
#include <charconv>     // from_chars
#include <cmath>        // NAN
#include <cstdint>      // int64_t
#include <cstdio>       // snprintf
#include <filesystem>   // write_csv
#include <limits>       // quiet_NaN
#include <string>       // names
#include <string_view>  // lookups
#include <utility>      // pair
#include <vector>       // rows

namespace nitro {

class run_history {
 public:
  struct row {
    std::int64_t step = 0;
    int epoch = 0;
    std::string split;
    std::size_t first = 0;  // the row's cells: [first, first + width) of the table's flat cell buffer
    std::size_t width = 0;  // the columns that existed when the row was added (later ones are absent)
  };

  // A row of named scalars (a logged step: loss, scheduled values, ...).
  void add(std::int64_t step, int epoch, std::string_view split, scalars values);
  // A row of an evaluation's scalar metrics (tensors stay out of the table).
  void add(std::int64_t step, int epoch, std::string_view split, metric_values const& m);

  // Room for `rows` more rows of `width` columns: adding them then allocates nothing (a logged
  // training step must not). Rows are stored flat, so this is three reservations.
  void reserve(std::size_t rows, std::size_t width) {
    m_rows.reserve(m_rows.size() + rows);
    m_cells.reserve(m_cells.size() + rows * width);
    m_present.reserve(m_present.size() + rows * width);
  }

  std::vector<std::string> const& columns() const noexcept { return m_columns; }
  std::vector<row> const& rows() const noexcept { return m_rows; }
  std::size_t size() const noexcept { return m_rows.size(); }
  bool empty() const noexcept { return m_rows.empty(); }
  // Did row i report `column` (a reported NaN is reported)?
  bool has(std::size_t i, std::size_t column) const noexcept { return has(m_rows[i], column); }

  // The value of `column` in row i, NaN when absent.
  double value(std::size_t i, std::string_view column) const {
    for (std::size_t c = 0; c < m_columns.size(); ++c)
      if (m_columns[c] == column) return get(m_rows[i], c);
    return std::numeric_limits<double>::quiet_NaN();
  }
  // (step, value) for every row of `split` that has `column`.
  std::vector<std::pair<std::int64_t, double>> series(std::string_view split, std::string_view column) const;

  // An aligned table.
  std::string to_text(int precision = 4) const;

  // RFC 4180 CSV: a header, then one line per row.
  std::string to_csv() const;
  std::string csv_header() const;
  void append_csv_row(std::string& s, row const& r) const;
  // Written atomically: a reader sees the old file or the whole new one.
  void write_csv(std::filesystem::path const& path) const;

  void clear() noexcept {
    m_rows.clear();
    m_columns.clear();
    m_cells.clear();
    m_present.clear();
  }

  // Reads back what to_csv wrote (a resumed run's CSV); E-LOG-006 when it is not such a table.
  static run_history from_csv(std::string_view text, std::string const& source = "CSV");

 private:
  // A row as wide as the table is now, every cell absent.
  std::size_t new_row(std::int64_t step, int epoch, std::string_view split) {
    const std::size_t width = m_columns.size();
    m_rows.push_back({step, epoch, std::string(split), m_cells.size(), width});
    m_cells.resize(m_cells.size() + width, std::numeric_limits<double>::quiet_NaN());
    m_present.resize(m_present.size() + width, 0);
    return m_rows.size() - 1;
  }
  std::size_t column_index(std::string_view name);
  void set(std::size_t i, std::size_t c, double v) {
    row const& r = m_rows[i];  // c < r.width: the row's columns were made before the row
    m_cells[r.first + c] = v;
    m_present[r.first + c] = 1;
  }
  static std::vector<std::vector<std::string>> parse_csv(std::string_view t, std::string const& source);
  static std::int64_t to_int(std::string const& s, std::string const& source);
  static double to_double(std::string const& s, std::string const& source);

  bool has(row const& r, std::size_t c) const noexcept { return c < r.width && m_present[r.first + c] != 0; }
  double get(row const& r, std::size_t c) const noexcept {
    return c < r.width ? m_cells[r.first + c] : std::numeric_limits<double>::quiet_NaN();
  }
  std::vector<std::string> m_columns;
  std::vector<row> m_rows;
  std::vector<double> m_cells;            // every row's cells, one after another
  std::vector<unsigned char> m_present;   // beside each cell: was it reported
};

// history(h): the handle's run as a table (handles provide history()).
template <class Handle>
  requires requires(Handle const& h) { h.history(); }
decltype(auto) history(Handle const& h) {
  return h.history();
}

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE void run_history::add(std::int64_t step, int epoch, std::string_view split, scalars values) {
  for (auto const& s : values) column_index(s.name);
  const std::size_t r = new_row(step, epoch, split);
  for (auto const& s : values) set(r, column_index(s.name), s.value);
}

NITRO_RUNTIME_INLINE void run_history::add(std::int64_t step, int epoch, std::string_view split, metric_values const& m) {
  for (auto const& [name, v] : m.scalars) column_index(name);
  const std::size_t r = new_row(step, epoch, split);
  for (auto const& [name, v] : m.scalars) set(r, column_index(name), v);
}

NITRO_RUNTIME_INLINE std::vector<std::pair<std::int64_t, double>> run_history::series(std::string_view split, std::string_view column) const {
  std::vector<std::pair<std::int64_t, double>> out;
  std::size_t c = m_columns.size();
  for (std::size_t k = 0; k < m_columns.size(); ++k)
    if (m_columns[k] == column) c = k;
  if (c == m_columns.size()) return out;
  for (auto const& r : m_rows) {
    if (r.split == split && has(r, c)) out.emplace_back(r.step, get(r, c));
  }
  return out;
}

NITRO_RUNTIME_INLINE std::string run_history::to_text(int precision) const {
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> head = {"step", "epoch", "split"};
  head.insert(head.end(), m_columns.begin(), m_columns.end());
  cells.push_back(head);
  for (auto const& r : m_rows) {
    std::vector<std::string> line = {std::to_string(r.step), std::to_string(r.epoch), r.split};
    for (std::size_t c = 0; c < m_columns.size(); ++c) {
      if (!has(r, c)) { line.emplace_back(); continue; }
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.*g", precision, get(r, c));
      line.emplace_back(buf);
    }
    cells.push_back(std::move(line));
  }
  std::vector<std::size_t> width(head.size(), 0);
  for (auto const& line : cells)
    for (std::size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  std::string s;
  for (auto const& line : cells) {
    std::string text;
    for (std::size_t c = 0; c < line.size(); ++c) {
      if (c) text += "  ";
      const std::size_t pad = width[c] - line[c].size();
      if (c == 2) text += line[c] + std::string(pad, ' ');  // split: left-aligned
      else text += std::string(pad, ' ') + line[c];
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    s += text + "\n";
  }
  return s;
}

NITRO_RUNTIME_INLINE std::string run_history::to_csv() const {
  std::string s = csv_header();
  for (auto const& r : m_rows) append_csv_row(s, r);
  return s;
}

NITRO_RUNTIME_INLINE std::string run_history::csv_header() const {
  std::string s = "step,epoch,split";
  for (auto const& c : m_columns) { s += ','; detail::append_csv_field(s, c); }
  s += '\n';
  return s;
}

NITRO_RUNTIME_INLINE void run_history::append_csv_row(std::string& s, row const& r) const {
  detail::append_integer(s, r.step);
  s += ',';
  detail::append_integer(s, r.epoch);
  s += ',';
  detail::append_csv_field(s, r.split);
  for (std::size_t c = 0; c < m_columns.size(); ++c) {
    s += ',';
    if (has(r, c)) detail::append_number(s, get(r, c));
  }
  s += '\n';
}

NITRO_RUNTIME_INLINE void run_history::write_csv(std::filesystem::path const& path) const { detail::replace_file_atomically(path, to_csv(), "history CSV"); }

NITRO_RUNTIME_INLINE run_history run_history::from_csv(std::string_view text, std::string const& source) {
  run_history h;
  std::vector<std::vector<std::string>> records = parse_csv(text, source);
  if (records.empty()) return h;
  auto const& head = records[0];
  if (head.size() < 3 || head[0] != "step" || head[1] != "epoch" || head[2] != "split")
    throw error("E-LOG-006", "'" + source + "' is not a nitro metrics table: its header does not start with step,epoch,split",
                "move the file away, or point the CSV logger at another path");
  for (std::size_t c = 3; c < head.size(); ++c) h.column_index(head[c]);
  for (std::size_t i = 1; i < records.size(); ++i) {
    auto const& f = records[i];
    if (f.size() != head.size())
      throw error("E-LOG-006", "'" + source + "' line " + std::to_string(i + 1) + " has " + std::to_string(f.size()) + " fields, the header " +
                                   std::to_string(head.size()),
                  "move the damaged file away; the run writes a new one");
    const std::size_t r = h.new_row(to_int(f[0], source), static_cast<int>(to_int(f[1], source)), f[2]);
    for (std::size_t c = 3; c < f.size(); ++c)
      if (!f[c].empty()) h.set(r, c - 3, to_double(f[c], source));
  }
  return h;
}

NITRO_RUNTIME_INLINE std::size_t run_history::column_index(std::string_view name) {
  for (std::size_t c = 0; c < m_columns.size(); ++c)
    if (m_columns[c] == name) return c;
  detail::check_metric_name(name, {"step", "epoch", "split"}, "history table");
  m_columns.emplace_back(name);
  return m_columns.size() - 1;
}

NITRO_RUNTIME_INLINE std::vector<std::vector<std::string>> run_history::parse_csv(std::string_view t, std::string const& source) {
  std::vector<std::vector<std::string>> out;
  std::vector<std::string> rec;
  std::string field;
  bool quoted = false, any = false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (quoted) {
      if (c == '"' && i + 1 < t.size() && t[i + 1] == '"') { field += '"'; ++i; }
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      rec.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < t.size() && t[i + 1] == '\n') ++i;
      if (any || !field.empty()) { rec.push_back(std::move(field)); out.push_back(std::move(rec)); }
      rec.clear();
      field.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (quoted) throw error("E-LOG-006", "'" + source + "' ends inside a quoted field", "move the damaged file away; the run writes a new one");
  // a last line without its newline is a record cut short by a crash: dropped
  return out;
}

NITRO_RUNTIME_INLINE std::int64_t run_history::to_int(std::string const& s, std::string const& source) {
  std::int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc{} || r.ptr != s.data() + s.size())
    throw error("E-LOG-006", "'" + source + "' has '" + s + "' where a whole number belongs", "move the damaged file away; the run writes a new one");
  return v;
}

NITRO_RUNTIME_INLINE double run_history::to_double(std::string const& s, std::string const& source) {
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  double v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc{} || r.ptr != s.data() + s.size())
    throw error("E-LOG-006", "'" + source + "' has '" + s + "' where a number belongs", "move the damaged file away; the run writes a new one");
  return v;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
