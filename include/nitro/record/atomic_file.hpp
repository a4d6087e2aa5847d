// nitro/record/atomic_file.hpp — files that are either wholly written or not there at all.
//
//   nitro::atomic_file f("runs/x/checkpoints/index.json");
//   f.write(text.data(), text.size());
//   f.commit();                       // now, and only now, the new contents replace the old
//
//   nitro::atomic_write(path, bytes, "status file");   // the same in one call
//
// The one writer of whole files: checkpoints and their index, the manifest and status, the CSV
// table, sweep summaries. Every failure is E-REC-001 naming the file, what it is, the step that
// failed and the system's reason.
//
// The bytes go to a hidden temporary file in the target's own directory (`.<name>.tmp.<pid>.<n>`),
// which is flushed to the disk (fsync), renamed over the target (rename is atomic within a file
// system) and then the directory itself is flushed, so the rename survives a power cut. A process
// killed at any moment leaves the old file or the new one, never a mixture; at worst a temporary
// file stays behind, which `remove_stale_temporaries(dir)` clears. An atomic_file destroyed
// without commit() removes its temporary and leaves the target untouched.
//
// Not for: several writers of one target at once (the last rename wins), or network file
// systems that do not honour fsync.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/core/error.hpp"

#include <atomic>      // temporary-name counter
#include <cstddef>     // size_t
#include <cstring>     // strerror
#include <filesystem>  // paths
#include <string>      // messages
#include <string_view> // atomic_write

namespace nitro {

namespace detail {
inline std::string errno_text(int e) { return std::strerror(e); }

[[noreturn]] NITRO_RUNTIME_INLINE void write_failed(std::filesystem::path const& target, char const* kind, std::string const& step, int e);

inline std::atomic<unsigned long>& temporary_counter() noexcept {
  static std::atomic<unsigned long> n{0};
  return n;
}
inline bool is_temporary_name(std::string const& name) {
  return name.size() > 1 && name[0] == '.' && name.find(".tmp.") != std::string::npos;
}
}  // namespace detail

// Flushes a directory's entries (a rename or unlink in it) to the disk.
NITRO_RUNTIME_INLINE void fsync_directory(std::filesystem::path const& dir, char const* kind = "folder");

class atomic_file {
 public:
  // `kind` says what the file is in an error ("checkpoint", "status file"); it must outlive the writer.
  explicit atomic_file(std::filesystem::path target, char const* kind = "file");
  atomic_file(atomic_file const&) = delete;
  atomic_file& operator=(atomic_file const&) = delete;
  ~atomic_file();

  // Appends bytes to the temporary file (all of them: short writes and EINTR are retried).
  void write(void const* data, std::size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  std::size_t bytes_written() const noexcept { return m_bytes; }

  // fsync, rename over the target, fsync the directory. After it the target holds the new bytes.
  void commit();

  std::filesystem::path const& target() const noexcept { return m_target; }
  std::filesystem::path const& temporary() const noexcept { return m_temp; }

 private:
  std::filesystem::path m_target, m_temp;
  char const* m_kind;
  int m_fd = -1;
  std::size_t m_bytes = 0;
  bool m_committed = false;
};

// Replaces (or creates) `target` with `bytes`, atomically and durably.
NITRO_RUNTIME_INLINE void atomic_write(std::filesystem::path const& target, std::string_view bytes, char const* kind = "file");

// Removes the temporaries that killed writers left in `dir`; returns how many. A temporary of a
// writer still running in another process is removed too: call it when no one else writes there.
NITRO_RUNTIME_INLINE int remove_stale_temporaries(std::filesystem::path const& dir);

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
#include <cerrno>  // errno, EINTR

#include <fcntl.h>   // open
#include <unistd.h>  // write, fsync, close, getpid

namespace nitro {

[[noreturn]] NITRO_RUNTIME_INLINE void detail::write_failed(std::filesystem::path const& target, char const* kind, std::string const& step, int e) {
  throw error("E-REC-001", std::string("cannot write the ") + kind + " '" + target.string() + "': " + step + " failed (" + errno_text(e) + ")",
              "check that the folder exists and is writable and that the disk has room (--run-dir chooses another folder)");
}

NITRO_RUNTIME_INLINE void fsync_directory(std::filesystem::path const& dir, char const* kind) {
  const std::filesystem::path d = dir.empty() ? std::filesystem::path(".") : dir;
  int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) detail::write_failed(d, kind, "opening the directory", errno);
  int rc;
  do rc = ::fsync(fd); while (rc != 0 && errno == EINTR);
  const int e = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory (EINVAL): the rename is still atomic there.
  if (rc != 0 && e != EINVAL) detail::write_failed(d, kind, "fsync of the directory", e);
}

NITRO_RUNTIME_INLINE atomic_file::atomic_file(std::filesystem::path target, char const* kind) : m_target(std::move(target)), m_kind(kind) {
  const auto dir = m_target.parent_path();
  m_temp = (dir.empty() ? std::filesystem::path(".") : dir) /
           ("." + m_target.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
            std::to_string(detail::temporary_counter().fetch_add(1)));
  m_fd = ::open(m_temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (m_fd < 0) detail::write_failed(m_target, m_kind, "creating the temporary file '" + m_temp.filename().string() + "'", errno);
}

NITRO_RUNTIME_INLINE atomic_file::~atomic_file() {
  if (m_fd >= 0) ::close(m_fd);
  if (!m_committed) ::unlink(m_temp.c_str());
}

NITRO_RUNTIME_INLINE void atomic_file::write(void const* data, std::size_t n) {
  auto const* p = static_cast<char const*>(data);
  while (n > 0) {
    const std::size_t chunk = n < (std::size_t(1) << 30) ? n : (std::size_t(1) << 30);
    const ssize_t w = ::write(m_fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      detail::write_failed(m_target, m_kind, "write", errno);
    }
    p += w;
    n -= static_cast<std::size_t>(w);
    m_bytes += static_cast<std::size_t>(w);
  }
}

NITRO_RUNTIME_INLINE void atomic_file::commit() {
  int rc;
  do rc = ::fsync(m_fd); while (rc != 0 && errno == EINTR);
  if (rc != 0) detail::write_failed(m_target, m_kind, "fsync", errno);
  if (::close(m_fd) != 0) {
    m_fd = -1;
    detail::write_failed(m_target, m_kind, "close", errno);
  }
  m_fd = -1;
  if (::rename(m_temp.c_str(), m_target.c_str()) != 0) detail::write_failed(m_target, m_kind, "rename", errno);
  m_committed = true;
  fsync_directory(m_target.parent_path(), m_kind);
}

NITRO_RUNTIME_INLINE void atomic_write(std::filesystem::path const& target, std::string_view bytes, char const* kind) {
  atomic_file f(target, kind);
  f.write(bytes);
  f.commit();
}

NITRO_RUNTIME_INLINE int remove_stale_temporaries(std::filesystem::path const& dir) {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec) && detail::is_temporary_name(it->path().filename().string())) {
      std::error_code rm;
      if (std::filesystem::remove(it->path(), rm)) ++n;
    }
  }
  return n;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
