// nitro/cli/main.hpp — nitro::cli::main<Programs...>(argc, argv): a trainer binary's command line in
// one process. A trainer calls nitro::main (nitro/main.hpp), which is this one, inside an MPI session
// when a launcher started the process:
//
//   int main(int argc, char** argv) { return nitro::main<FashionMLP<128>, FashionMLP<256>>(argc, argv); }
//
// Programs are instantiations of one experiment; the first is the default. A selection's
// GraphConst values pick the program compiled for them (a value not compiled in is E-KNOB-011).
// Commands: run, sweep, variants, check, explain, diff, watch, ir, bundle, eval, report, new (--help
// for each). Errors print their code, sentence and fix on stderr; exit codes are in docs/cli.md.
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/cli/args.hpp"
#include "nitro/cli/commands.hpp"
#include "nitro/cli/program.hpp"
#include "nitro/cli/report.hpp"
#include "nitro/core/error.hpp"
#include "nitro/knobs/catalog.hpp"
#include "nitro/knobs/records.hpp"
#include "nitro/knobs/selection.hpp"
#include "nitro/knobs/slug.hpp"
#include "nitro/record/run_lock.hpp"
#include "nitro/knobs/sweep_points.hpp"

#include <cerrno>      // errno
#include <cstddef>     // size_t
#include <cstring>     // strerror
#include <filesystem>  // the binary's path
#include <iostream>    // cout, cerr
#include <optional>    // results
#include <string>      // arguments
#include <type_traits> // type_identity
#include <vector>      // arguments

#include <fcntl.h>     // the log files of sweep --jobs
#include <spawn.h>     // posix_spawn: sweep --jobs
#include <sys/wait.h>  // waitpid
#include <unistd.h>    // environ

extern char** environ;

namespace nitro::cli {

template <class... Programs>
class app {
  static_assert(sizeof...(Programs) >= 1, "E-CLI-011: nitro::main<Programs...> names no experiment. Fix: nitro::main<FashionMLP<128>, FashionMLP<256>>(argc, argv).");

 public:
  static catalog const& cat() {
    static const catalog c = make_catalog<Programs...>();
    return c;
  }

  // Calls f(std::type_identity<P>{}) for the program at index i.
  template <class F>
  static auto with_program(std::size_t i, F&& f) {
    using R = decltype(f(std::type_identity<first_program>{}));
    std::optional<R> r;
    if constexpr (!first_binds) {  // its coded errors are printed; the others would repeat them
      r.emplace(f(std::type_identity<first_program>{}));
    } else {
      std::size_t k = 0;
      ((k++ == i && !r ? (void)(r.emplace(f(std::type_identity<Programs>{}))) : (void)0), ...);
    }
    return std::move(*r);
  }

  // The selection's program on the backend --set device=... asks for: f(type_identity<program<P>>)
  // on the CPU, f(type_identity<program<P, cuda_device>>) on a GPU. The CUDA programs exist only
  // where nvcc compiled the trainer with the CUDA backend (nitro/main.hpp includes it there).
  template <class F>
  static auto with_point(selection const& s, F&& f) {
    return with_program(s.program, [&]<class P>(std::type_identity<P>) {
      using tag = std::enable_if_t<sizeof(P) != 0, cuda_device>;  // dependent: judged where main<...> is instantiated
      if constexpr (cuda_backend_compiled_in<tag>) {
        if (s.request.cuda_index() >= 0) return f(std::type_identity<program<P, tag>>{});
      } else {
        if (s.request.cuda_index() >= 0)
          throw error("E-CUDA-015",
                      "--set device=" + *s.request.device + " asks for the CUDA backend, but this trainer was built without it (by g++, or by nvcc "
                          "without the nitro::cuda target)",
                      "build the trainer with nvcc and link nitro::cuda (kernels/CMakeLists.txt builds fashion_mlp_nvcc so), or leave device at cpu");
      }
      return f(std::type_identity<program<P>>{});
    });
  }

