// bench/gemm_libraries.cpp — nitro's float products against the well-kept libraries Debian ships.
//
//   gemm_libraries [--seconds S] [--only NAME] [--size N]
//
// DESIGN.md §6: "ours where they win, a well-kept Debian library where it does". This measures,
// for every product of a training step of the three models, single-precision GFLOP/s of
//   nitro_<isa>  nitro's own kernels, in every instruction set this CPU runs (generic: Eigen's);
//   openblas     cblas_sgemm of libopenblas.so.0                      (OPENBLAS_NUM_THREADS), with
//                the environment's OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (env -u them for its own);
//   blis         cblas_sgemm of libblis.so.4                          (BLIS_NUM_THREADS); where
//                BLIS detects only its reference kernels ("generic") on this CPU and
//                BLIS_ARCH_TYPE is unset, its skx (AVX-512) or haswell configuration is chosen;
//   onednn       dnnl_sgemm of libdnnl.so.2 (row-major: called as C^T = op(B)^T op(A)^T)
//                                                                     (OpenMP: OMP_NUM_THREADS);
//   libxsmm      a JIT kernel of libxsmm_smmdispatch. libxsmm's kernels run on one thread: at
//                more threads the columns of C are split over nitro's pool (one kernel call per
//                thread); its JIT has no transposed A, so A^T B transposes A first (libxsmm_otrans),
//                and that copy is timed. Debian's libxsmm-dev ships static archives only:
//                bench/CMakeLists.txt links them into <build>/bench/libxsmm.so beside this
//                executable when they are installed (NITRO_LIBXSMM=path names another), with
//                libxsmmnoblas: its BLAS fallback is a stub, so no other library is measured in
//                its name.
// Every library is dlopen'd: nothing to build against; one that is missing is "not found" and 0.
// The libraries' own thread counts are set to nitro's (NITRO_NUM_THREADS, else every hardware
// thread): the three variables above are overwritten before anything loads, and the setters are
// called too. The first JSON line says where each library came from and how it threads. BLIS and
// oneDNN wait at OpenMP barriers by spinning: where another process holds a core they collapse (to
// a few GFLOP/s on 2 cores), so measure on a quiet machine (OMP_WAIT_POLICY is printed, not set).
//
// Products (beta as nitro issues them: 1 where it accumulates — gradients, a convolution's
// preloaded bias — else 0):
//   sgemm           N x N x N (default 2048);
//   mlp / wide ...  the MLP 784-256-256-10 and the wide MLP 784-1024-1024-10 at batch 128 (names
//                   as bench/gemm_peak.cpp): forward W x, weight gradient g x^T, input gradient W^T g;
//   cnn conv...     examples/fashion_cnn.cpp's convolutions (32 and 64 maps, 3x3, pad 1) issue one
//                   im2col GEMM per sample (nn/layers/conv2d.hpp): forward col W [P, OutC, K*K*InC],
//                   weight gradient col^T g, input gradient g W^T (none for conv1, whose input is
//                   the image). The batch's 128 products run as the layer runs them: 16 fixed chunks
//                   over nitro's pool, each call on one thread (every library set to one thread for
//                   them), each chunk with its own operands;
//   cnn dense...    its dense layers 3136-128-10 at batch 128.
// Before a shape is timed, each library computes it once from the same operands (random in
// [-1, 1], so a transposed or mis-mapped operand shows) and is compared with nitro's kernel of this
// process (itself compared with a double-precision loop where the product is small): the max
// abs difference is printed; past the tolerance the library is not timed and the program exits 1.
// Each number is the best of 5 rounds of at least S/5 seconds each (S = --seconds, default 0.5).
// One JSON line per shape on stdout; at the end a markdown table (fastest in bold) on stderr.
#include <nitro/tensor/cpu/gemm.hpp>
#include <nitro/tensor/cpu/thread_pool.hpp>

#include "best_gflops.hpp"

#include <dlfcn.h>     // dlopen, dladdr: every library at run time
#include <sys/wait.h>  // waitpid: the child that asks BLIS what it detects
#include <unistd.h>    // readlink (the executable's folder: libxsmm.so beside it), fork, pipe

#include <algorithm>   // max, min
#include <chrono>      // timing
#include <climits>     // PATH_MAX
#include <cmath>       // fabs
#include <cstdint>     // int64_t
#include <cstdio>      // printf
#include <cstdlib>     // setenv, atof, realpath
#include <functional>  // plans
#include <map>         // libxsmm's kernels by width
#include <memory>      // shared_ptr: a plan's kernels and scratch
#include <string>      // arguments, JSON
#include <vector>      // matrices

namespace {

using clock_type = std::chrono::steady_clock;
using nitro::cpu::cpu_isa;

using bench::best_gflops;

std::string json_string(std::string const& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\', out += ch;
    else if (static_cast<unsigned char>(ch) < 0x20) out += ' ';
    else out += ch;
  }
  return out + "\"";
}

