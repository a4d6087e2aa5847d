// tensor/cpu/: the CPU backend's matrix product and its threads. Every product a layer asks for
// must equal the textbook sum — with every kernel this CPU can run (AVX-512, AVX2+FMA, Eigen's), for
// every transpose, ragged edges, strides that take the packing paths, alpha and beta — and must not
// depend on how many threads computed it. The epilogues around a layer's product (bias, activation,
// and backward the activation's derivative and the bias gradient), cut into pieces on the threads,
// must give the bits of one pass.
#include <nitro/tensor/cpu/backend.hpp>
#include <nitro/tensor/cpu/gemm.hpp>
#include <nitro/tensor/cpu/thread_pool.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

template <class T>
struct product {
  bool ta, tb;
  std::int64_t m, n, k, lda, ldb, ldc;
  std::vector<T> a, b, c;

  product(bool ta_, bool tb_, std::int64_t m_, std::int64_t n_, std::int64_t k_, std::int64_t pad = 3)
      : ta(ta_), tb(tb_), m(m_), n(n_), k(k_) {
    lda = (ta ? k : m) + pad;
    ldb = (tb ? n : k) + pad;
    ldc = m + pad;
    std::mt19937 g(static_cast<unsigned>(m * 1009 + n * 31 + k * 7 + ta * 2 + tb));
    std::uniform_real_distribution<double> u(-1, 1);
    a.resize(static_cast<std::size_t>(lda * (ta ? m : k)));
    b.resize(static_cast<std::size_t>(ldb * (tb ? k : n)));
    c.resize(static_cast<std::size_t>(ldc * n));
    for (auto& x : a) x = T(u(g));
    for (auto& x : b) x = T(u(g));
    for (auto& x : c) x = T(u(g));
  }
  double at_a(std::int64_t i, std::int64_t p) const { return ta ? a[std::size_t(p + i * lda)] : a[std::size_t(i + p * lda)]; }
  double at_b(std::int64_t p, std::int64_t j) const { return tb ? b[std::size_t(j + p * ldb)] : b[std::size_t(p + j * ldb)]; }
  // alpha op(A) op(B) + beta C in double, C as it is now
  std::vector<double> reference(double alpha, double beta) const {
    std::vector<double> r(c.begin(), c.end());
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < m; ++i) {
        double s = 0;
        for (std::int64_t p = 0; p < k; ++p) s += at_a(i, p) * at_b(p, j);
        double& x = r[std::size_t(i + j * ldc)];
        x = alpha * s + (beta == 0 ? 0.0 : beta * x);
      }
    return r;
  }
  void run(T alpha, T beta) {
    nitro::cpu::gemm<T>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  }
  // the float product with one kernel, as gemm() calls it: C scaled first unless beta is 0 or 1
  void run(nitro::cpu::cpu_isa isa, float alpha, float beta, nitro::cpu::thread_pool* pool) {
    if (beta != 0.0f && beta != 1.0f)
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t i = 0; i < m; ++i) c[std::size_t(i + j * ldc)] *= beta;
    nitro::cpu::detail::gemm_float(isa, ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, c.data(), ldc, beta != 0.0f, pool);
  }
};

// Every instruction set this CPU has a float kernel for (generic, Eigen's, always).
std::vector<nitro::cpu::cpu_isa> runnable_isas() {
  std::vector<nitro::cpu::cpu_isa> r;
  for (auto i : {nitro::cpu::cpu_isa::avx512, nitro::cpu::cpu_isa::avx2, nitro::cpu::cpu_isa::generic})
    if (nitro::cpu::cpu_supports(i)) r.push_back(i);
  return r;
}

// max |got - want| over C's m x n, and whether the padding rows between columns kept their values
template <class T>
std::pair<double, bool> compare(product<T> const& p, std::vector<double> const& want, std::vector<T> const& before) {
  double err = 0;
  bool pad_kept = true;
  for (std::int64_t j = 0; j < p.n; ++j)
    for (std::int64_t i = 0; i < p.ldc; ++i) {
      const std::size_t at = std::size_t(i + j * p.ldc);
      if (i < p.m) err = std::max(err, std::abs(double(p.c[at]) - want[at]));
      else pad_kept = pad_kept && p.c[at] == before[at];
    }
  return {err, pad_kept};
}

