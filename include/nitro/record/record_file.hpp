// nitro/record/record_file.hpp — run records that survive a crash: whole files replaced atomically,
// lines appended whole.
//
//   nitro::write_record_atomic("runs/x/status.json", text);   // atomic_write: temp file, fsync, rename, fsync the folder
//   nitro::append_record_line("runs/x/metrics.jsonl", line);        // one write(2) per line, O_APPEND
//
// A reader sees the old status or the new one, never half of either. Failures are E-REC-001
// naming the file and the system's reason.
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/core/error.hpp"
#include "nitro/record/atomic_file.hpp"

#include <cerrno>       // errno
#include <cstring>      // strerror
#include <filesystem>   // parent folders
#include <fstream>      // reading
#include <sstream>      // reading
#include <string>       // paths, contents

#include <fcntl.h>      // open
#include <sys/stat.h>   // fstat
#include <unistd.h>     // write, fsync, close, getpid

namespace nitro {

namespace detail {
[[noreturn]] NITRO_RUNTIME_INLINE void record_io_error(std::string const& what, std::string const& path);
NITRO_RUNTIME_INLINE void record_write_all(int fd, char const* p, std::size_t n, std::string const& path);
}  // namespace detail

// Replaces `path` with `content`: a reader sees the old file or the new one, whole
// (record/atomic_file.hpp, the one writer of whole files).
NITRO_RUNTIME_INLINE void write_record_atomic(std::string const& path, std::string const& content);

// Appends one line (a newline is added) with a single write, so concurrent readers never see a
// line cut in two by a crash between two writes; a write that fails part-way is cut back off.
NITRO_RUNTIME_INLINE void append_record_line(std::string const& path, std::string const& line, bool sync = false);

// The whole file, or E-REC-002 when it cannot be read.
NITRO_RUNTIME_INLINE std::string read_record_file(std::string const& path);

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::detail {

NITRO_RUNTIME_INLINE void record_io_error(std::string const& what, std::string const& path) {
  const int e = errno;
  throw error("E-REC-001", "could not " + what + " " + path + ": " + std::strerror(e),
              "check that the run folder is writable and the disk is not full (--run-dir chooses another folder)");
}

NITRO_RUNTIME_INLINE void record_write_all(int fd, char const* p, std::size_t n, std::string const& path) {
  struct stat st {};
  const off_t before = ::fstat(fd, &st) == 0 ? st.st_size : -1;
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      const int e = errno;
      if (e == EINTR) continue;
      if (before >= 0) (void)::ftruncate(fd, before);  // a line is whole or absent, never cut
      ::close(fd);
      errno = e;
      record_io_error("write", path);
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

}  // namespace nitro::detail

namespace nitro {

NITRO_RUNTIME_INLINE void write_record_atomic(std::string const& path, std::string const& content) { atomic_write(path, content, "record"); }

NITRO_RUNTIME_INLINE void append_record_line(std::string const& path, std::string const& line, bool sync) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) detail::record_io_error("open", path);
  std::string l = line + "\n";
  detail::record_write_all(fd, l.data(), l.size(), path);
  if (sync && ::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    detail::record_io_error("fsync", path);
  }
  ::close(fd);
}

NITRO_RUNTIME_INLINE std::string read_record_file(std::string const& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw error("E-REC-002", "could not read " + path + (std::filesystem::exists(path) ? "" : ": no such file"),
                "name a run folder that holds a complete record (manifest.json, status.json)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