  static int run(context& ctx, std::vector<std::string> const& argv) {
    try {
      parsed_args a = parse_args(argv);
      if (a.help) {
        if (dist::replicas* dp = ctx.replicas; !dp || dp->writes()) ctx.out << help_text(ctx.program, a.command);  // once under mpirun
        return argv.empty() ? exit_usage : exit_ok;
      }
      return dispatch(ctx, a);
    } catch (nitro::error const& e) {
      ctx.err << e.what() << "\n";
      return exit_code_of(e.code());
    } catch (std::exception const& e) {
      ctx.err << "error: " << e.what() << "\n";
      return exit_failed;
    }
  }

  static int exit_code_of(std::string const& code) {
    if (is_record_error(code)) return exit_records;
    if (code.rfind("E-KNOB-", 0) == 0 || code.rfind("E-CLI-", 0) == 0) return exit_usage;
    if (code.rfind("E-DATA-", 0) == 0 || code.rfind("E-CPU-", 0) == 0) return exit_usage;  // setup: the data, the environment
    if (code == "E-CUDA-002" || code == "E-CUDA-006" || code == "E-CUDA-015") return exit_usage;  // --set device=cuda: no GPU, no CUDA build
    return exit_failed;
  }

 private:
  using first_program = std::tuple_element_t<0, std::tuple<Programs...>>;
  // Do the first program's keywords and hooks bind? The programs differ only in GraphConst values,
  // so a mistake there is every program's: then only the first is compiled, and it is told once.
  static constexpr bool first_binds = [] {
    if constexpr (!declarations<first_program>::ok) return false;  // its knobs, variants, sweeps
    else return program<first_program>::handle_type::binds;
  }();
  static_assert(checks_evaluated<first_binds>);  // asked here, so the diagnostics come a few frames from the user's line

  static std::string default_run_dir(parsed_args const& a) {
    if (a.run_dir) return *a.run_dir;
    selection s = resolve_selection(cat(), a.selection);
    return with_program(s.program, [&]<class P>(std::type_identity<P>) {
      const P e = program<P>::experiment(cat(), s);
      return program<P>::run_dir_of(program<P>::keyword_rows(e, cat(), s));
    });
  }

  // The run a command reads: positional i, else the newest run with the command line's selection.
  static std::string run_ref(parsed_args const& a, std::size_t i, std::string const& run_dir) {
    if (i < a.positional.size()) return find_run(run_dir, a.positional[i]);
    if (a.has_selection) return latest_run_with(run_dir, cat().experiment, a.selection);
    return find_run(run_dir, "latest");
  }

  // Under mpirun (ctx.replicas: the job nitro::main opened, of several ranks, docs/mpi.md): `run`, `eval` and `sweep`
  // (its points one after another, each a run of the job) are the job's: every rank takes part and
  // rank 0 alone prints. The other commands only read or write files: rank 0 runs them as one
  // process (its handles are not replicas) and the other ranks end at once, so nothing is printed
  // or written twice.
  static int dispatch(context& ctx, parsed_args const& a) {
    dist::replicas* dp = ctx.replicas;
    if (!dp || dp->size() == 1) return dispatch_here(ctx, a);
    const std::string& cmd = a.command;
    if (cmd == "sweep" && a.jobs.value_or(1) > 1)
      throw error("E-DIST-012",
                  "`sweep --jobs " + std::to_string(*a.jobs) + "` under mpirun: the points would each start processes of their own beside the " +
                      std::to_string(dp->size()) + " ranks",
                  "under mpirun drop --jobs (the job trains the points one after another, each over every rank), or launch one job per point "
                  "(`sweep NAME --emit slurm` writes a Slurm array script)");
    if (cmd == "run" || cmd == "eval" || (cmd == "sweep" && !a.emit)) {
      std::ostream silent(nullptr);  // a stream without a buffer: what the other ranks would print goes nowhere
      context job{ctx.program, ctx.self, ctx.command_line, dp->writes() ? ctx.out : silent, ctx.err, dp};
      return dispatch_here(job, a);
    }
    if (!dp->writes()) return exit_ok;
    context alone{ctx.program, ctx.self, ctx.command_line, ctx.out, ctx.err, nullptr};  // its handles are not replicas
    return dispatch_here(alone, a);
  }