template <class Fn>
Fn symbol(void* handle, char const* name) {
  return handle ? reinterpret_cast<Fn>(dlsym(handle, name)) : nullptr;
}

// The file a loaded symbol lives in, links resolved (Debian's alternatives show which variant).
std::string file_of(void const* sym) {
  Dl_info info{};
  if (!sym || !dladdr(sym, &info) || !info.dli_fname) return "";
  char real[PATH_MAX];
  return realpath(info.dli_fname, real) ? std::string(real) : std::string(info.dli_fname);
}

std::string env_or(char const* name, char const* otherwise) {
  char const* v = std::getenv(name);
  return v ? v : otherwise;
}

void* open_first(std::vector<std::string> const& names) {
  for (auto const& n : names)
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  return nullptr;
}

std::string executable_dir() {
  char buf[PATH_MAX];
  const ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (len <= 0) return ".";
  std::string p(buf, static_cast<std::size_t>(len));
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

struct product {
  std::string name;
  bool ta, tb;
  int m, n, k;
  float beta;   // as nitro issues it
  int samples;  // 0: one product; else that many per-sample products of this shape
};

// One product's operands, column-major, BLAS conventions (alpha = 1).
struct gemm_args {
  bool ta, tb;
  int m, n, k;
  float const* a;
  int lda;
  float const* b;
  int ldb;
  float beta;
  float* c;
  int ldc;
};

// How a library runs one shape: run(args, slot) sets C = op(A) op(B) + beta C; `slot` (below the
// `slots` given to prepare) names scratch that one concurrent caller may use.
struct plan {
  std::function<void(gemm_args const&, int)> run;  // empty: the library cannot run this shape
  std::string how;                                  // what was measured, where not a plain call
};

struct library {
  std::string name;  // the JSON key and the table's column
  bool found = false;
  std::string info;  // a JSON object: where it came from, its version, its threading
  // The plan for a shape; `single`: each call on the calling thread alone (per-sample products).
  std::function<plan(product const&, bool single, int slots)> prepare;
  // Sets the library's own thread count; empty where there is nothing to set.
  std::function<void(int)> set_threads;
};

// ---- nitro ------------------------------------------------------------------------------------

library nitro_library(cpu_isa isa) {
  library l;
  l.name = std::string("nitro_") + nitro::cpu::to_string(isa);
  l.found = true;
  l.info = "{\"found\": true}";
  // Inside a pool task (the per-sample products) the kernel's own parallel_for runs inline, as in
  // the convolution layer.
  l.prepare = [isa](product const&, bool, int) {
    return plan{[isa](gemm_args const& g, int) {
                  nitro::cpu::detail::gemm_float(isa, g.ta, g.tb, g.m, g.n, g.k, 1.0f, g.a, g.lda, g.b, g.ldb, g.c, g.ldc, g.beta != 0.0f,
                                                 &nitro::cpu::thread_pool::instance());
                },
                ""};
  };
  return l;
}

// ---- OpenBLAS and BLIS: cblas_sgemm, column-major -------------------------------------------

using cblas_sgemm_fn = void (*)(int, int, int, int, int, int, float, float const*, int, float const*, int, float, float*, int);
using cblas_sgemm64_fn = void (*)(int, int, int, std::int64_t, std::int64_t, std::int64_t, float, float const*, std::int64_t,
                                  float const*, std::int64_t, float, float*, std::int64_t);
constexpr int cblas_col_major = 102, cblas_no_trans = 111, cblas_trans = 112;

library openblas_library(int threads) {
  library l;
  l.name = "openblas";
  void* h = open_first({"libopenblas.so.0", "libopenblas.so"});
  auto sgemm = symbol<cblas_sgemm_fn>(h, "cblas_sgemm");
  if (!sgemm) {
    l.info = "{\"found\": false, \"looked_for\": \"libopenblas.so.0\"}";
    return l;
  }
  auto set = symbol<void (*)(int)>(h, "openblas_set_num_threads");
  auto get = symbol<int (*)()>(h, "openblas_get_num_threads");
  auto parallel = symbol<int (*)()>(h, "openblas_get_parallel");
  auto config = symbol<char* (*)()>(h, "openblas_get_config");
  auto core = symbol<char* (*)()>(h, "openblas_get_corename");
  if (set) set(threads);
  const int par = parallel ? parallel() : -1;
  l.found = true;
  l.info = "{\"found\": true, \"file\": " + json_string(file_of(reinterpret_cast<void const*>(sgemm))) +
           ", \"config\": " + json_string(config ? config() : "") + ", \"core\": " + json_string(core ? core() : "") +
           ", \"OPENBLAS_CORETYPE\": " + json_string(env_or("OPENBLAS_CORETYPE", "unset")) +
           ", \"OPENBLAS_L2_SIZE\": " + json_string(env_or("OPENBLAS_L2_SIZE", "unset")) +
           ", \"threading\": " + json_string(par == 0 ? "sequential" : par == 1 ? "pthreads" : par == 2 ? "openmp" : "unknown") +
           ", \"threads\": " + std::to_string(get ? get() : -1) + "}";
  l.prepare = [sgemm, set](product const&, bool single, int) {
    return plan{[sgemm](gemm_args const& g, int) {
                  sgemm(cblas_col_major, g.ta ? cblas_trans : cblas_no_trans, g.tb ? cblas_trans : cblas_no_trans, g.m, g.n, g.k, 1.0f,
                        g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc);
                },
                single && !set ? "its thread count could not be set to one" : ""};
  };
  if (set) l.set_threads = set;
  return l;
}

// BLIS picks its kernels by CPUID and, on a CPU its release does not know (0.9 and AMD's Zen 4,
// say), falls back to its reference "generic" kernels: a number no one adopting BLIS would accept.
// Where BLIS_ARCH_TYPE is unset, a child process (before any thread starts) asks BLIS what it
// detects; if generic where the CPU runs AVX-512 (else AVX2 + FMA), BLIS_ARCH_TYPE is set to BLIS's
// own skx (haswell) configuration before BLIS loads here. Returns what was done, for the JSON.
std::string choose_blis_arch() {
  if (char const* set = std::getenv("BLIS_ARCH_TYPE")) return std::string("BLIS_ARCH_TYPE=") + set + " as set by the caller";
  int fds[2];
  if (pipe(fds) != 0) return "detected by BLIS";
  const pid_t pid = fork();
  if (pid < 0) return "detected by BLIS";
  if (pid == 0) {  // the child: load BLIS, report whether it detects generic and its skx and haswell ids
    close(fds[0]);
    int out[3] = {0, -1, -1};
    void* h = open_first({"libblis.so.4", "libblis.so.3", "libblis.so"});
    auto query = symbol<int (*)()>(h, "bli_arch_query_id");
    auto name = symbol<char const* (*)(int)>(h, "bli_arch_string");
    if (query && name) {
      out[0] = std::string(name(query())) == "generic";
      for (int i = 0; i < 64; ++i) {  // generic is BLIS's last configuration
        const std::string n = name(i) ? name(i) : "generic";
        if (n == "skx") out[1] = i;
        if (n == "haswell") out[2] = i;
        if (n == "generic") break;
      }
    }
    _exit(write(fds[1], out, sizeof out) == static_cast<ssize_t>(sizeof out) ? 0 : 1);
  }
  close(fds[1]);
  int out[3] = {0, -1, -1};
  const bool got = read(fds[0], out, sizeof out) == static_cast<ssize_t>(sizeof out);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  if (!got || !out[0]) return "detected by BLIS";
  int id = -1;
  char const* which = "";
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (out[1] >= 0 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    id = out[1], which = "skx";
  else if (out[2] >= 0 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    id = out[2], which = "haswell";
#endif
  if (id < 0) return "detected by BLIS (generic)";
  setenv("BLIS_ARCH_TYPE", std::to_string(id).c_str(), 1);
  return "BLIS_ARCH_TYPE=" + std::to_string(id) + " (" + which + ") set here: BLIS detects only its generic kernels on this CPU (set BLIS_ARCH_TYPE to generic's id to measure those)";
}

library blis_library(int threads, std::string const& arch_choice) {
  library l;
  l.name = "blis";
  void* h = open_first({"libblis.so.4", "libblis.so.3", "libblis.so"});
  auto sgemm32 = symbol<cblas_sgemm_fn>(h, "cblas_sgemm");
  if (!sgemm32) {
    l.info = "{\"found\": false, \"looked_for\": \"libblis.so.4\"}";
    return l;
  }
  auto int_size = symbol<std::int64_t (*)()>(h, "bli_info_get_blas_int_type_size");
  auto set = symbol<void (*)(std::int64_t)>(h, "bli_thread_set_num_threads");
  auto get = symbol<std::int64_t (*)()>(h, "bli_thread_get_num_threads");
  auto version = symbol<char* (*)()>(h, "bli_info_get_version_str");
  auto openmp = symbol<std::int64_t (*)()>(h, "bli_info_get_enable_openmp");
  auto pthreads = symbol<std::int64_t (*)()>(h, "bli_info_get_enable_pthreads");
  auto arch_id = symbol<int (*)()>(h, "bli_arch_query_id");
  auto arch_name = symbol<char* (*)(int)>(h, "bli_arch_string");
  if (set) set(threads);
  const std::int64_t blas_int = int_size ? int_size() : 32;
  l.found = true;
  l.info = "{\"found\": true, \"file\": " + json_string(file_of(reinterpret_cast<void const*>(sgemm32))) +
           ", \"version\": " + json_string(version ? version() : "") +
           ", \"arch\": " + json_string(arch_id && arch_name ? arch_name(arch_id()) : "") +
           ", \"arch_choice\": " + json_string(arch_choice) +
           ", \"threading\": " + json_string(openmp && openmp() ? "openmp" : pthreads && pthreads() ? "pthreads" : "sequential") +
           ", \"threads\": " + std::to_string(get ? get() : -1) + ", \"blas_int_bits\": " + std::to_string(blas_int) + "}";
  if (blas_int == 64) {
    auto sgemm64 = reinterpret_cast<cblas_sgemm64_fn>(reinterpret_cast<void*>(sgemm32));
    l.prepare = [sgemm64, set](product const&, bool single, int) {
      return plan{[sgemm64](gemm_args const& g, int) {
                    sgemm64(cblas_col_major, g.ta ? cblas_trans : cblas_no_trans, g.tb ? cblas_trans : cblas_no_trans, g.m, g.n, g.k, 1.0f,
                            g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc);
                  },
                  single && !set ? "its thread count could not be set to one" : ""};
    };
  } else {
    l.prepare = [sgemm32, set](product const&, bool single, int) {
      return plan{[sgemm32](gemm_args const& g, int) {
                    sgemm32(cblas_col_major, g.ta ? cblas_trans : cblas_no_trans, g.tb ? cblas_trans : cblas_no_trans, g.m, g.n, g.k, 1.0f,
                            g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc);
                  },
                  single && !set ? "its thread count could not be set to one" : ""};
    };
  }
  if (set) l.set_threads = [set](int t) { set(t); };
  return l;
}

// ---- oneDNN: dnnl_sgemm, row-major ------------------------------------------------------------

using dnnl_sgemm_fn = int (*)(char, char, std::int64_t, std::int64_t, std::int64_t, float, float const*, std::int64_t, float const*,
                              std::int64_t, float, float*, std::int64_t);
struct dnnl_version_info {  // dnnl_version_t
  int major, minor, patch;
  char const* hash;
  unsigned cpu_runtime, gpu_runtime;
};

library onednn_library(int threads) {
  library l;
  l.name = "onednn";
  void* h = open_first({"libdnnl.so.2", "libdnnl.so.3", "libdnnl.so"});
  auto sgemm = symbol<dnnl_sgemm_fn>(h, "dnnl_sgemm");
  if (!sgemm) {
    l.info = "{\"found\": false, \"looked_for\": \"libdnnl.so.2\"}";
    return l;
  }
  auto version = symbol<dnnl_version_info const* (*)()>(h, "dnnl_version");
  dnnl_version_info const* v = version ? version() : nullptr;
  const unsigned rt = v ? v->cpu_runtime : 0;
  // The OpenMP runtime it was built with (loaded with it): its thread count is a per-thread setting.
  void* omp = rt == 2u ? dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD) : nullptr;
  if (rt == 2u && !omp) omp = dlopen("libiomp5.so", RTLD_NOW | RTLD_NOLOAD);
  auto omp_set = symbol<void (*)(int)>(omp, "omp_set_num_threads");
  auto omp_get = symbol<int (*)()>(omp, "omp_get_max_threads");
  if (omp_set) omp_set(threads);
  l.found = true;
  l.info = "{\"found\": true, \"file\": " + json_string(file_of(reinterpret_cast<void const*>(sgemm))) + ", \"version\": " +
           json_string(v ? std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) : "") +
           ", \"hash\": " + json_string(v && v->hash ? v->hash : "") + ", \"threading\": " +
           json_string(rt == 1u ? "sequential" : rt == 2u ? (omp_set ? "openmp (" + file_of(reinterpret_cast<void const*>(omp_set)) + ")" : "openmp")
                       : rt == 4u ? "tbb" : rt == 8u ? "threadpool" : "unknown") +
           ", \"threads\": " + std::to_string(omp_get ? omp_get() : rt == 1u ? 1 : -1) + "}";
  const bool settable = omp_set || rt == 1u;
  l.prepare = [sgemm, omp_set, settable](product const&, bool single, int) {
    // Our column-major C (m x n) is, read row-major, C^T (n x m) = op(B)^T op(A)^T; a column-major
    // B read row-major is B^T, so op(B)^T is B's buffer as it lies when B is not transposed.
    return plan{[sgemm, omp_set, single](gemm_args const& g, int) {
                  if (single && omp_set) omp_set(1);  // this thread's OpenMP setting only
                  sgemm(g.tb ? 'T' : 'N', g.ta ? 'T' : 'N', g.n, g.m, g.k, 1.0f, g.b, g.ldb, g.a, g.lda, g.beta, g.c, g.ldc);
                },
                single && !settable ? "its thread count could not be set to one" : ""};
  };
  if (omp_set) l.set_threads = omp_set;
  return l;
}

// ---- libxsmm: JIT kernels -----------------------------------------------------------------------

using xsmm_kernel = void (*)(float const*, float const*, float*, ...);
using xsmm_dispatch_fn = xsmm_kernel (*)(int, int, int, int const*, int const*, int const*, float const*, float const*, int const*, int const*);
using xsmm_otrans_fn = void (*)(void*, void const*, unsigned, int, int, int, int);
constexpr int xsmm_trans_b = 2, xsmm_beta_0 = 16;

library libxsmm_library(int threads) {
  library l;
  l.name = "libxsmm";
  std::vector<std::string> names;
  if (char const* e = std::getenv("NITRO_LIBXSMM"); e && *e) names.push_back(e);
  names.insert(names.end(), {"libxsmm.so.1", "libxsmm.so", executable_dir() + "/libxsmm.so"});
  void* h = open_first(names);
  auto init = symbol<void (*)()>(h, "libxsmm_init");
  auto dispatch = symbol<xsmm_dispatch_fn>(h, "libxsmm_smmdispatch");
  auto otrans = symbol<xsmm_otrans_fn>(h, "libxsmm_otrans");
  auto arch = symbol<char const* (*)()>(h, "libxsmm_get_target_arch");
  if (!init || !dispatch) {
    l.info = "{\"found\": false, \"looked_for\": \"NITRO_LIBXSMM, libxsmm.so.1, libxsmm.so, " + executable_dir() +
             "/libxsmm.so\", \"hint\": \"Debian's libxsmm-dev ships static archives only; see the top of bench/gemm_libraries.cpp\"}";
    return l;
  }
  init();
  l.found = true;
  l.info = "{\"found\": true, \"file\": " + json_string(file_of(reinterpret_cast<void const*>(dispatch))) +
           ", \"target\": " + json_string(arch ? arch() : "") +
           ", \"threading\": \"none (one thread a kernel; at more threads nitro's pool splits C's columns)\"}";
  l.prepare = [dispatch, otrans, threads](product const& p, bool single, int slots) -> plan {
    if (p.ta && !otrans) return {nullptr, "unsupported: no transposed A in the JIT, no libxsmm_otrans"};
    const int parts = single ? 1 : std::max(1, std::min(threads, p.n));
    const int lda = p.m, ldb = p.tb ? p.n : p.k, ldc = p.m;  // A^T is transposed into an m x k matrix first
    const int flags = (p.tb ? xsmm_trans_b : 0) | (p.beta == 0.0f ? xsmm_beta_0 : 0);
    const int prefetch = 0;
    const float alpha = 1.0f, beta = p.beta;
    auto kernels = std::make_shared<std::map<int, xsmm_kernel>>();
    for (int t = 0; t < parts; ++t) {
      const int w = p.n * (t + 1) / parts - p.n * t / parts;
      if (w == 0 || kernels->count(w)) continue;
      xsmm_kernel kern = dispatch(p.m, w, p.k, &lda, &ldb, &ldc, &alpha, &beta, &flags, &prefetch);
      if (!kern) return {nullptr, "unsupported: libxsmm_smmdispatch gave no kernel"};
      (*kernels)[w] = kern;
    }
    auto scratch = std::make_shared<std::vector<std::vector<float>>>();
    if (p.ta) scratch->assign(static_cast<std::size_t>(slots), std::vector<float>(std::size_t(p.m) * p.k));
    std::string how = single        ? "one JIT kernel call a sample"
                      : parts > 1   ? "one JIT kernel call a thread, C's columns split over nitro's pool"
                                    : "one JIT kernel call";
    if (p.ta) how += "; A transposed first (libxsmm_otrans, timed): the JIT has no transposed A";
    return {[kernels, scratch, otrans, parts](gemm_args const& g, int slot) {
              float const* a = g.a;
              if (g.ta) {  // A is k x m (lda); A^T lands as m x k (ld m)
                float* at = (*scratch)[static_cast<std::size_t>(slot)].data();
                otrans(at, g.a, sizeof(float), g.k, g.m, g.lda, g.m);
                a = at;
              }
              if (parts == 1) {
                kernels->begin()->second(a, g.b, g.c);
                return;
              }
              nitro::cpu::thread_pool::instance().parallel_for(parts, [&](int t) {
                const int j0 = g.n * t / parts, w = g.n * (t + 1) / parts - j0;
                if (w == 0) return;
                // column j of op(B): B's column j (ldb apart), or B^T's — B's row j (1 apart)
                float const* bj = g.tb ? g.b + j0 : g.b + std::size_t(j0) * g.ldb;
                kernels->at(w)(a, bj, g.c + std::size_t(j0) * g.ldc);
              });
            },
            how};
  };
  return l;
}

// ---- data -----------------------------------------------------------------------------------------

void fill_random(std::vector<float>& v, std::uint64_t seed) {
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = float(double(s >> 11) / double(1ull << 53) * 2.0 - 1.0);
  }
}

