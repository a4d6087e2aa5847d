// faultfs — a storage fault, injected at one chosen write of a run (LD_PRELOAD shim; tests only).
//
//   NITRO_FAULT_DIR=runs/ NITRO_FAULT_AT=17 NITRO_FAULT_KIND=enospc LD_PRELOAD=libnitro_faultfs.so ./fashion_mlp run ...
//
// Counts the write(2), fsync(2), fdatasync(2) and rename(2) calls whose file lies under
// NITRO_FAULT_DIR (resolved through /proc/self/fd for descriptors) and makes the NITRO_FAULT_AT-th
// fail the way a disk fails:
//   enospc  that call fails with ENOSPC, and so does every write after it (the disk is full);
//   eio     that call alone fails with EIO (a transient I/O error; fsync's is the one that loses data);
//   short   a write of n bytes writes n/2 and returns n/2, and every write after it fails with
//           ENOSPC (the disk filled up in the middle of a write); another call fails as enospc.
// NITRO_FAULT_AT=0 injects nothing. NITRO_FAULT_LOG=FILE appends "k op path" for every counted
// call, so a clean run lists the calls a test then fails one by one. Only the calls the program
// makes through the dynamic linker are seen: nitro writes its records with these calls directly.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/syscall.h>

namespace {

struct config {
  char dir[4096] = {0};
  std::size_t dir_len = 0;
  long at = 0;
  enum kind_t { enospc, eio, short_write } kind = enospc;
  int log_fd = -1;
  bool on = false;
};

config& cfg() {
  static config c = [] {
    config c;
    if (char const* d = std::getenv("NITRO_FAULT_DIR")) {
      if (char* r = ::realpath(d, nullptr)) {
        std::snprintf(c.dir, sizeof c.dir, "%s", r);
        std::free(r);
      } else {
        std::snprintf(c.dir, sizeof c.dir, "%s", d);
      }
      c.dir_len = std::strlen(c.dir);
      c.on = c.dir_len > 0;
    }
    if (char const* a = std::getenv("NITRO_FAULT_AT")) c.at = std::atol(a);
    if (char const* k = std::getenv("NITRO_FAULT_KIND")) {
      if (!std::strcmp(k, "eio")) c.kind = config::eio;
      else if (!std::strcmp(k, "short")) c.kind = config::short_write;
    }
    if (char const* l = std::getenv("NITRO_FAULT_LOG")) c.log_fd = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, l, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    return c;
  }();
  return c;
}

std::atomic<long> g_count{0};
std::atomic<bool> g_full{false};  // enospc/short: the disk is full from the fault on

bool under_dir(char const* path) {
  config const& c = cfg();
  return c.on && std::strncmp(path, c.dir, c.dir_len) == 0 && (path[c.dir_len] == '/' || path[c.dir_len] == '\0');
}

bool fd_under_dir(int fd, char* path, std::size_t cap) {
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, path, cap - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  return under_dir(path);
}

void log_call(long k, char const* op, char const* path) {
  const int fd = cfg().log_fd;
  if (fd < 0) return;
  char line[4200];
  const int n = std::snprintf(line, sizeof line, "%ld %s %s\n", k, op, path);
  if (n > 0) (void)::syscall(SYS_write, fd, line, static_cast<std::size_t>(n));
}

enum class verdict { pass, fail, half };

// The fate of one counted call; `is_write` for write(2), which a full disk refuses from then on.
verdict judge(char const* op, char const* path, bool is_write, int& err) {
  const long k = ++g_count;
  log_call(k, op, path);
  config const& c = cfg();
  if (is_write && g_full.load()) { err = ENOSPC; return verdict::fail; }
  if (c.at <= 0 || k != c.at) return verdict::pass;
  switch (c.kind) {
    case config::eio: err = EIO; return verdict::fail;
    case config::enospc: g_full = true; err = ENOSPC; return verdict::fail;
    case config::short_write: g_full = true; err = ENOSPC; return is_write ? verdict::half : verdict::fail;
  }
  return verdict::pass;
}

template <class F>
F next(char const* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

ssize_t write(int fd, void const* buf, std::size_t n) {
  static auto real = next<ssize_t (*)(int, void const*, std::size_t)>("write");
  char path[4096];
  if (fd > 2 && fd_under_dir(fd, path, sizeof path)) {
    int err = 0;
    switch (judge("write", path, true, err)) {
      case verdict::pass: break;
      case verdict::fail: errno = err; return -1;
      case verdict::half: if (n >= 2) return real(fd, buf, n / 2); errno = err; return -1;
    }
  }
  return real(fd, buf, n);
}

int fsync(int fd) {
  static auto real = next<int (*)(int)>("fsync");
  char path[4096];
  if (fd_under_dir(fd, path, sizeof path)) {
    int err = 0;
    if (judge("fsync", path, false, err) != verdict::pass) { errno = err; return -1; }
  }
  return real(fd);
}

int fdatasync(int fd) {
  static auto real = next<int (*)(int)>("fdatasync");
  char path[4096];
  if (fd_under_dir(fd, path, sizeof path)) {
    int err = 0;
    if (judge("fdatasync", path, false, err) != verdict::pass) { errno = err; return -1; }
  }
  return real(fd);
}

int rename(char const* from, char const* to) {
  static auto real = next<int (*)(char const*, char const*)>("rename");
  char resolved[4096];
  char const* p = to;
  if (char* r = ::realpath(from, resolved)) p = r;  // the temporary sits beside the target
  if (under_dir(p)) {
    int err = 0;
    if (judge("rename", to, false, err) != verdict::pass) { errno = err; return -1; }
  }
  return real(from, to);
}

}  // extern "C"