  static int dispatch_here(context& ctx, parsed_args const& a) {
    catalog const& c = cat();
    const std::string& cmd = a.command;
    if (cmd == "variants") {
      ctx.out << variants_text(c);
      return exit_ok;
    }
    if (cmd == "new") return new_experiment(ctx, a.positional[0], a.out, a.force);
    if (cmd == "explain" || cmd == "ir" || cmd == "check" || cmd == "run") {
      run_options ro{a.run_dir, a.id, a.quiet, std::nullopt, std::nullopt};
      selection_request req = a.selection;
      if (cmd == "run" && a.resume) {
        // a resume continues the run it names: its recorded selection, unless flags give another
        weights_ref from = run_weights(default_run_dir(a), *a.resume);
        // refused before anything is made: a run that another process still writes would fork (E-REC-009)
        if (from.which() != weights_ref::kind::path) require_not_being_written(from.run().directory, "resume from");
        // ... and so is a run with no checkpoint to continue from (one killed, or whose disk filled,
        // before its first), or none that is whole (E-CKPT-023, E-CKPT-035, a damaged file it picks)
        std::vector<std::string> damaged;
        (void)load_for_resume(resolve(from, resolve_context{.runs_dir = default_run_dir(a)}), resume_ref::of(from), damaged);
        ro.resume = resume_ref::of(from);
        // --set device=... alone moves the recorded run to another backend (its weights, rule states
        // and step are host buffers: a checkpoint written on a GPU resumes on the CPU and back)
        selection_request other = a.selection;
        other.device.reset();
        if (!a.has_selection || other.empty()) {
          req = recorded_selection(from);
          req.device = a.selection.device;
        }
      }
      if (cmd == "run" && a.weights) ro.weights = run_weights(default_run_dir(a), *a.weights);
      selection s = resolve_selection(c, req);
      return with_point(s, [&]<class Prog>(std::type_identity<Prog>) -> int {
        if (cmd == "explain") { ctx.out << Prog::explain_text(c, s); return exit_ok; }
        if (cmd == "ir") { ctx.out << Prog::ir_text(c, s); return exit_ok; }
        if (cmd == "check") return Prog::check(ctx, c, s);
        return Prog::run(ctx, c, s, ro).exit_code;
      });
    }
    if (cmd == "diff") {
      const std::string dir = default_run_dir(a);
      std::vector<std::string> runs;
      for (auto const& p : a.positional) runs.push_back(find_run(dir, p));
      if (a.has_selection) runs.push_back(latest_run_with(dir, c.experiment, a.selection));
      if (runs.size() == 1 && !a.has_selection) {
        // one run: compare it with the newest run before it
        auto all = list_runs(dir);
        std::string before;
        for (auto const& r : all) {
          if (std::filesystem::equivalent(r.dir, runs[0])) break;
          before = r.dir;
        }
        if (before.empty()) throw error("E-CLI-004", "there is no run before " + runs[0] + " to compare it with", "name two runs: `diff A B`");
        runs.insert(runs.begin(), before);
      }
      if (runs.empty()) {
        auto all = list_runs(dir);
        if (all.size() < 2) throw error("E-CLI-004", "`diff` needs two runs, and " + dir + " holds " + std::to_string(all.size()), "name two runs: `diff A B`");
        runs = {all[all.size() - 2].dir, all.back().dir};
      }
      if (runs.size() != 2)
        throw error("E-CLI-002", "`diff` compares two runs, and this names " + std::to_string(runs.size()),
                    "name two runs, or one run and a selection (the newest run made with it)");
      ctx.out << diff_text(runs[0], runs[1]);
      return exit_ok;
    }
    if (cmd == "watch") {
      const std::string dir = default_run_dir(a);
      return watch(ctx, run_ref(a, 0, dir), a.interval.value_or(1.0), a.timeout);
    }
    if (cmd == "bundle") {
      const std::string dir = default_run_dir(a);
      return bundle(ctx, run_ref(a, 0, dir), a.weights.value_or("latest"), a.out);
    }
    if (cmd == "report") {
      const std::string dir = default_run_dir(a);
      return report(ctx.out, dir, a.positional.empty() ? run_ref(a, 0, dir) : a.positional[0], a.out);
    }
    if (cmd == "eval") return eval(ctx, a);
    if (cmd == "sample") return sample(ctx, a);
    if (cmd == "sweep") return sweep(ctx, a);
    throw error("E-CLI-001", "there is no command '" + cmd + "'", "see --help");
  }

