// nitro/tensor/cpu/thread_pool.hpp — the CPU backend's worker threads.
//
// A fixed set of threads started once per process. parallel_for(n, f) runs f(0..n-1): the calling
// thread takes part, every thread takes the next index from one shared counter, and the call
// returns when all n are done — so a worker that starts late simply takes fewer, and nobody waits
// for a share assigned in advance. A training step hands work over hundreds of times a second, so
// the hand-off must cost about a microsecond: an idle worker watches for the next region with the
// CPU's pause instruction (no system call) for a while (spin_window) and only then sleeps on a
// condition variable; a caller wakes sleepers only when there are some. Nothing is
// allocated per call. for_each_share(count, f) is the other shape of region: one contiguous share
// of a count per thread, the same share to the same thread call after call, for memory-bound passes
// that should stay in one core's cache. Size: NITRO_NUM_THREADS, else the hardware's count.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/core/error.hpp"

#include <atomic>              // the hand-off
#include <chrono>              // spin window
#include <condition_variable>  // sleeping workers
#include <mutex>               // sleeping workers
#include <cstdint>             // uint32_t
#include <cstdlib>             // getenv, strtol
#include <memory>              // the shares' claims
#include <string>              // messages
#include <thread>              // workers
#include <type_traits>         // remove_reference_t
#include <vector>              // workers

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // _mm_pause
#endif

namespace nitro::cpu {

namespace detail {
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
}  // namespace detail

class thread_pool {
 public:
  // How long an idle worker keeps watching for work before it sleeps.
  static constexpr std::chrono::microseconds spin_window{2000};

  explicit thread_pool(int threads);
  ~thread_pool();
  thread_pool(thread_pool const&) = delete;
  thread_pool& operator=(thread_pool const&) = delete;

  int size() const noexcept { return m_size; }
  // Is the calling thread running a task of a region? (Then parallel_for runs inline.)
  static bool inside() noexcept { return t_inside; }
  // The calling thread's place in a region: i for the pool's worker i (1 .. size-1), 0 for any
  // other thread (the caller). Lets a task use a per-thread slot of memory its caller prepared.
  static int thread_index() noexcept { return t_index; }

  // Runs f(i) for every i in [0, n), each exactly once, on the pool's threads and the caller.
  // A task that calls parallel_for runs that inner loop inline. Regions from different calling
  // threads take turns.
  template <class F>
  void parallel_for(int n, F&& f) {
    if (n <= 0) return;
    if (n == 1 || m_size == 1 || t_inside) {
      for (int i = 0; i < n; ++i) f(i);
      return;
    }
    for (int spins = 0; m_busy.exchange(true, std::memory_order_acquire); ++spins) {  // one region at a time
      if (spins < 4096) detail::cpu_relax();
      else std::this_thread::yield();
    }
    // The task first, then the work word that opens it (count n, next index 0). A worker still
    // leaving the previous region takes an index of the old word (at or past the old count) and
    // leaves, whatever it reads afterwards: the index and the count it is checked against come
    // from one read-modify-write, so a stale index is never checked against the new count.
    m_task_f.store(static_cast<void*>(&f));
    m_task_call.store([](void* p, int i) { (*static_cast<std::remove_reference_t<F>*>(p))(i); });
    m_done.store(0);
    m_work.store(static_cast<std::uint64_t>(static_cast<std::uint32_t>(n)) << 32);
    wake();
    run_tasks();
    for (int spins = 0; m_done.load(std::memory_order_acquire) < n; ++spins) {
      if (spins < 4096) detail::cpu_relax();
      else std::this_thread::yield();  // a worker holding a task was descheduled
    }
    m_busy.store(false, std::memory_order_release);
  }

  // [0, count) cut into size() contiguous shares, f(begin, end) once for each non-empty one. Share
  // s goes to thread s (the caller is 0) whenever that thread comes for it — a thread that comes
  // first takes its own share, else the first unclaimed one — so a pass over the same buffers each
  // step keeps each share in one core's cache. On a machine whose cores are far apart (a cache line
  // between the two vCPUs of bench/README.md's machine takes about 240 ns) that halves a
  // memory-bound pass, where parallel_for's first-come order moves the data between cores. A
  // thread that is late has its share taken by another: never waited for, never run twice.
  template <class F>
  void for_each_share(std::int64_t count, F&& f) {
    if (count <= 0) return;
    if (m_size == 1 || t_inside) return f(std::int64_t{0}, count);
    // Claims are tagged with this call's number: a share is free while its tag is another's.
    const std::uint64_t call = m_share_calls.fetch_add(1) + 1;
    const int shares = m_size;
    parallel_for(shares, [&](int) {
      auto claim = [&](int s) {
        std::uint64_t seen = m_share_claims[static_cast<std::size_t>(s)].load();
        while (seen != call)
          if (m_share_claims[static_cast<std::size_t>(s)].compare_exchange_weak(seen, call)) return true;
        return false;
      };
      int s = t_index;
      if (!claim(s))
        for (s = 0; !claim(s); ++s) {}
      const std::int64_t b = count * s / shares, e = count * (s + 1) / shares;
      if (b < e) f(b, e);
    });
  }

  static thread_pool& instance();
  // NITRO_NUM_THREADS when set (a whole number >= 1), else the hardware's thread count.
  static int default_size();

 private:
  void run_tasks();
  // Opens a region (or the way out) to every worker: bump the generation; wake the sleepers, if
  // any. (Seq-cst order: either the caller sees a worker's m_sleepers increment, or that worker
  // sees the new generation before it sleeps.)
  void wake();
  void work();

