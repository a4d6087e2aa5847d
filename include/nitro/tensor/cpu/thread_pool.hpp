// nitro/tensor/cpu/thread_pool.hpp — the CPU backend's worker threads.
//
// A fixed set of threads started once per process; parallel_for(n, f) runs f(0..n-1) with the
// calling thread taking part, and returns when all are done. Workers spin briefly before sleeping,
// so the products of one training step (a few hundred microseconds each) are not paced by
// wake-ups. No allocation per call. The size is NITRO_NUM_THREADS, else the hardware's count.
#pragma once

#include <atomic>              // the hand-off
#include <condition_variable>  // sleeping workers
#include <cstdlib>             // getenv
#include <functional>          // the task
#include <mutex>               // sleeping workers
#include <string>              // stoi
#include <thread>              // workers
#include <vector>              // workers

namespace nitro::cpu {

class thread_pool {
 public:
  explicit thread_pool(int threads) : m_size(threads < 1 ? 1 : threads) {
    for (int i = 1; i < m_size; ++i) m_workers.emplace_back([this, i] { work(i); });
  }
  ~thread_pool() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_stop = true;
      m_generation.fetch_add(1);
    }
    m_cv.notify_all();
    for (auto& t : m_workers) t.join();
  }
  thread_pool(thread_pool const&) = delete;
  thread_pool& operator=(thread_pool const&) = delete;

  int size() const noexcept { return m_size; }

  // Runs f(i) for i in [0, n); the caller runs a share. Not reentrant: a task must not call it.
  template <class F>
  void parallel_for(int n, F&& f) {
    if (n <= 1 || m_size == 1 || t_inside) {
      for (int i = 0; i < n; ++i) f(i);
      return;
    }
    std::lock_guard<std::mutex> call(m_call);  // one parallel region at a time
    // A worker late from the previous region may still call fetch_add: park the counter out of
    // range while the task is written, then open it.
    m_next.store(1 << 30);
    m_task_f.store(static_cast<void*>(&f));
    m_task_call.store([](void* p, int i) { (*static_cast<std::remove_reference_t<F>*>(p))(i); });
    m_count.store(n);
    m_done.store(0);
    m_next.store(0);
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_generation.fetch_add(1, std::memory_order_release);
    }
    m_cv.notify_all();
    run_tasks();
    while (m_done.load() < n) std::this_thread::yield();
  }

  static thread_pool& instance() {
    static thread_pool pool(default_size());
    return pool;
  }
  static int default_size() {
    if (char const* s = std::getenv("NITRO_NUM_THREADS"); s && *s) {
      try { return std::max(1, std::stoi(s)); } catch (...) { return 1; }
    }
    unsigned h = std::thread::hardware_concurrency();
    return h == 0 ? 1 : static_cast<int>(h);
  }

 private:
  void run_tasks() {
    t_inside = true;
    for (int i; (i = m_next.fetch_add(1)) < m_count.load();) {
      m_task_call.load()(m_task_f.load(), i);
      m_done.fetch_add(1);
    }
    t_inside = false;
  }
  void work(int) {
    unsigned long seen = 0;
    while (true) {
      // spin a little for the next region, then sleep
      for (int spin = 0; spin < 20000 && m_generation.load(std::memory_order_acquire) == seen; ++spin) std::this_thread::yield();
      if (m_generation.load(std::memory_order_acquire) == seen) {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_cv.wait(lock, [&] { return m_generation.load() != seen; });
      }
      seen = m_generation.load(std::memory_order_acquire);
      if (m_stop) return;
      run_tasks();
    }
  }

  static inline thread_local bool t_inside = false;
  int m_size;
  std::vector<std::thread> m_workers;
  std::mutex m_mutex, m_call;
  std::condition_variable m_cv;
  std::atomic<unsigned long> m_generation{0};
  std::atomic<int> m_next{1 << 30}, m_done{0}, m_count{0};
  std::atomic<void*> m_task_f{nullptr};
  std::atomic<void (*)(void*, int)> m_task_call{nullptr};
  bool m_stop = false;
};

}  // namespace nitro::cpu