// With `isa` (float only), that kernel on the backend's threads; without, gemm() as layers call it.
template <class T>
void check_product(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, T beta, std::int64_t pad = 3,
                   nitro::cpu::cpu_isa const* isa = nullptr) {
  product<T> p(ta, tb, m, n, k, pad);
  if (beta == T(0))  // C must not be read: NaN there must not reach the result
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < m; ++i) p.c[std::size_t(i + j * p.ldc)] = std::numeric_limits<T>::quiet_NaN();
  const auto want = p.reference(double(alpha), double(beta));
  const auto before = p.c;
  if constexpr (std::is_same_v<T, float>) {
    if (isa) p.run(*isa, alpha, beta, &nitro::cpu::thread_pool::instance());
    else p.run(alpha, beta);
  } else {
    p.run(alpha, beta);
  }
  auto [err, pad_kept] = compare(p, want, before);
  const double tol = (std::is_same_v<T, float> ? 2e-6 : 1e-13) * double(k + 4);
  INFO(std::string(isa ? nitro::cpu::to_string(*isa) : "gemm") << " " << (ta ? "T" : "N") << (tb ? "T" : "N") << " m=" << m << " n=" << n
                                                   << " k=" << k << " alpha=" << alpha << " beta=" << beta << " lda=" << p.lda
                                                   << " ldb=" << p.ldb);
  CHECK(err <= tol);
  CHECK(pad_kept);
}

}  // namespace

TEST_CASE("gemm: every kernel, every transpose, ragged edges, alpha and beta, against the textbook sum") {
  // rows around both kernels' register blocks (AVX-512 32, AVX2 16) and columns around theirs (8, 6)
  const std::int64_t ms[] = {1, 8, 10, 16, 17, 33, 100};
  const std::int64_t ns[] = {1, 5, 6, 7, 8, 9, 30};
  const std::int64_t ks[] = {1, 5, 16, 100, 300};
  for (auto isa : runnable_isas())
    for (int t = 0; t < 4; ++t)
      for (auto m : ms)
        for (auto n : ns)
          for (auto k : ks) {
            const float alpha = (m + n) % 3 == 0 ? 0.5f : 1.0f;
            const float beta = k % 2 ? 0.0f : (n % 2 ? 1.0f : -0.25f);
            check_product<float>(t & 1, t & 2, m, n, k, alpha, beta, 3, &isa);
          }
  // and gemm() itself, with the kernel this process chose
  check_product<float>(true, false, 33, 9, 100, 0.5f, -0.25f);
}

TEST_CASE("gemm: the shapes of training, big enough to run on several threads, with every kernel") {
  for (auto isa : runnable_isas()) {
    auto const* i = &isa;
    // a dense layer's forward W x, its weight gradient g x^T and its input gradient W^T g
    check_product<float>(false, false, 256, 128, 784, 1.0f, 0.0f, 0, i);
    check_product<float>(false, true, 256, 784, 128, 1.0f, 1.0f, 0, i);
    check_product<float>(true, false, 784, 128, 256, 1.0f, 1.0f, 0, i);
    check_product<float>(false, false, 10, 128, 256, 1.0f, 0.0f, 0, i);
    // a convolution's products: col W, col^T g, g W^T
    check_product<float>(false, false, 196, 64, 288, 1.0f, 0.0f, 0, i);
    check_product<float>(true, false, 288, 64, 196, 1.0f, 1.0f, 0, i);
    check_product<float>(false, true, 196, 288, 64, 1.0f, 1.0f, 0, i);
    check_product<float>(true, true, 300, 200, 150, 1.0f, 0.5f, 0, i);
  }
}