  static inline thread_local bool t_inside = false;
  static inline thread_local int t_index = 0;
  int m_size;
  std::vector<std::thread> m_workers;
  std::atomic<std::uint32_t> m_generation{0};
  std::atomic<int> m_sleepers{0};
  std::mutex m_sleep_mutex;
  std::condition_variable m_sleep_cv;
  std::atomic<bool> m_busy{false}, m_stop{false};
  // The region's work: its task count in the high 32 bits, the next index in the low 32 (a
  // region's indices plus one extra take per thread never reach 2^32).
  std::atomic<std::uint64_t> m_work{0};
  std::atomic<int> m_done{0};
  std::atomic<void*> m_task_f{nullptr};
  std::atomic<void (*)(void*, int)> m_task_call{nullptr};
  // for_each_share: the calls so far, and per share the call that claimed it last
  std::atomic<std::uint64_t> m_share_calls{0};
  std::unique_ptr<std::atomic<std::uint64_t>[]> m_share_claims;
};

// [0, items) cut into at most 16 fixed, contiguous chunks: the cut depends on the count alone, so
// work done chunk by chunk (a scratch per chunk, a partial sum per chunk) has the same bits on any
// number of threads. For kernels whose items are few and heavy: a batch's images, a tensor's planes.
struct fixed_chunks {
  static constexpr std::int64_t most = 16;
  std::int64_t n = 0, count = 0, per = 0;
  explicit fixed_chunks(std::int64_t items) noexcept : n(items) {
    count = items < most ? items : most;
    per = count ? (items + count - 1) / count : 0;
    if (per) count = (items + per - 1) / per;
  }
  std::int64_t begin(std::int64_t c) const noexcept { return c * per < n ? c * per : n; }
  std::int64_t end(std::int64_t c) const noexcept { return (c + 1) * per < n ? (c + 1) * per : n; }
};
// f(chunk) for every chunk: on the pool's workers when the work (flops, or values visited) is worth
// a parallel region, else in order on the calling thread.
template <class F>
void run_chunks(fixed_chunks const& ch, double work, F&& f) {
  if (ch.count <= 1 || work < 5e5) {
    for (std::int64_t i = 0; i < ch.count; ++i) f(i);
    return;
  }
  thread_pool::instance().parallel_for(static_cast<int>(ch.count), [&](int i) { f(static_cast<std::int64_t>(i)); });
}

}  // namespace nitro::cpu

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::cpu {

NITRO_RUNTIME_INLINE thread_pool::thread_pool(int threads)
    : m_size(threads < 1 ? 1 : threads), m_share_claims(new std::atomic<std::uint64_t>[static_cast<std::size_t>(m_size)]) {
  for (int s = 0; s < m_size; ++s) m_share_claims[static_cast<std::size_t>(s)].store(0);
  m_workers.reserve(static_cast<std::size_t>(m_size - 1));
  for (int i = 1; i < m_size; ++i) m_workers.emplace_back([this, i] { t_index = i; work(); });
}

NITRO_RUNTIME_INLINE thread_pool::~thread_pool() {
  m_stop.store(true);
  wake();
  for (auto& t : m_workers) t.join();
}

NITRO_RUNTIME_INLINE thread_pool& thread_pool::instance() {
  static thread_pool pool(default_size());
  return pool;
}

NITRO_RUNTIME_INLINE int thread_pool::default_size() {
  if (char const* s = std::getenv("NITRO_NUM_THREADS"); s && *s) {
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (*end != '\0' || v < 1 || v > 1024)
      throw error("E-CPU-001", std::string("NITRO_NUM_THREADS='") + s + "' is not a whole number of threads between 1 and 1024",
                  "set NITRO_NUM_THREADS to the number of threads the CPU backend may use (e.g. 2), or unset it to use every hardware thread");
    return static_cast<int>(v);
  }
  const unsigned h = std::thread::hardware_concurrency();
  return h == 0 ? 1 : static_cast<int>(h);
}

NITRO_RUNTIME_INLINE void thread_pool::run_tasks() {
  t_inside = true;
  while (true) {
    const std::uint64_t w = m_work.fetch_add(1);
    const auto i = static_cast<std::uint32_t>(w), count = static_cast<std::uint32_t>(w >> 32);
    if (i >= count) break;
    m_task_call.load()(m_task_f.load(), static_cast<int>(i));
    m_done.fetch_add(1, std::memory_order_release);
  }
  t_inside = false;
}

NITRO_RUNTIME_INLINE void thread_pool::wake() {
  m_generation.fetch_add(1);
  if (m_sleepers.load() > 0) {
    std::lock_guard<std::mutex> lock(m_sleep_mutex);
    m_sleep_cv.notify_all();
  }
}

NITRO_RUNTIME_INLINE void thread_pool::work() {
  std::uint32_t seen = 0;  // the generation at construction: a worker that starts late still sees every bump
  while (true) {
    // watch for the next region for a while, then sleep until a caller bumps the generation
    auto until = std::chrono::steady_clock::now() + spin_window;
    for (int spins = 1; m_generation.load(std::memory_order_acquire) == seen; ++spins) {
      detail::cpu_relax();
      if (spins % 256 == 0 && std::chrono::steady_clock::now() > until) {
        std::unique_lock<std::mutex> lock(m_sleep_mutex);
        m_sleepers.fetch_add(1);
        m_sleep_cv.wait(lock, [&] { return m_generation.load() != seen; });
        m_sleepers.fetch_sub(1);
        until = std::chrono::steady_clock::now() + spin_window;
      }
    }
    seen = m_generation.load(std::memory_order_acquire);
    if (m_stop.load()) return;
    run_tasks();
  }
}

}  // namespace nitro::cpu
#endif  // !NITRO_RUNTIME_EXTERN
