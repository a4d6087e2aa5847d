// nitro/dist/communicator.hpp — the ranks of an MPI job as nitro::dist::replicas, with deadlines.
//
//   nitro::dist::session mpi(argc, argv);          // MPI_Init once per process (dist/session.hpp)
//   nitro::dist::communicator& world = mpi.world();
//   world.rank(), world.size(), world.barrier("the start");
//   auto q = world.start_sum(grads, n, "the gradient all-reduce of group 'head'");
//   world.wait(q);                                // E-DIST-003/004/005 instead of a hang
//
// Every collective is non-blocking underneath (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather(v),
// MPI_Ibarrier) and completed by polling MPI_Test against a deadline, so a rank that died, hangs or
// lost its network fails the run with a clear message instead of blocking forever. While it waits
// the rank also watches for:
//   - a failure notice: a rank that fails (an exception, a timeout) first sends its message to every
//     other rank, which then fails with E-DIST-005 "rank 1 failed: E-TRAIN-001 ..." (the status of
//     the run names the real cause, not the symptom);
//   - a stop request (SIGTERM/SIGINT, see session.hpp): mpirun sends SIGTERM to every rank ~1 s
//     after one rank died and SIGKILL 1 s later (Open MPI's odls_base_sigkill_timeout); a rank
//     whose peers do not join the collective within the grace (0.5 s) after a stop request fails
//     with E-DIST-005 while it can still write the run's status.
// The communicator's errors come back as return codes (MPI_ERRORS_RETURN on its own duplicate of the
// parent communicator), so an MPI failure is E-DIST-004 with MPI's text, not Open MPI's abort.
// After a failure every further collective throws the same error; the session then ends the job
// with MPI_Abort (never MPI_Finalize, which would wait for the dead rank).
//
// Deadline: collective_options::timeout_seconds, default 600 s or $NITRO_DIST_TIMEOUT. It bounds
// how long a rank waits for the slowest one: keep it above the longest legitimate gap (rank 0
// writing a large checkpoint while the others wait in the next step's all-reduce).
// Polling: MPI_Test back to back for the first ~2000 tries, then sched_yield, then 50 us sleeps: a
// waiting rank does not steal a core from a rank still computing on the same host.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/dist/replicas.hpp"

#include <mpi.h>

#include <chrono>       // deadlines
#include <cmath>        // isfinite
#include <csignal>      // sig_atomic_t
#include <cstdint>      // int64_t
#include <cstdio>       // snprintf
#include <cstdlib>      // getenv, strtod
#include <limits>       // INT_MAX
#include <string>       // messages
#include <string_view>  // labels
#include <thread>       // sleep_for
#include <vector>       // requests, notices

#include <sched.h>      // sched_yield

namespace nitro::dist {

namespace detail {
inline volatile std::sig_atomic_t& stop_signal() noexcept {
  static volatile std::sig_atomic_t s = 0;
  return s;
}
inline constexpr int notice_tag = 0x4e49;  // "NI": a rank's failure message

inline std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}
inline std::string seconds_text(double s) {
  char b[32];
  std::snprintf(b, sizeof b, s < 10 ? "%.1f s" : "%.0f s", s);
  return b;
}
}  // namespace detail

// True once SIGTERM or SIGINT reached a process whose session installed nitro's handler.
inline bool stop_signal_received() noexcept { return detail::stop_signal() != 0; }

struct collective_options {
  double timeout_seconds = 600;       // the deadline of every collective
  double stop_grace_seconds = 0.5;    // after a stop request, how long the others may take to join
  bool (*stop_requested)() = &stop_signal_received;  // polled while waiting (nitro::main sets its own)

  // The defaults, with $NITRO_DIST_TIMEOUT (seconds) when set. E-DIST-010 for a bad value.
  static collective_options from_environment() {
    collective_options o;
    if (char const* s = std::getenv("NITRO_DIST_TIMEOUT"); s && *s) {
      char* end = nullptr;
      const double v = std::strtod(s, &end);
      if (end == s || *end != '\0' || !(v > 0) || !std::isfinite(v))
        throw error("E-DIST-010", "NITRO_DIST_TIMEOUT is '" + std::string(s) + "', not a positive number of seconds",
                    "set it to the seconds a rank may wait for the others in one collective (600 by default), or unset it");
      o.timeout_seconds = v;
    }
    return o;
  }
};