TEST_CASE("gemm: strides a multiple of 4 KiB (the packing paths) give the same sums, with every kernel") {
  // leading dimensions of 1024 floats: op(A) and op(B) are packed instead of read in place
  for (auto isa : runnable_isas()) {
    check_product<float>(false, false, 200, 40, 130, 1.0f, 0.0f, 1024 - 200, &isa);
    check_product<float>(false, true, 70, 90, 50, 1.0f, 1.0f, 1024 - 70, &isa);
    check_product<float>(true, false, 64, 24, 40, 2.0f, 1.0f, 1024 - 40, &isa);
    check_product<float>(true, true, 45, 13, 300, 1.0f, 0.0f, 1024 - 300, &isa);
  }
}

TEST_CASE("gemm: the kernel is the best this CPU runs, and NITRO_CPU_ISA caps it") {
  using nitro::cpu::cpu_isa;
  const cpu_isa best = nitro::cpu::best_cpu_isa();
  CHECK(nitro::cpu::cpu_supports(best));
  CHECK(nitro::cpu::cpu_supports(cpu_isa::generic));
  if (!std::getenv("NITRO_CPU_ISA")) CHECK(nitro::cpu::gemm_isa() == best);
  CHECK(std::string(nitro::cpu::gemm_kernel_name()) == nitro::cpu::to_string(nitro::cpu::gemm_isa()));
  CHECK(nitro::cpu::cpu_isa_from(nullptr) == best);
  CHECK(nitro::cpu::cpu_isa_from("") == best);
  CHECK(nitro::cpu::cpu_isa_from("generic") == cpu_isa::generic);
  for (auto i : {cpu_isa::avx512, cpu_isa::avx2}) {
    INFO(nitro::cpu::to_string(i));
    if (nitro::cpu::cpu_supports(i)) {
      CHECK(nitro::cpu::cpu_isa_from(nitro::cpu::to_string(i)) == i);
    } else {  // a set this CPU lacks is refused, naming the best it has
      try {
        nitro::cpu::cpu_isa_from(nitro::cpu::to_string(i));
        FAIL("no error");
      } catch (nitro::error const& e) {
        CHECK(e.code() == "E-CPU-002");
        CHECK(std::string(e.what()).find(std::string("its best is ") + nitro::cpu::to_string(best)) != std::string::npos);
      }
    }
  }
  try {
    nitro::cpu::cpu_isa_from("avx1024");
    FAIL("no error");
  } catch (nitro::error const& e) {
    CHECK(e.code() == "E-CPU-002");
    CHECK(std::string(e.what()).find("NITRO_CPU_ISA='avx1024' is not an instruction set nitro has kernels for") != std::string::npos);
  }
}

TEST_CASE("gemm: double precision (Eigen's kernel) against the textbook sum") {
  for (int t = 0; t < 4; ++t) {
    check_product<double>(t & 1, t & 2, 37, 19, 53, 1.0, 0.0);
    check_product<double>(t & 1, t & 2, 130, 129, 140, 0.5, 1.0);
  }
}

TEST_CASE("gemm: empty products and alpha = 0 only scale C") {
  std::vector<float> c{1, 2, 3, 4};
  float a = 1, b = 1;
  nitro::cpu::gemm<float>(false, false, 2, 2, 0, 1.0f, &a, 2, &b, 1, 3.0f, c.data(), 2);
  CHECK(c == std::vector<float>{3, 6, 9, 12});
  nitro::cpu::gemm<float>(false, false, 2, 2, 1, 0.0f, &a, 2, &b, 1, 0.0f, c.data(), 2);
  CHECK(c == std::vector<float>{0, 0, 0, 0});
  nitro::cpu::gemm<float>(false, false, 0, 2, 1, 1.0f, &a, 1, &b, 1, 0.0f, c.data(), 1);  // nothing to write
  CHECK(c == std::vector<float>{0, 0, 0, 0});
}