  // ---- run --resume / --weights: RUN [>> CHECKPOINT], a bare checkpoint (the latest run's), or a file ----
  // The run is found here (a folder, a slug or its unique start under the runs directory, latest), so
  // the handle gets a folder and never guesses the runs directory.
  static weights_ref run_weights(std::string const& dir, std::string const& text) {
    namespace fs = std::filesystem;
    if (std::error_code ec; fs::is_regular_file(text, ec)) return weights_ref(fs::path(text));
    const auto arrow = text.find(">>");
    std::string run_part = text, pick = "latest";
    if (arrow != std::string::npos) {
      run_part = std::string(nitro::detail::trim_ws(std::string_view(text).substr(0, arrow)));
      pick = text.substr(arrow + 2);
    } else if (nitro::detail::checkpoint_part_of(text, text)) {  // "best", "Average(Last(10))": of the latest run
      run_part = "latest";
      pick = text;
    }
    weights_ref r = weights_ref::from_text(pick);
    if (r.which() == weights_ref::kind::path)
      throw error("E-CKPT-033", "\"" + text + "\" has no checkpoint after >>",
                  "write RUN >> best | latest | Best(n) | Last(n) | Average(Last(n)) | Average(Best(n))");
    return r.in_run_directory(find_run(dir, run_part));
  }
  // The selection a run was made with (its manifest), for a resume given no selection flags.
  static selection_request recorded_selection(weights_ref const& from) {
    namespace fs = std::filesystem;
    fs::path run = from.which() == weights_ref::kind::path ? fs::absolute(from.path()).parent_path() : from.run().directory;
    if (run.filename() == "checkpoints") run = run.parent_path();
    if (!fs::exists(run / "manifest.json")) return {};  // a loose checkpoint file: the defaults
    ordered_json m = read_json((run / "manifest.json").string());
    if (!m.contains("experiment") || m["experiment"] != cat().experiment)
      throw error("E-REC-002", "the run " + run.string() + " was made by another experiment", "resume it with the binary of its own experiment");
    return selection_request::from_json(m.value("selection", ordered_json::object()));
  }

