// nitro/record/detail/record_text.hpp — the few text and file habits every run record shares:
// numbers in their shortest exact form, CSV and JSON quoting, a file replaced atomically, and a
// file appended to one whole record at a time. Internal to nitro's trainer and loggers.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/record/atomic_file.hpp"

#include <charconv>     // to_chars: shortest round-trip doubles
#include <cmath>        // isnan, isinf
#include <cstdint>      // int64_t
#include <cstdio>       // snprintf
#include <filesystem>   // paths
#include <initializer_list>  // reserved names
#include <string>       // buffers
#include <string_view>  // records
#include <system_error> // errc

#include <cerrno>       // errno
#include <cstring>      // strerror
#include <fcntl.h>      // open
#include <sys/stat.h>   // fstat
#include <unistd.h>     // write, ftruncate, close

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

// A file that grows one whole record at a time: each record is handed to the kernel with write(2)
// (no stdio buffer), so a crash of the process leaves every earlier record intact and at worst a
// truncated last one (the readers skip it). A write that fails part-way (a full disk, an I/O
// error) is taken back: the file is cut to the size it had before the record, so the record is
// whole or absent. Not fsync'd per record: a power loss may lose the records of the last few
// seconds, never corrupt earlier ones.
class append_file {
 public:
  append_file() = default;
  append_file(append_file const&) = delete;
  append_file& operator=(append_file const&) = delete;
  append_file(append_file&& o) noexcept : m_fd(o.m_fd), m_size(o.m_size), m_path(std::move(o.m_path)), m_what(o.m_what) { o.m_fd = -1; }
  append_file& operator=(append_file&& o) noexcept {
    if (this != &o) {
      close();
      m_fd = o.m_fd;
      m_size = o.m_size;
      m_path = std::move(o.m_path);
      m_what = o.m_what;
      o.m_fd = -1;
    }
    return *this;
  }
  ~append_file() { close(); }

  // Opens (creating directories), appending to what is there; returns the size it had.
  std::int64_t open(std::filesystem::path const& path, char const* what) {
    close();
    ensure_parent_directory(path, what);
    m_path = path;
    m_what = what;
    m_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (m_fd < 0)
      throw error("E-LOG-001", std::string("cannot open the ") + what + " '" + path.string() + "' for appending (" + std::strerror(errno) + ")",
                  "choose a writable run directory or logger path");
    struct stat st {};
    m_size = ::fstat(m_fd, &st) == 0 ? static_cast<std::int64_t>(st.st_size) : 0;
    return m_size;
  }
  bool is_open() const noexcept { return m_fd >= 0; }
  std::filesystem::path const& path() const noexcept { return m_path; }

  void write(std::string_view record) {
    if (m_fd < 0) return;
    char const* p = record.data();
    std::size_t n = record.size();
    while (n > 0) {
      const ssize_t w = ::write(m_fd, p, n);
      if (w < 0) {
        const int e = errno;
        if (e == EINTR) continue;
        // take the part already written back, so the file never holds a torn record
        const bool cut = ::ftruncate(m_fd, static_cast<off_t>(m_size)) == 0;
        throw error("E-LOG-002",
                    std::string("writing the ") + m_what + " '" + m_path.string() + "' failed (" + std::strerror(e) + ")" +
                        (cut ? "; the record was not written" : "; its last record may be cut short"),
                    "free space in the run directory (or check the disk), then resume the run: run --resume RUN");
      }
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    m_size += static_cast<std::int64_t>(record.size());
  }
  void close() noexcept {
    if (m_fd >= 0) ::close(m_fd);
    m_fd = -1;
  }

 private:
  int m_fd = -1;
  std::int64_t m_size = 0;  // the size after the last whole record
  std::filesystem::path m_path;
  char const* m_what = "log";
};

}  // namespace nitro::detail