TEST_CASE("gemm: the result does not depend on the number of threads, with nitro's own kernels") {
  for (auto isa : runnable_isas()) {
    if (isa == nitro::cpu::cpu_isa::generic) continue;  // Eigen's: each part is its own product
    INFO(nitro::cpu::to_string(isa));
    for (int t = 0; t < 4; ++t) {
      product<float> p(t & 1, t & 2, 300, 260, 200, 1);
      std::vector<float> serial = p.c, three = p.c, seven = p.c;
      nitro::cpu::thread_pool pool3(3), pool7(7);
      auto run = [&](std::vector<float>& c, nitro::cpu::thread_pool* pool) {
        nitro::cpu::detail::gemm_float(isa, p.ta, p.tb, p.m, p.n, p.k, 1.0f, p.a.data(), p.lda, p.b.data(), p.ldb, c.data(), p.ldc, true,
                                       pool);
      };
      run(serial, nullptr);
      run(three, &pool3);
      run(seven, &pool7);
      CHECK(serial == three);  // bitwise
      CHECK(serial == seven);
    }
  }
}

TEST_CASE("epilogues: cut into pieces on the threads, one pass's values, the same bits inline on one thread, with every activation") {
  using nitro::epilogue_act;
  using array = Eigen::ArrayXXf;
  // 300 x 200: 4 pieces of whole columns forward, 5 blocks of rows backward (the last 44 rows)
  const std::int64_t m = 300, n = 200, k = 40;
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-1, 1);
  auto random = [&](std::int64_t r, std::int64_t c) {
    array x(r, c);
    for (auto& v : x.reshaped()) v = u(g);
    return x;
  };
  const array a = random(m, k), b = random(k, n), bias = random(m, 1), gy = random(m, n);
  auto near = [](array const& x, array const& y) { return ((x - y).abs() <= 1e-6f * (1.0f + y.abs())).all(); };
  // the pieces run on the pool's threads from outside a region, inline on one thread from inside one
  auto on_one_thread = [](auto&& f) {
    nitro::cpu::thread_pool::instance().parallel_for(2, [&](int t) {
      if (t == 0) f();
    });
  };
  for (epilogue_act act : {epilogue_act::identity, epilogue_act::relu, epilogue_act::tanh, epilogue_act::sigmoid, epilogue_act::gelu}) {
    CAPTURE(int(act));
    array z(m, n), c(m, n), z1(m, n), c1(m, n);
    auto forward = [&](array& zz, array& cc) {
      nitro::cpu::detail::gemm_epilogue<float>(false, false, m, n, k, a.data(), m, b.data(), k, bias.data(), act, zz.data(), cc.data(), m);
    };
    forward(z, c);
    on_one_thread([&] { forward(z1, c1); });
    CHECK((z == z1).all());
    CHECK((c == c1).all());
    array want_z(m, n);
    nitro::cpu::gemm<float>(false, false, m, n, k, 1.0f, a.data(), m, b.data(), k, 0.0f, want_z.data(), m);
    want_z.colwise() += bias.col(0);
    array want_c = want_z;
    nitro::detail::with_epilogue(act, [&](auto A) { nitro::detail::epilogue_forward<A.value>(want_c); });
    CHECK((z == want_z).all());
    CHECK(near(c, want_c));

    array grad(m, n), bias_grad = array::Constant(m, 1, 0.5f), grad1(m, n), bias_grad1 = bias_grad;
    auto backward = [&](array& gg, array& bg) { nitro::cpu::detail::epilogue_backward<float>(act, m, n, gy.data(), c.data(), gg.data(), bg.data()); };
    backward(grad, bias_grad);
    on_one_thread([&] { backward(grad1, bias_grad1); });
    CHECK((grad == grad1).all());
    CHECK((bias_grad == bias_grad1).all());
    array want_grad = gy;
    nitro::detail::with_epilogue(act, [&](auto A) { nitro::detail::epilogue_backward<A.value>(want_grad, c); });
    CHECK(near(grad, want_grad));
    CHECK(((bias_grad - 0.5f - want_grad.rowwise().sum()).abs() <= 1e-4f).all());
  }
}