  // ---- eval: a run's (or a checkpoint's) weights on a split ---------------------------------------
  static int eval(context& ctx, parsed_args const& a) {
    namespace fs = std::filesystem;
    const std::string ref = a.positional[0];
    std::string run;
    std::optional<weights_ref> weights;
    if (std::error_code ec; fs::is_regular_file(ref, ec)) {
      // a checkpoint file: its run is the folder above checkpoints/
      fs::path p = fs::absolute(ref).parent_path();
      if (p.filename() == "checkpoints") p = p.parent_path();
      if (!fs::exists(p / "manifest.json"))
        throw error("E-REC-002", "no manifest.json beside the checkpoint " + ref + " (looked in " + p.string() + ")",
                    "evaluate a checkpoint inside its run folder, or name the run");
      run = p.string();
      weights = a.weights ? weights_in_run(run, *a.weights) : weights_ref(fs::path(ref));
    } else {
      run = find_run(default_run_dir(a), ref);
      weights = weights_in_run(run, a.weights.value_or("latest"));
    }
    ordered_json m = read_json((fs::path(run) / "manifest.json").string());
    if (!m.contains("experiment") || m["experiment"] != cat().experiment)
      throw error("E-REC-002", "the run " + run + " was made by the experiment " + (m.contains("experiment") ? m["experiment"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : "?") +
                                   ", not " + cat().experiment,
                  "evaluate it with the binary of its own experiment");
    selection_request req = selection_request::from_json(m.value("selection", ordered_json::object()));
    req.device.reset();  // the weights are evaluated on the CPU, wherever they were trained
    selection s = resolve_selection(cat(), req);
    ctx.out << "run " << run << "\n";
    const std::string split = a.split.value_or("test");
    return with_program(s.program, [&]<class P>(std::type_identity<P>) { return program<P>::eval(ctx, cat(), s, *weights, run, split); });
  }

  // ---- sample: the run's recorded selection, its weights, the generation's options -----------------
  static int sample(context& ctx, parsed_args const& a) {
    namespace fs = std::filesystem;
    const std::string dir = default_run_dir(a);
    // --weights "latest >> best", a file, or a pick (best, Average(Last(3))) in RUN (default: the latest run)
    std::string text = a.weights.value_or("latest");
    std::error_code ignored_error;  // a text too long for a file name is no file
    if (!a.positional.empty() && text.find(">>") == std::string::npos && !fs::is_regular_file(text, ignored_error)) text = a.positional[0] + " >> " + text;
    const weights_ref weights = run_weights(dir, text);
    selection_request recorded = recorded_selection(weights);
    recorded.device.reset();  // text is drawn on the CPU, wherever the weights were trained
    selection s = resolve_selection(cat(), recorded);
    generate_options o;
    if (a.tokens) o.tokens = *a.tokens;
    if (a.temperature) o.temperature = *a.temperature;
    if (a.top_k) o.top_k = *a.top_k;
    return with_program(s.program, [&]<class P>(std::type_identity<P>) { return program<P>::sample(ctx, cat(), s, weights, o, a.prompt.value_or("")); });
  }

  // ---- sweep --------------------------------------------------------------------------------------
  static int sweep(context& ctx, parsed_args const& a) {
    namespace fs = std::filesystem;
    catalog const& c = cat();
    const std::string name = a.positional[0];
    auto points = sweep_points(c, name, a.selection);
    const std::string run_dir = default_run_dir(a);
    const std::string sweep_id = make_run_id();
    std::vector<std::string> ids;
    for (std::size_t i = 0; i < points.size(); ++i) ids.push_back(sweep_id + "-p" + std::to_string(i));

    if (a.emit) {
      const std::string path = a.out ? *a.out : (fs::path(run_dir) / (name + "-" + sweep_id + ".slurm")).string();
      std::error_code ec;
      fs::create_directories(fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path(), ec);
      write_record_atomic(path, slurm_script(c, name, fs::absolute(ctx.self).string(), fs::absolute(run_dir).string(), points, ids));
      fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add, ec);
      ctx.out << "sweep " << name << ": " << points.size() << " points written as a Slurm job array to " << path << " (sbatch " << path << ")\n";
      return exit_ok;
    }

    std::vector<sweep_row> rows(points.size());
    for (std::size_t i = 0; i < points.size(); ++i) {
      selection s = resolve_selection(c, points[i]);
      rows[i].index = i;
      rows[i].program = c.programs[s.program];
      rows[i].selection = selection_words(points[i].json());
      rows[i].slug = make_slug(c.experiment, points[i], ids[i]);
    }
    if (!a.quiet) ctx.out << "sweep " << name << ": " << points.size() << " points under " << run_dir << "\n";

    const std::int64_t jobs = a.jobs.value_or(1);
    if (jobs <= 1) {
      for (std::size_t i = 0; i < points.size(); ++i) {
        selection s = resolve_selection(c, points[i]);
        if (!a.quiet) ctx.out << "point " << i << ": " << rows[i].selection << "\n";
        run_result r = with_point(s, [&]<class Prog>(std::type_identity<Prog>) { return Prog::run(ctx, c, s, {run_dir, ids[i], true}); });
        rows[i].state = r.state;
        rows[i].metrics = r.metrics;
      }
    } else {
      run_processes(ctx, points, ids, run_dir, static_cast<std::size_t>(jobs), rows, name + "-" + sweep_id);
    }

    ctx.out << sweep_table(rows);
    ordered_json summary;
    summary["sweep"] = name;
    summary["experiment"] = c.experiment;
    summary["points"] = ordered_json::array();
    bool all_finished = true;
    for (auto const& r : rows) {
      ordered_json p;
      p["index"] = r.index;
      p["slug"] = r.slug;
      p["program"] = r.program;
      p["selection"] = points[r.index].json();
      p["state"] = r.state;
      ordered_json m = ordered_json::object();
      for (auto const& [k, v] : r.metrics) m[k] = v;
      p["metrics"] = m;
      summary["points"].push_back(p);
      all_finished = all_finished && r.state == "finished";
    }
    if (dist::replicas* dp = ctx.replicas; dp && !dp->writes()) return all_finished ? exit_ok : exit_failed;  // rank 0 writes it
    std::error_code ec;
    fs::create_directories(run_dir, ec);
    const std::string spath = (fs::path(run_dir) / ("sweep-" + name + "-" + sweep_id + ".json")).string();
    write_record_atomic(spath, summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    ctx.out << "summary " << spath << "\n";
    return all_finished ? exit_ok : exit_failed;
  }

  // Runs the points as child processes of this binary, at most `jobs` at a time.
  static void run_processes(context& ctx, std::vector<selection_request> const& points, std::vector<std::string> const& ids,
                            std::string const& run_dir, std::size_t jobs, std::vector<sweep_row>& rows, std::string const& tag) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(run_dir, ec);
    std::vector<std::pair<pid_t, std::size_t>> running;
    std::size_t next = 0;
    auto finish = [&](pid_t pid, int wstatus) {
      for (std::size_t k = 0; k < running.size(); ++k)
        if (running[k].first == pid) {
          const std::size_t i = running[k].second;
          running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
          const std::string status = (fs::path(run_dir) / rows[i].slug / "status.json").string();
          if (fs::exists(status)) {
            ordered_json st = read_json(status);
            rows[i].state = text_field(st, "state", "?");
            rows[i].metrics = final_metrics(st);
          } else {
            rows[i].state = "failed";
          }
          if (!(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) && rows[i].state == "finished") rows[i].state = "failed";
          ctx.out << "point " << i << " " << rows[i].state << ": " << rows[i].selection << "\n";
          ctx.out.flush();
          return;
        }
    };
    while (next < points.size() || !running.empty()) {
      while (next < points.size() && running.size() < jobs) {
        const std::size_t i = next++;
        std::vector<std::string> args = {ctx.self, "run"};
        for (auto const& x : points[i].to_args()) args.push_back(x);
        for (auto const& x : {std::string("--run-dir"), run_dir, std::string("--id"), ids[i], std::string("--quiet")}) args.push_back(x);
        std::vector<char*> cargs;
        for (auto& x : args) cargs.push_back(x.data());
        cargs.push_back(nullptr);
        const std::string log = (fs::path(run_dir) / ("sweep-" + tag + "-p" + std::to_string(i) + ".log")).string();
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        pid_t pid = 0;
        const int rc = posix_spawn(&pid, ctx.self.c_str(), &fa, nullptr, cargs.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0) {
          rows[i].state = "failed";
          ctx.err << "E-CLI-010: could not start point " << i << " as a process (" << std::strerror(rc) << ")\n";
          continue;
        }
        running.emplace_back(pid, i);
      }
      if (running.empty()) break;
      int wstatus = 0;
      const pid_t pid = ::waitpid(-1, &wstatus, 0);
      if (pid < 0) {
        if (errno == EINTR) continue;
        break;
      }
      finish(pid, wstatus);
    }
  }
};

// The binary's own path, to run sweep points as processes.
NITRO_RUNTIME_INLINE std::string self_path(char const* argv0);

// The command line of a trainer binary: cli::main<FashionMLP<128>, FashionMLP<256>>(argc, argv), one
// process; nitro::main passes `job`, the MPI job's replicas, when a launcher started it.
template <class... Programs>
int main(int argc, char** argv, dist::replicas* job = nullptr) {
  std::vector<std::string> args;
  std::string line = argc > 0 ? std::string(argv[0]) : std::string("nitro");
  for (int i = 1; i < argc; ++i) {
    args.emplace_back(argv[i]);
    line += ' ';
    line += argv[i];
  }
  cli::context ctx{argc > 0 ? std::filesystem::path(argv[0]).filename().string() : std::string("nitro"),
                   cli::self_path(argc > 0 ? argv[0] : nullptr), line, std::cout, std::cerr, job};
  return cli::app<Programs...>::run(ctx, args);
}

}  // namespace nitro::cli

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::cli {

NITRO_RUNTIME_INLINE std::string self_path(char const* argv0) {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) return p.string();
  return argv0 ? std::string(argv0) : std::string();
}

}  // namespace nitro::cli
#endif  // !NITRO_RUNTIME_EXTERN