struct operands {
  std::vector<float> a, b, c;
  gemm_args args(product const& p) {
    return {p.ta, p.tb, p.m, p.n, p.k, a.data(), p.ta ? p.k : p.m, b.data(), p.tb ? p.n : p.k, p.beta, c.data(), p.m};
  }
};

double max_abs_diff(std::vector<float> const& x, std::vector<float> const& y) {
  double d = 0;
  for (std::size_t i = 0; i < x.size(); ++i) d = std::max(d, double(std::fabs(x[i] - y[i])));
  return d;
}

// op(A) op(B) + beta C in double, for the reference's own check.
std::vector<float> naive(product const& p, operands const& o) {
  const int lda = p.ta ? p.k : p.m, ldb = p.tb ? p.n : p.k;
  std::vector<float> c(o.c.size());
  for (int j = 0; j < p.n; ++j)
    for (int i = 0; i < p.m; ++i) {
      double s = p.beta * double(o.c[std::size_t(i) + std::size_t(j) * p.m]);
      for (int q = 0; q < p.k; ++q) {
        const double av = p.ta ? o.a[std::size_t(q) + std::size_t(i) * lda] : o.a[std::size_t(i) + std::size_t(q) * lda];
        const double bv = p.tb ? o.b[std::size_t(j) + std::size_t(q) * ldb] : o.b[std::size_t(q) + std::size_t(j) * ldb];
        s += av * bv;
      }
      c[std::size_t(i) + std::size_t(j) * p.m] = float(s);
    }
  return c;
}