TEST_CASE("thread_pool: every index runs exactly once, on several threads") {
  nitro::cpu::thread_pool pool(3);
  CHECK(pool.size() == 3);
  for (int n : {0, 1, 2, 3, 17, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    pool.parallel_for(n, [&](int i) { hits[std::size_t(i)].fetch_add(1); });
    int wrong = 0;
    for (auto& h : hits) wrong += h.load() != 1;
    INFO("n = " << n);
    CHECK(wrong == 0);
  }
  // work really is shared: with tasks that wait for each other, a lone thread would never finish
  std::atomic<int> arrived{0};
  std::atomic<bool> alone{false};
  pool.parallel_for(2, [&](int) {
    arrived.fetch_add(1);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (arrived.load() < 2)
      if (std::chrono::steady_clock::now() > give_up) {
        alone = true;
        break;
      }
  });
  CHECK_FALSE(alone.load());
}

TEST_CASE("thread_pool: a task's own parallel_for runs inline; regions from two threads take turns") {
  nitro::cpu::thread_pool pool(2);
  std::atomic<int> inner{0};
  pool.parallel_for(4, [&](int) {
    CHECK(nitro::cpu::thread_pool::inside());
    pool.parallel_for(5, [&](int) { inner.fetch_add(1); });
  });
  CHECK(inner.load() == 20);
  CHECK_FALSE(nitro::cpu::thread_pool::inside());

  std::atomic<long> total{0};
  auto caller = [&] {
    for (int r = 0; r < 200; ++r) pool.parallel_for(8, [&](int i) { total.fetch_add(i); });
  };
  std::thread other(caller);
  caller();
  other.join();
  CHECK(total.load() == 2L * 200 * 28);
}

TEST_CASE("thread_pool: for_each_share cuts a count into one contiguous share per thread, each run once, from two callers at once") {
  nitro::cpu::thread_pool pool(3);
  for (std::int64_t count : {1, 2, 3, 4, 7, 1000}) {
    CAPTURE(count);
    for (int call = 0; call < 50; ++call) {
      std::vector<std::atomic<int>> seen(static_cast<std::size_t>(count));
      std::atomic<int> shares{0};
      pool.for_each_share(count, [&](std::int64_t b, std::int64_t e) {
        CHECK(b < e);
        shares.fetch_add(1);
        for (std::int64_t i = b; i < e; ++i) seen[std::size_t(i)].fetch_add(1);
      });
      CHECK(shares.load() == std::min<std::int64_t>(count, 3));
      for (auto const& x : seen) CHECK(x.load() == 1);
    }
  }
  // inside a task it runs inline, as one share
  pool.parallel_for(2, [&](int) {
    int calls = 0;
    pool.for_each_share(10, [&](std::int64_t b, std::int64_t e) {
      ++calls;
      CHECK((b == 0 && e == 10));
    });
    CHECK(calls == 1);
  });
  // two callers: their regions take turns, and each call's claims are its own
  std::atomic<long> total{0};
  auto caller = [&] {
    for (int r = 0; r < 300; ++r)
      pool.for_each_share(100, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) total.fetch_add(i);
      });
  };
  std::thread other(caller);
  caller();
  other.join();
  CHECK(total.load() == 2L * 300 * 4950);
}

TEST_CASE("thread_pool: idle workers fall asleep and wake for the next region") {
  nitro::cpu::thread_pool pool(2);
  std::this_thread::sleep_for(nitro::cpu::thread_pool::spin_window * 4);
  std::atomic<int> n{0};
  pool.parallel_for(64, [&](int) { n.fetch_add(1); });
  CHECK(n.load() == 64);
}

TEST_CASE("thread_pool: NITRO_NUM_THREADS is checked") {
  char const* old = std::getenv("NITRO_NUM_THREADS");
  std::string saved = old ? old : "";
  ::setenv("NITRO_NUM_THREADS", "3", 1);
  CHECK(nitro::cpu::thread_pool::default_size() == 3);
  for (char const* bad : {"two", "0", "-1", "2x"}) {
    ::setenv("NITRO_NUM_THREADS", bad, 1);
    INFO(bad);
    try {
      (void)nitro::cpu::thread_pool::default_size();
      FAIL("no error");
    } catch (nitro::error const& e) {
      CHECK(e.code() == "E-CPU-001");
      CHECK(std::string(e.what()).find(bad) != std::string::npos);
    }
  }
  if (old) ::setenv("NITRO_NUM_THREADS", saved.c_str(), 1);
  else ::unsetenv("NITRO_NUM_THREADS");
  CHECK(nitro::cpu::thread_pool::default_size() >= 1);
}
