// nitro/record/run_lock.hpp — one writer per run folder, and no resume from a run that is still
// being written.
//
//   nitro::run_lock lock(run_dir);               // E-REC-009 when another live process writes it
//   nitro::require_not_being_written(run_dir, "resume from");   // E-REC-009, naming that process
//
// The writer holds an exclusive flock(2) on <run>/lock for as long as it writes the run, and
// writes its pid, host and start time into the file for whoever is refused. The kernel drops the
// lock when the process ends, however it ends (SIGKILL, a crash, the OOM killer), so a lock left
// behind is stale by construction: the next taker finds the file unlocked, takes it, and says
// nothing. The file itself stays (unlinking it would let two processes lock two different inodes
// of one name); a released lock is an empty file. Within one process the lock is shared: the
// command line and the handle it drives take the same run's lock once between them.
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/core/error.hpp"

#include <filesystem>  // paths
#include <optional>    // holder
#include <string>      // messages

namespace nitro {

class run_lock {
 public:
  run_lock() = default;
  // Takes the run's lock (creating <run>/lock), or throws E-REC-009 naming the process that holds
  // it. A run this process holds already is shared, not refused.
  NITRO_RUNTIME_INLINE explicit run_lock(std::filesystem::path const& run);
  run_lock(run_lock&& o) noexcept : m_key(std::move(o.m_key)) { o.m_key.clear(); }
  run_lock& operator=(run_lock&& o) noexcept {
    if (this != &o) {
      release();
      m_key = std::move(o.m_key);
      o.m_key.clear();
    }
    return *this;
  }
  run_lock(run_lock const&) = delete;
  run_lock& operator=(run_lock const&) = delete;
  ~run_lock() { release(); }

  bool held() const noexcept { return !m_key.empty(); }

  // Who writes `run` now, when it is another live process ("pid 1234 on host node01 since
  // 2026-12-04T16:00:00Z"); nothing when no process does, or only this one.
  NITRO_RUNTIME_INLINE static std::optional<std::string> holder(std::filesystem::path const& run);

 private:
  NITRO_RUNTIME_INLINE void release() noexcept;
  std::string m_key;  // the run folder's canonical path, the process-wide table's key
};

// E-REC-009 when another live process writes `run`: `what` says what was asked of it ("resume
// from"), the message names the process and the fix.
NITRO_RUNTIME_INLINE void require_not_being_written(std::filesystem::path const& run, std::string const& what);

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
#include <cerrno>   // errno
#include <cstdio>   // snprintf
#include <cstring>  // strerror
#include <ctime>    // the holder's start time
#include <map>      // the process's held locks
#include <mutex>    // its lock

#include <fcntl.h>     // open
#include <sys/file.h>  // flock
#include <unistd.h>    // getpid, gethostname, ftruncate, pwrite, close, usleep

namespace nitro {

namespace detail {

struct held_run_lock {
  int fd = -1;
  int count = 0;
};
inline std::mutex& run_locks_mutex() {
  static std::mutex m;
  return m;
}
inline std::map<std::string, held_run_lock>& run_locks() {  // canonical run folder -> this process's lock on it
  static std::map<std::string, held_run_lock> m;
  return m;
}
inline std::string run_lock_key(std::filesystem::path const& run) {
  std::error_code ec;
  const auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(run, ec), ec);
  return (ec ? run : p).string();
}
inline std::string read_lock_text(int fd) {
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s.empty() ? std::string("another process (it has not written its name yet)") : s;
}
[[noreturn]] inline void run_being_written(std::filesystem::path const& run, std::string const& who, std::string const& what) {
  throw error("E-REC-009", "cannot " + what + " the run " + run.string() + ": it is being written by " + who,
              "wait for that run to end (or stop it), then try again; a lock left by a process that died is taken over by itself");
}

}  // namespace detail

NITRO_RUNTIME_INLINE run_lock::run_lock(std::filesystem::path const& run) {
  const std::string key = detail::run_lock_key(run);
  std::lock_guard<std::mutex> guard(detail::run_locks_mutex());
  auto& table = detail::run_locks();
  if (auto it = table.find(key); it != table.end()) {
    ++it->second.count;
    m_key = key;
    return;
  }
  const std::string file = (std::filesystem::path(run) / "lock").string();
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw error("E-REC-001", "cannot open the run's lock " + file + " (" + std::strerror(errno) + ")", "give the run a writable folder");
  // A reader asking who writes the run (holder()) holds a shared lock for a moment: a writer
  // refused by one tries again for up to a fifth of a second before it names the holder.
  int rc = -1;
  for (int attempt = 0; attempt < 40; ++attempt) {
    while ((rc = ::flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {}
    if (rc == 0 || errno != EWOULDBLOCK) break;
    ::usleep(5000);
  }
  if (rc != 0) {
    const int err = errno;
    const std::string who = detail::read_lock_text(fd);
    ::close(fd);
    if (err == EWOULDBLOCK) detail::run_being_written(run, who, "write");
    throw error("E-REC-001", "cannot lock the run " + run.string() + " (" + std::strerror(err) + ")", "give the run a local, writable folder");
  }
  char host[256] = "?";
  (void)::gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  char text[400];
  const int n = std::snprintf(text, sizeof text, "pid %lld on host %s since %s\n", static_cast<long long>(::getpid()), host, when);
  // the text only informs whoever is refused: a failed write leaves the lock itself intact
  if (::ftruncate(fd, 0) == 0 && n > 0) (void)!::pwrite(fd, text, static_cast<std::size_t>(n < int(sizeof text) ? n : int(sizeof text) - 1), 0);
  table[key] = detail::held_run_lock{fd, 1};
  m_key = key;
}

NITRO_RUNTIME_INLINE void run_lock::release() noexcept {
  if (m_key.empty()) return;
  std::lock_guard<std::mutex> guard(detail::run_locks_mutex());
  auto& table = detail::run_locks();
  if (auto it = table.find(m_key); it != table.end() && --it->second.count == 0) {
    (void)!::ftruncate(it->second.fd, 0);  // released: an empty file
    ::close(it->second.fd);                 // drops the flock
    table.erase(it);
  }
  m_key.clear();
}

NITRO_RUNTIME_INLINE std::optional<std::string> run_lock::holder(std::filesystem::path const& run) {
  {
    std::lock_guard<std::mutex> guard(detail::run_locks_mutex());
    if (detail::run_locks().count(detail::run_lock_key(run))) return std::nullopt;  // this process writes it
  }
  const std::string file = (std::filesystem::path(run) / "lock").string();
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;  // never locked (a run from before locks, or a copied folder)
  int rc;
  while ((rc = ::flock(fd, LOCK_SH | LOCK_NB)) != 0 && errno == EINTR) {}
  std::optional<std::string> who;
  if (rc != 0 && errno == EWOULDBLOCK) who = detail::read_lock_text(fd);
  ::close(fd);  // drops the shared lock when it was taken: nobody held it
  return who;
}

NITRO_RUNTIME_INLINE void require_not_being_written(std::filesystem::path const& run, std::string const& what) {
  if (auto who = run_lock::holder(run)) detail::run_being_written(run, *who, what);
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