struct row {
  product p;
  std::vector<double> gflops;     // per library; < 0: could not run
  std::vector<bool> wrong;
};

}  // namespace

int main(int argc, char** argv) {
  int size = 2048;
  double seconds = 0.5;
  std::string only;
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    if (i + 1 >= argc || (f != "--size" && f != "--seconds" && f != "--only")) {
      std::fprintf(stderr, "gemm_libraries: unknown flag or missing value: %s (use --seconds S, --only NAME, --size N)\n", f.c_str());
      return 2;
    }
    if (f == "--size") size = std::atoi(argv[i + 1]);
    else if (f == "--seconds") seconds = std::atof(argv[i + 1]);
    else only = argv[i + 1];
  }
  if (size < 1 || !(seconds > 0)) {
    std::fprintf(stderr, "gemm_libraries: --size must be >= 1 and --seconds > 0\n");
    return 2;
  }

  const std::string blis_arch = choose_blis_arch();  // before any thread starts: it forks
  auto& pool = nitro::cpu::thread_pool::instance();
  const int threads = pool.size();
  // Every library at nitro's thread count: set before any of them loads (OpenBLAS and OpenMP read
  // their variables when they load), then through their setters as well.
  const std::string t_str = std::to_string(threads);
  for (char const* var : {"OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS", "OMP_NUM_THREADS"}) setenv(var, t_str.c_str(), 1);

  std::vector<library> libs;
  std::string isas;
  for (cpu_isa isa : {cpu_isa::avx512, cpu_isa::avx2, cpu_isa::generic})
    if (nitro::cpu::cpu_supports(isa)) {
      libs.push_back(nitro_library(isa));
      isas += std::string(isas.empty() ? "" : ", ") + "\"" + nitro::cpu::to_string(isa) + "\"";
    }
  const std::size_t first_other = libs.size();
  libs.push_back(openblas_library(threads));
  libs.push_back(blis_library(threads, blis_arch));
  libs.push_back(onednn_library(threads));
  libs.push_back(libxsmm_library(threads));

  std::string header = "{\"what\": \"libraries\", \"threads\": " + t_str + ", \"nitro\": {\"kernel\": \"" +
                       nitro::cpu::gemm_kernel_name() + "\", \"isas\": [" + isas + "]}";
  for (std::size_t i = first_other; i < libs.size(); ++i) header += ", \"" + libs[i].name + "\": " + libs[i].info;
  header += ", \"env\": {\"OPENBLAS_NUM_THREADS\": \"" + t_str + "\", \"BLIS_NUM_THREADS\": \"" + t_str + "\", \"OMP_NUM_THREADS\": \"" +
            t_str + "\", \"OMP_WAIT_POLICY\": " + json_string(env_or("OMP_WAIT_POLICY", "unset")) + "}}";
  std::printf("%s\n", header.c_str());
  std::fflush(stdout);

  // beta: dense forward 0 (its bias is an epilogue), dense gradients 1 (accumulated), conv forward
  // 1 (onto the bias), conv weight gradient 1, conv input gradient 0 (into col, then col2im).
  const std::vector<product> shapes = {
      {"sgemm", false, false, size, size, size, 0.0f, 0},
      {"mlp fwd 1", false, false, 256, 128, 784, 0.0f, 0},
      {"mlp fwd 2", false, false, 256, 128, 256, 0.0f, 0},
      {"mlp fwd 3", false, false, 10, 128, 256, 0.0f, 0},
      {"mlp dW 1", false, true, 256, 784, 128, 1.0f, 0},
      {"mlp dW 2", false, true, 256, 256, 128, 1.0f, 0},
      {"mlp dW 3", false, true, 10, 256, 128, 1.0f, 0},
      {"mlp dx 2", true, false, 256, 128, 256, 1.0f, 0},
      {"mlp dx 3", true, false, 256, 128, 10, 1.0f, 0},
      {"wide fwd 1", false, false, 1024, 128, 784, 0.0f, 0},
      {"wide fwd 2", false, false, 1024, 128, 1024, 0.0f, 0},
      {"wide fwd 3", false, false, 10, 128, 1024, 0.0f, 0},
      {"wide dW 1", false, true, 1024, 784, 128, 1.0f, 0},
      {"wide dW 2", false, true, 1024, 1024, 128, 1.0f, 0},
      {"wide dW 3", false, true, 10, 1024, 128, 1.0f, 0},
      {"wide dx 2", true, false, 1024, 128, 1024, 1.0f, 0},
      {"wide dx 3", true, false, 1024, 128, 10, 1.0f, 0},
      // fashion_cnn<32>: conv2d<1, 32, 3, 1, 1> on 28x28 (P = 784, K*K*InC = 9), conv2d<32, 64, 3, 1, 1>
      // on 14x14 (P = 196, K*K*InC = 288), per sample; then dense<3136, 128>, dense<128, 10>
      {"cnn conv1 fwd", false, false, 784, 32, 9, 1.0f, 128},
      {"cnn conv1 dW", true, false, 9, 32, 784, 1.0f, 128},
      {"cnn conv2 fwd", false, false, 196, 64, 288, 1.0f, 128},
      {"cnn conv2 dW", true, false, 288, 64, 196, 1.0f, 128},
      {"cnn conv2 dx", false, true, 196, 288, 64, 0.0f, 128},
      {"cnn dense1 fwd", false, false, 128, 128, 3136, 0.0f, 0},
      {"cnn dense1 dW", false, true, 128, 3136, 128, 1.0f, 0},
      {"cnn dense1 dx", true, false, 3136, 128, 128, 1.0f, 0},
      {"cnn dense2 fwd", false, false, 10, 128, 128, 0.0f, 0},
      {"cnn dense2 dW", false, true, 10, 128, 128, 1.0f, 0},
      {"cnn dense2 dx", true, false, 128, 128, 10, 1.0f, 0},
  };

  constexpr int max_chunks = 16;  // as nn/layers/detail/spatial.hpp's chunking
  const double round = seconds / 5;
  bool failed = false;
  std::vector<row> rows;
  std::uint64_t seed = 1;
  for (product const& p : shapes) {
    if (!only.empty() && p.name.find(only) == std::string::npos) continue;
    const bool batched = p.samples > 0;
    const int chunks = batched ? std::min(p.samples, max_chunks) : 1;
    const int per_chunk = batched ? (p.samples + chunks - 1) / chunks : 1;
    const int samples = batched ? chunks * per_chunk : 1;
    const double flops = 2.0 * p.m * p.n * p.k * samples;

    operands base;
    base.a.resize(std::size_t(p.m) * p.k), base.b.resize(std::size_t(p.k) * p.n), base.c.resize(std::size_t(p.m) * p.n);
    fill_random(base.a, seed++), fill_random(base.b, seed++), fill_random(base.c, seed++);
    std::vector<operands> ops(static_cast<std::size_t>(chunks), base);

    // The reference: nitro's kernel of this process, itself checked where a double loop is cheap.
    operands ref = base;
    {
      gemm_args g = ref.args(p);
      nitro::cpu::detail::gemm_float(nitro::cpu::gemm_isa(), g.ta, g.tb, g.m, g.n, g.k, 1.0f, g.a, g.lda, g.b, g.ldb, g.c, g.ldc,
                                     g.beta != 0.0f, &pool);
    }
    const double tol = 2e-6 * p.k + 1e-4;  // operands in [-1, 1]; float sums in any order
    double ref_diff = -1;
    if (double(p.m) * p.n * p.k <= 3e7) {
      ref_diff = max_abs_diff(ref.c, naive(p, base));
      if (ref_diff > tol) {
        std::fprintf(stderr, "gemm_libraries: %s: nitro's %s kernel differs from the double-precision loop by %g\n", p.name.c_str(),
                     nitro::cpu::gemm_kernel_name(), ref_diff);
        failed = true;
      }
    }

    row r{p, std::vector<double>(libs.size(), 0.0), std::vector<bool>(libs.size(), false)};
    std::string gf, diffs, hows;
    for (std::size_t li = 0; li < libs.size(); ++li) {
      library& lib = libs[li];
      double result = 0, diff = -1;
      std::string how;
      if (lib.found) {
        if (batched && lib.set_threads) lib.set_threads(1);
        const plan pl = lib.prepare(p, batched, chunks);
        how = pl.how;
        if (!pl.run) {
          result = -1;
        } else {
          // The per-sample products: `per` of them in each chunk, the chunks over nitro's pool.
          auto batch = [&](int per) {
            pool.parallel_for(chunks, [&](int c) {
              const gemm_args g = ops[static_cast<std::size_t>(c)].args(p);
              for (int s = 0; s < per; ++s) pl.run(g, c);
            });
          };
          for (auto& o : ops) o.c = base.c;
          if (batched) batch(1);
          else pl.run(ops[0].args(p), 0);
          diff = 0;
          for (auto const& o : ops) diff = std::max(diff, max_abs_diff(o.c, ref.c));
          if (!(diff <= tol)) {
            std::fprintf(stderr, "gemm_libraries: %s: %s differs from nitro by %g (tolerance %g): not timed\n", p.name.c_str(),
                         lib.name.c_str(), diff, tol);
            failed = true;
            r.wrong[li] = true;
          } else if (batched) {
            result = best_gflops([&] { batch(per_chunk); }, flops, round);
          } else {
            result = best_gflops([&] { pl.run(ops[0].args(p), 0); }, flops, round);
          }
        }
        if (batched && lib.set_threads) lib.set_threads(threads);
      }
      r.gflops[li] = result;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f", std::max(0.0, result));
      gf += std::string(gf.empty() ? "" : ", ") + "\"" + lib.name + "\": " + buf;
      if (diff < 0) std::snprintf(buf, sizeof buf, "null");
      else std::snprintf(buf, sizeof buf, "%.2g", diff);
      diffs += std::string(diffs.empty() ? "" : ", ") + "\"" + lib.name + "\": " + buf;
      if (!how.empty()) hows += std::string(hows.empty() ? "" : ", ") + "\"" + lib.name + "\": " + json_string(how);
    }
    char ref_buf[32];
    if (ref_diff < 0) std::snprintf(ref_buf, sizeof ref_buf, "null");
    else std::snprintf(ref_buf, sizeof ref_buf, "%.2g", ref_diff);
    std::printf(
        "{\"what\": %s, \"threads\": %d, \"op\": \"%c%c\", \"m\": %d, \"n\": %d, \"k\": %d, \"beta\": %g, \"products\": %d, "
        "\"mode\": %s, \"gflops\": {%s}, \"maxdiff\": {%s}, \"nitro_vs_double\": %s, \"how\": {%s}, \"nitro_kernel\": \"%s\"}\n",
        json_string(p.name).c_str(), threads, p.ta ? 'T' : 'N', p.tb ? 'T' : 'N', p.m, p.n, p.k, double(p.beta), samples,
        json_string(batched ? "per sample: " + std::to_string(chunks) + " chunks over nitro's pool, each call on one thread"
                            : "one product, each library's own threading")
            .c_str(),
        gf.c_str(), diffs.c_str(), ref_buf, hows.c_str(), nitro::cpu::gemm_kernel_name());
    std::fflush(stdout);
    rows.push_back(std::move(r));
  }

  // The table: one row a shape, one column a library found; the fastest in bold.
  std::string missing;
  std::fprintf(stderr, "\nGFLOP/s at %d thread%s (nitro's kernel: %s)\n\n| shape | op | m x n x k |", threads, threads == 1 ? "" : "s",
               nitro::cpu::gemm_kernel_name());
  for (auto const& l : libs)
    if (l.found) std::fprintf(stderr, " %s |", l.name.c_str());
    else missing += (missing.empty() ? "" : ", ") + l.name;
  std::fprintf(stderr, "\n|---|---|---|");
  for (auto const& l : libs)
    if (l.found) std::fprintf(stderr, "---:|");
  std::fprintf(stderr, "\n");
  for (auto const& r : rows) {
    std::string dims = std::to_string(r.p.m) + " x " + std::to_string(r.p.n) + " x " + std::to_string(r.p.k);
    if (r.p.samples > 0) dims += " (x" + std::to_string(r.p.samples) + ")";
    std::fprintf(stderr, "| %s | %c%c | %s |", r.p.name.c_str(), r.p.ta ? 'T' : 'N', r.p.tb ? 'T' : 'N', dims.c_str());
    const double best = *std::max_element(r.gflops.begin(), r.gflops.end());
    for (std::size_t i = 0; i < libs.size(); ++i) {
      if (!libs[i].found) continue;
      if (r.wrong[i]) std::fprintf(stderr, " wrong |");
      else if (r.gflops[i] < 0) std::fprintf(stderr, " n/a |");
      else if (r.gflops[i] == best && best > 0) std::fprintf(stderr, " **%.1f** |", r.gflops[i]);
      else std::fprintf(stderr, " %.1f |", r.gflops[i]);
    }
    std::fprintf(stderr, "\n");
  }
  if (!missing.empty()) std::fprintf(stderr, "\nnot found: %s\n", missing.c_str());
  return failed ? 1 : 0;
}
