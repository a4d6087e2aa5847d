// nitro/record/detail/record_text.hpp — the few text and file habits every run record shares:
// numbers in their shortest exact form, CSV and JSON quoting, a file replaced atomically, and a
// file appended to one whole record at a time. Internal to nitro's trainer and loggers.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/record/atomic_file.hpp"

#include <charconv>     // to_chars: shortest round-trip doubles
#include <cmath>        // isnan, isinf
#include <cstdint>      // int64_t
#include <cstdio>       // FILE
#include <filesystem>   // paths
#include <initializer_list>  // reserved names
#include <string>       // buffers
#include <string_view>  // records
#include <system_error> // errc

#include <unistd.h>     // fsync, getpid

namespace nitro::detail {

// Appends the shortest text that reads back as exactly `v`, %g-style ("0.1", "0.0005", "1e-05", "nan", "inf", "-inf").
inline void append_number(std::string& out, double v) {
  if (std::isnan(v)) { out += "nan"; return; }
  if (std::isinf(v)) { out += v > 0 ? "inf" : "-inf"; return; }
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  out.append(buf, r.ptr);
}
inline void append_integer(std::string& out, std::int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}
// JSON has no NaN or infinity: they are written as null.
inline void append_json_number(std::string& out, double v) {
  if (std::isnan(v) || std::isinf(v)) out += "null";
  else append_number(out, v);
}
inline void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}
// RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled.
inline void append_csv_field(std::string& out, std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) { out += s; return; }
  out += '"';
  for (char c : s) { if (c == '"') out += '"'; out += c; }
  out += '"';
}

// Record columns a metric may not be called (it would be written twice).
inline void check_metric_name(std::string_view name, std::initializer_list<std::string_view> reserved, char const* where) {
  for (auto r : reserved)
    if (name == r)
      throw error("E-LOG-005", "a metric is called '" + std::string(name) + "', which the " + where + " uses for its own column",
                  "rename the metric (for instance '" + std::string(name) + "_value')");
}

inline void ensure_parent_directory(std::filesystem::path const& file, char const* what) {
  std::error_code ec;
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ec);
  if (ec)
    throw error("E-LOG-001", std::string("cannot create the directory of the ") + what + " '" + file.string() + "': " + ec.message(),
                "choose a writable run directory (run_dir) or logger path");
}

// Replaces `file` with `content` (record/atomic_file.hpp: the old file or the new one, never a
// mixture), making its folder first.
inline void replace_file_atomically(std::filesystem::path const& file, std::string_view content, char const* what) {
  ensure_parent_directory(file, what);
  atomic_write(file, content, what);
}

// A file that grows one whole record at a time: each record is handed to the kernel in one write
// and flushed, so a crash of the process leaves every earlier record intact and at worst a
// truncated last one (the readers skip it). Not fsync'd per record: a power loss may lose the
// records of the last few seconds, never corrupt earlier ones.
class append_file {
 public:
  append_file() = default;
  append_file(append_file const&) = delete;
  append_file& operator=(append_file const&) = delete;
  append_file(append_file&& o) noexcept : m_file(o.m_file), m_path(std::move(o.m_path)) { o.m_file = nullptr; }
  append_file& operator=(append_file&& o) noexcept {
    if (this != &o) { close(); m_file = o.m_file; m_path = std::move(o.m_path); o.m_file = nullptr; }
    return *this;
  }
  ~append_file() { close(); }

  // Opens (creating directories), appending to what is there; returns the size it had.
  std::int64_t open(std::filesystem::path const& path, char const* what) {
    close();
    ensure_parent_directory(path, what);
    m_path = path;
    m_what = what;
    m_file = std::fopen(path.string().c_str(), "ab");
    if (!m_file) throw error("E-LOG-001", std::string("cannot open the ") + what + " '" + path.string() + "' for appending", "choose a writable run directory or logger path");
    std::setvbuf(m_file, nullptr, _IONBF, 0);  // each record goes to the kernel as it is written: no stdio buffer to allocate later
    std::error_code ec;
    auto size = std::filesystem::file_size(path, ec);
    return ec ? 0 : static_cast<std::int64_t>(size);
  }
  bool is_open() const noexcept { return m_file != nullptr; }
  std::filesystem::path const& path() const noexcept { return m_path; }

  void write(std::string_view record) {
    if (!m_file) return;
    if (std::fwrite(record.data(), 1, record.size(), m_file) != record.size() || std::fflush(m_file) != 0)
      throw error("E-LOG-002", std::string("writing the ") + m_what + " '" + m_path.string() + "' failed (disk full?)", "free space in the run directory");
  }
  void close() noexcept {
    if (m_file) std::fclose(m_file);
    m_file = nullptr;
  }

 private:
  std::FILE* m_file = nullptr;
  std::filesystem::path m_path;
  char const* m_what = "log";
};

}  // namespace nitro::detail