class communicator final : public replicas {
 public:
  // A duplicate of `parent` (MPI_COMM_WORLD by default) whose errors are returned, not fatal.
  explicit communicator(MPI_Comm parent = MPI_COMM_WORLD, collective_options opt = collective_options::from_environment())
      : m_opt(opt) {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised)
      throw error("E-DIST-006", "a nitro::dist::communicator was made before MPI was initialised",
                  "make a nitro::dist::session first (once, at the top of main), and take its world()");
    check(MPI_Comm_dup(parent, &m_comm), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(m_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m_comm, &m_rank);
    MPI_Comm_size(m_comm, &m_size);
    m_pending.reserve(16);
  }
  ~communicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !m_failed && m_comm != MPI_COMM_NULL) MPI_Comm_free(&m_comm);
  }
  communicator(communicator const&) = delete;
  communicator& operator=(communicator const&) = delete;

  int rank() const noexcept override { return m_rank; }
  int size() const noexcept override { return m_size; }
  MPI_Comm get() const noexcept { return m_comm; }
  collective_options& options() noexcept { return m_opt; }
  bool failed() const noexcept { return m_failed; }
  std::string const& failure() const noexcept { return m_failure; }

  // ---- replicas ---------------------------------------------------------------------------------
  request start_sum(float* data, std::int64_t n, std::string_view what) override { return start_allreduce(data, n, MPI_FLOAT, MPI_SUM, what); }
  request start_sum(double* data, std::int64_t n, std::string_view what) override { return start_allreduce(data, n, MPI_DOUBLE, MPI_SUM, what); }
  void wait(request r) override {
    if (r < 0 || static_cast<std::size_t>(r) >= m_pending.size() || !m_pending[static_cast<std::size_t>(r)].open) return;
    complete(m_pending[static_cast<std::size_t>(r)]);
  }
  void wait_all() override {
    for (auto& p : m_pending)
      if (p.open) complete(p);
  }
  void progress() noexcept override {
    if (m_failed) return;
    for (auto& p : m_pending)
      if (p.open && p.count > 0) {
        int done = 0;  // a completed request becomes MPI_REQUEST_NULL: wait() then sees it done at once
        MPI_Testall(p.count, p.reqs, &done, MPI_STATUSES_IGNORE);  // an error is wait()'s to report
      }
  }
  void reserve_requests(std::size_t n) override {
    if (m_pending.capacity() < n) m_pending.reserve(n);
  }
  void max(std::int64_t* data, std::int64_t n, std::string_view what) override { wait(start_allreduce(data, n, MPI_INT64_T, MPI_MAX, what)); }
  void broadcast(void* data, std::size_t bytes, std::string_view what) override {
    pending& p = open_request(what);
    for_chunks(static_cast<char*>(data), static_cast<std::int64_t>(bytes), p, [&](char* at, int count, MPI_Request* q) {
      return MPI_Ibcast(at, count, MPI_BYTE, 0, m_comm, q);
    });
    complete(p);
  }
  void gather(void const* mine, std::size_t bytes, std::vector<char>& all, std::vector<std::size_t>& sizes, std::string_view what) override {
    if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      fail("E-DIST-009", std::string(what) + " gathers " + std::to_string(bytes) + " bytes from this rank, more than one MPI call carries (2^31 - 1)",
           "gather less at once (concatenate fewer samples per split)");
    long long mine_n = static_cast<long long>(bytes);
    std::vector<long long> counts(static_cast<std::size_t>(m_size));
    {
      pending& p = open_request(what);
      p.count = 1;
      post(p, MPI_Iallgather(&mine_n, 1, MPI_LONG_LONG, counts.data(), 1, MPI_LONG_LONG, m_comm, &p.reqs[0]));
      complete(p);
    }
    std::vector<int> cnt(static_cast<std::size_t>(m_size)), displ(static_cast<std::size_t>(m_size));
    long long total = 0;
    sizes.assign(static_cast<std::size_t>(m_size), 0);
    for (int r = 0; r < m_size; ++r) {
      if (total > std::numeric_limits<int>::max() - counts[static_cast<std::size_t>(r)])
        fail("E-DIST-009", std::string(what) + " gathers more than 2^31 - 1 bytes from all ranks together", "gather less at once");
      cnt[static_cast<std::size_t>(r)] = static_cast<int>(counts[static_cast<std::size_t>(r)]);
      displ[static_cast<std::size_t>(r)] = static_cast<int>(total);
      sizes[static_cast<std::size_t>(r)] = static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]);
      total += counts[static_cast<std::size_t>(r)];
    }
    all.resize(static_cast<std::size_t>(total));
    pending& p = open_request(what);
    p.count = 1;
    post(p, MPI_Iallgatherv(mine, static_cast<int>(bytes), MPI_BYTE, all.data(), cnt.data(), displ.data(), MPI_BYTE, m_comm, &p.reqs[0]));
    complete(p);
  }
  void barrier(std::string_view what) override {
    pending& p = open_request(what);
    p.count = 1;
    post(p, MPI_Ibarrier(m_comm, &p.reqs[0]));
    complete(p);
  }

  // While this rank waits on something that is not an MPI request (a GPU stream running an NCCL
  // collective, an NCCL communicator being made): another rank's failure notice, or a stop request
  // older than the grace, ends the wait as a collective's would.
  void check_peers(std::string_view what) override {
    if (m_failed) throw error(m_failure_code, m_failure_sentence, m_failure_fix);
    if (m_size > 1) receive_notice(what, nullptr);
    if (!m_opt.stop_requested || !m_opt.stop_requested()) return;
    const auto now = std::chrono::steady_clock::now();
    if (!m_stopping) {
      m_stopping = true;
      m_stop_seen = now;
    }
    if (now - m_stop_seen >= std::chrono::duration<double>(m_opt.stop_grace_seconds))
      fail("E-DIST-005",
           "rank " + std::to_string(m_rank) + " of " + std::to_string(m_size) + " was asked to stop (SIGTERM or SIGINT) while waiting in " + std::string(what) +
               step_text() + ": another rank ended (the launcher stops the job when one rank dies; its message names the rank)",
           "look for the first rank that failed in the launcher's output", false);
  }
  double timeout_seconds() const noexcept override { return m_opt.timeout_seconds; }

  // ---- failure ----------------------------------------------------------------------------------
  // Tells every other rank why this one is about to end (best effort: small messages complete
  // locally; a send to a peer that is gone is abandoned after 100 ms). Those waiting in a collective fail with E-DIST-005
  // carrying `text`.
  void notify_failure(std::string_view text) noexcept {
    if (m_notified || m_size == 1) return;
    m_notified = true;
    m_notice.assign(text.data(), text.size());
    std::vector<MPI_Request> q;
    q.reserve(static_cast<std::size_t>(m_size));
    for (int r = 0; r < m_size; ++r) {
      if (r == m_rank) continue;
      MPI_Request one;
      if (MPI_Isend(m_notice.data(), static_cast<int>(m_notice.size()), MPI_CHAR, r, detail::notice_tag, m_comm, &one) == MPI_SUCCESS) q.push_back(one);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    int done = 0;
    while (!q.empty() && std::chrono::steady_clock::now() < until) {
      if (MPI_Testall(static_cast<int>(q.size()), q.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS || done) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

 private:
  static constexpr int max_chunks = 4;  // 4 x (2^31 - 1) elements in one collective
  struct pending {
    MPI_Request reqs[max_chunks];
    int count = 0;
    bool open = false;
    std::string_view what;
  };

  void check(int rc, char const* call) {
    if (rc != MPI_SUCCESS) throw error("E-DIST-004", std::string(call) + " failed: " + detail::mpi_error_text(rc), "check the MPI installation and the launch line (mpirun -np K ...)");
  }

  pending& open_request(std::string_view what) {
    if (m_failed) throw error(m_failure_code, m_failure_sentence, m_failure_fix);
    for (auto& p : m_pending)
      if (!p.open) {
        p = pending{};
        p.open = true;
        p.what = what;
        return p;
      }
    m_pending.push_back(pending{});
    m_pending.back().open = true;
    m_pending.back().what = what;
    return m_pending.back();
  }
  request index_of(pending const& p) const noexcept { return static_cast<request>(&p - m_pending.data()); }

  void post(pending& p, int rc) {
    if (rc != MPI_SUCCESS) {
      p.open = false;
      fail("E-DIST-004", "MPI could not start " + std::string(p.what) + step_text() + ": " + detail::mpi_error_text(rc),
           "check the MPI installation and that every rank runs the same program");
    }
  }

  // Splits a buffer of n elements into calls of at most INT_MAX elements (one for any real group).
  template <class T, class Start>
  void for_chunks(T* data, std::int64_t n, pending& p, Start&& start) {
    constexpr std::int64_t most = std::numeric_limits<int>::max();
    if (n > most * max_chunks) {
      p.open = false;
      fail("E-DIST-009", std::string(p.what) + " covers " + std::to_string(n) + " elements, more than " + std::to_string(max_chunks) + " MPI calls of 2^31 - 1 carry",
           "split the parameters into more groups (param_group), each under 8e9 elements");
    }
    std::int64_t at = 0;
    do {
      const std::int64_t m = n - at < most ? n - at : most;
      post(p, start(data + at, static_cast<int>(m), &p.reqs[p.count]));
      ++p.count;
      at += m;
    } while (at < n);
  }

  template <class T>
  request start_allreduce(T* data, std::int64_t n, MPI_Datatype type, MPI_Op op, std::string_view what) {
    pending& p = open_request(what);
    for_chunks(data, n, p, [&](T* at, int count, MPI_Request* q) { return MPI_Iallreduce(MPI_IN_PLACE, at, count, type, op, m_comm, q); });
    return index_of(p);
  }

  // Polls until the request completes, the deadline passes, a peer's failure notice arrives, or a
  // stop request outlives its grace.
  void complete(pending& p) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const auto deadline = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(m_opt.timeout_seconds));
    clock::time_point stop_seen{};
    bool stopping = false;
    for (std::uint64_t spin = 0;; ++spin) {
      int done = 0;
      const int rc = MPI_Testall(p.count, p.reqs, &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) {
        p.open = false;
        fail("E-DIST-004", "MPI reported an error in " + std::string(p.what) + step_text() + ": " + detail::mpi_error_text(rc),
             "another rank probably ended (the launcher's message names it); check the network between the hosts");
      }
      if (done) {
        p.open = false;
        return;
      }
      if ((spin & 63) == 0) {
        receive_notice(p);
        const auto now = clock::now();
        if (now >= deadline) {
          p.open = false;
          fail("E-DIST-003",
               "rank " + std::to_string(m_rank) + " of " + std::to_string(m_size) + " waited " + detail::seconds_text(m_opt.timeout_seconds) + " in " +
                   std::string(p.what) + step_text() + " and the other ranks did not join it: one of them died, hangs, or lost its network",
               "see the launcher's output for the rank that ended; if a step legitimately takes longer (a large checkpoint written by rank 0), "
               "raise NITRO_DIST_TIMEOUT (seconds)");
        }
        if (!stopping && m_opt.stop_requested && m_opt.stop_requested()) {
          stopping = true;
          stop_seen = now;
        }
        if (stopping && now - stop_seen >= std::chrono::duration<double>(m_opt.stop_grace_seconds)) {
          p.open = false;
          fail("E-DIST-005",
               "rank " + std::to_string(m_rank) + " of " + std::to_string(m_size) + " was asked to stop (SIGTERM or SIGINT) while waiting in " + std::string(p.what) +
                   step_text() + ", and the other ranks did not join it: another rank ended (the launcher stops the job when one rank dies; its message names the rank)",
               "look for the first rank that failed in the launcher's output; a rank killed by the system (out of memory, a time limit) leaves no message of its own",
               false);  // every rank got the launcher's signal: no notice (it would cost the time left to write the status)
        }
      }
      if (spin < 2000) continue;
      if (spin < 20000) sched_yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void receive_notice(pending& p) { receive_notice(p.what, &p); }
  void receive_notice(std::string_view what, pending* p) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, detail::notice_tag, m_comm, &flag, &st) != MPI_SUCCESS || !flag) return;
    int len = 0;
    MPI_Get_count(&st, MPI_CHAR, &len);
    std::string text(static_cast<std::size_t>(len > 0 ? len : 0), '\0');
    MPI_Recv(text.data(), len, MPI_CHAR, st.MPI_SOURCE, detail::notice_tag, m_comm, MPI_STATUS_IGNORE);
    for (std::size_t at; (at = text.find("\n  fix: ")) != std::string::npos;) text.replace(at, 8, " (its fix: ").append(")");
    if (p) p->open = false;
    m_notified = true;  // the failing rank told every rank itself: no need to forward its news
    fail("E-DIST-005",
         "rank " + std::to_string(st.MPI_SOURCE) + " failed while rank " + std::to_string(m_rank) + " waited in " + std::string(what) + step_text() + ": " + text,
         "fix what rank " + std::to_string(st.MPI_SOURCE) + " reports; every rank then ends with it");
  }

  std::string step_text() const { return " at step " + std::to_string(step()); }

  [[noreturn]] void fail(std::string code, std::string sentence, std::string fix, bool notify = true) {
    m_failed = true;
    m_failure_code = std::move(code);
    m_failure_sentence = std::move(sentence);
    m_failure_fix = std::move(fix);
    m_failure = m_failure_code + ": " + m_failure_sentence;
    if (notify) notify_failure(m_failure);
    else m_notified = true;
    throw error(m_failure_code, m_failure_sentence, m_failure_fix);
  }

  MPI_Comm m_comm = MPI_COMM_NULL;
  int m_rank = 0, m_size = 1;
  collective_options m_opt;
  std::vector<pending> m_pending;
  bool m_failed = false, m_notified = false;
  bool m_stopping = false;  // check_peers: when the stop request was first seen
  std::chrono::steady_clock::time_point m_stop_seen{};
  std::string m_failure, m_failure_code, m_failure_sentence, m_failure_fix, m_notice;

  friend class session;
};

}  // namespace nitro::dist
