// nitro/dist/session.hpp — MPI for one process: initialised once at the top of main, ended once.
//
//   int main(int argc, char** argv) {
//     nitro::dist::session mpi(argc, argv);                  // MPI_Init_thread (FUNNELED)
//     nitro::dist::communicator& world = mpi.world();        // rank, size, collectives with deadlines
//     ...
//     return mpi.finish(exit_code);                          // 0: MPI_Finalize; else every rank ends now
//   }
//
// How a run ends:
//   finish(0)           a barrier with the deadline (every rank got here), then MPI_Finalize;
//   finish(code != 0)   this rank's failure is sent to the others (they fail with E-DIST-005 naming
//                       it), then MPI_Abort(code): the launcher ends every rank, mpirun exits non-zero;
//   an exception leaving main's scope, or a collective that failed: as finish(1).
// MPI_Finalize is never called after a failure: it would wait for the rank that is gone.
//
// Stop signals: unless the process already handles them, SIGTERM and SIGINT set a flag
// (stop_signal_received()) instead of killing the process, so a rank waiting in a collective when
// mpirun ends the job (it sends SIGTERM ~1 s after a rank died, then SIGKILL ~1 s later) fails with
// E-DIST-005 and rank 0 can still write the run's status. The previous handlers come back at the end.
//
// MPI may be initialised only once per process: a second session while one lives, or any after
// MPI_Finalize, is E-DIST-006. A session made where MPI was initialised by someone else uses it
// and leaves finalising to them.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/dist/communicator.hpp"

#include <mpi.h>

#include <csignal>      // signal
#include <cstdlib>      // _Exit, getenv
#include <exception>    // uncaught_exceptions
#include <memory>       // the world communicator
#include <optional>     // the world communicator
#include <string>       // messages
#include <string_view>  // messages

namespace nitro::dist {

// Whether a launcher (mpirun, mpiexec, srun --mpi=pmix) started this process: its environment says
// so. A program that makes its session only then is, run on its own, exactly the one-process program.
inline bool launched_by_mpi() noexcept {
  for (char const* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

extern "C" inline void nitro_dist_on_stop_signal(int) { detail::stop_signal() = 1; }

struct session_options {
  bool handle_stop_signals = true;  // SIGTERM/SIGINT set stop_signal_received() (only where no handler is installed)
  collective_options collectives = collective_options::from_environment();
};

class session {
 public:
  session(int& argc, char**& argv, session_options opt = {}) { start(&argc, &argv, opt); }
  explicit session(session_options opt = {}) { start(nullptr, nullptr, opt); }
  ~session() {
    if (m_done) return;
    if (std::uncaught_exceptions() > 0 || (m_world && m_world->failed()))
      abort(1, m_world && m_world->failed() ? m_world->failure() : std::string("an exception ended the process"));
    finalize();
  }
  session(session const&) = delete;
  session& operator=(session const&) = delete;

  communicator& world() noexcept { return *m_world; }
  int rank() const noexcept { return m_world->rank(); }
  int size() const noexcept { return m_world->size(); }
  bool owns_mpi() const noexcept { return m_owns; }

  // Ends this process's part of the job with `code` (see the top of the file); `why` (the error's
  // text) is what the other ranks report. Returns `code` when it returns at all (0, or any code in
  // a job of one rank).
  int finish(int code, std::string const& why = {}) {
    if (m_done) return code;
    if (code != 0 || m_world->failed()) {
      if (m_world->size() > 1)
        abort(code != 0 ? code : 1, !why.empty() ? why : m_world->failed() ? m_world->failure() : "it ended with exit code " + std::to_string(code));
      finalize();
      return code;
    }
    try {
      m_world->barrier("the barrier at the end of the run");
    } catch (error const&) {
      abort(1, m_world->failure());
    }
    finalize();
    return 0;
  }

  // Tells the other ranks `why`, then ends every rank of the job with `code`.
  [[noreturn]] void abort(int code, std::string const& why) noexcept {
    m_done = true;
    if (m_world) m_world->notify_failure(why);
    restore_signals();
    MPI_Abort(MPI_COMM_WORLD, code != 0 ? code : 1);
    std::_Exit(code != 0 ? code : 1);  // MPI_Abort does not return; this is for an MPI that does
  }

 private:
  static bool& alive() noexcept {
    static bool a = false;
    return a;
  }

  void start(int* argc, char*** argv, session_options const& opt) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      throw error("E-DIST-006", "a nitro::dist::session was made after MPI was finalised; MPI starts only once per process",
                  "make one session at the top of main and keep it for the whole program");
    if (alive())
      throw error("E-DIST-006", "a second nitro::dist::session was made while one is alive; MPI starts only once per process",
                  "make one session at the top of main and pass its world() to whatever needs it");
    int initialised = 0;
    MPI_Initialized(&initialised);
    int provided = 0;
    if (!initialised) {
      if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw error("E-DIST-006", "MPI_Init_thread failed", "run under mpirun (or srun) with a working MPI installation");
      m_owns = true;
    } else {
      MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_FUNNELED)
      throw error("E-DIST-006", "MPI provides thread level " + std::to_string(provided) + ", below MPI_THREAD_FUNNELED (the loader threads never call MPI, but they exist)",
                  "initialise MPI with MPI_Init_thread(..., MPI_THREAD_FUNNELED, ...) or let the session initialise it");
    alive() = true;
    if (opt.handle_stop_signals) {
      install(SIGTERM, m_term);
      install(SIGINT, m_int);
    }
    m_world.emplace(MPI_COMM_WORLD, opt.collectives);
  }

  static void install(int sig, void (*&previous)(int)) {
    previous = std::signal(sig, SIG_DFL);
    if (previous == SIG_DFL) std::signal(sig, nitro_dist_on_stop_signal);
    else std::signal(sig, previous);  // someone handles it already: leave theirs
  }
  void restore_signals() noexcept {
    if (m_term == SIG_DFL) std::signal(SIGTERM, SIG_DFL);
    if (m_int == SIG_DFL) std::signal(SIGINT, SIG_DFL);
    m_term = m_int = SIG_ERR;
  }

  void finalize() {
    m_done = true;
    restore_signals();
    m_world.reset();
    alive() = false;
    if (m_owns) MPI_Finalize();
  }

  std::optional<communicator> m_world;
  bool m_owns = false;
  bool m_done = false;
  void (*m_term)(int) = SIG_ERR;
  void (*m_int)(int) = SIG_ERR;
};

}  // namespace nitro::dist
