// tensor/: shapes, values of every operation, their gradients against finite differences, the
// arena and the tape.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using D = nitro::basic_tensor<double>;
using nitro::shape;

namespace {
D random(shape s, nitro::rng& g, double lo = -1, double hi = 1) {
  D t = D::owned(s);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = g.uniform(lo, hi);
  return t;
}
void require_ok(nitro::nn::gradcheck_result const& r) {
  INFO(r.worst);
  CHECK(r.ok);
}
}  // namespace

TEST_CASE("shape: column-major extents, batch last") {
  shape s{28, 28, 1, 128};
  CHECK(s.rank() == 4);
  CHECK(s.numel() == 28 * 28 * 128);
  CHECK(s.batch() == 128);
  CHECK(s.features() == 784);
  CHECK(s.with_last(7) == shape{28, 28, 1, 7});
  CHECK(s.to_string() == "[28, 28, 1, 128]");
  CHECK(shape{}.numel() == 1);
  CHECK_THROWS_AS((shape{1, 2, 3, 4, 5, 6}), nitro::error);
}

TEST_CASE("tensor: owned outside a step, arena inside one") {
  nitro::Tensor a = nitro::Tensor::zeros({3, 2});
  CHECK(a.owns_memory());
  a(1, 1) = 5;
  CHECK(a[4] == 5);  // column-major
  nitro::arena mem;
  nitro::step_context ctx{&mem, nullptr, false, 0, 0};
  {
    nitro::context_scope scope(ctx);
    nitro::Tensor b = nitro::Tensor::zeros({3, 2});
    CHECK_FALSE(b.owns_memory());
    CHECK(mem.bytes_in_use() >= 6 * sizeof(float));
  }
  CHECK_THROWS_WITH_AS(a.item(), doctest::Contains("E-SHAPE-004"), nitro::error);
  CHECK_THROWS_WITH_AS(a.reshape({5}), doctest::Contains("E-SHAPE-005"), nitro::error);
  CHECK(a.reshape({6}).shape() == shape{6});
}

TEST_CASE("element-wise values and broadcasting from the first dimension") {
  D x = D::from({1, 2, 3, 4, 5, 6}, {3, 2});
  D bias = D::from({10, 20, 30}, {3});
  D row = D::from({100, 200}, {1, 2});
  D y = x + bias;  // [3] broadcasts over the batch
  CHECK(y.to_vector() == std::vector<double>{11, 22, 33, 14, 25, 36});
  D z = x * row;   // [1, 2] broadcasts over features
  CHECK(z.to_vector() == std::vector<double>{100, 200, 300, 800, 1000, 1200});
  CHECK((x - 1.0).to_vector() == std::vector<double>{0, 1, 2, 3, 4, 5});
  CHECK((2.0 / D::from({1, 4}, {2})).to_vector() == std::vector<double>{2, 0.5});
  CHECK(nitro::relu(D::from({-1, 2}, {2})).to_vector() == std::vector<double>{0, 2});
  CHECK_THROWS_WITH_AS(x + D::owned({2, 2}), doctest::Contains("E-SHAPE-006"), nitro::error);
  CHECK(nitro::sum(x).item() == 21);
  CHECK(nitro::mean(x).item() == 3.5);
  CHECK(nitro::sum(x, 0).to_vector() == std::vector<double>{6, 15});
  CHECK(nitro::sum(x, 1).to_vector() == std::vector<double>{5, 7, 9});
  CHECK(nitro::sum(x, -1).shape() == shape{3, 1});
  CHECK(nitro::argmax(D::from({1, 9, 3, 7, 2, 0}, {3, 2})).to_vector() == std::vector<double>{1, 0});
  CHECK(nitro::max(D::from({1, 9, 3, 7, 2, 0}, {3, 2})).to_vector() == std::vector<double>{9, 7});
  D sm = nitro::softmax(D::from({0, 0, 1, 1}, {2, 2}));
  CHECK(sm[0] == doctest::Approx(0.5));
  CHECK(nitro::logsumexp(D::from({0, 0}, {2, 1}))[0] == doctest::Approx(std::log(2.0)));
  D m = nitro::matmul(D::from({1, 2, 3, 4}, {2, 2}), D::from({1, 0, 0, 1}, {2, 2}));
  CHECK(m.to_vector() == std::vector<double>{1, 2, 3, 4});
  CHECK(nitro::transpose(D::from({1, 2, 3, 4, 5, 6}, {2, 3})).to_vector() == std::vector<double>{1, 3, 5, 2, 4, 6});
  CHECK(nitro::gelu(D::from({1.0}, {1}))[0] == doctest::Approx(0.8413447460685429));
}

TEST_CASE("every operation's gradient matches central finite differences (float64)") {
  nitro::rng g(7);
  D x = random({4, 3}, g), y = random({4, 3}, g), b = random({4}, g), r = random({1, 3}, g);
  D pos = random({4, 3}, g, 0.5, 2.0);
  SUBCASE("arithmetic and broadcasting") {
    require_ok(nitro::nn::gradcheck([&] { return nitro::sum(x * y + b * x - r / (y * y + 2.0) + nitro::maximum(x, y) - nitro::minimum(x, b)); },
                                    {&x, &y, &b, &r}));
    require_ok(nitro::nn::gradcheck([&] { return nitro::sum((3.0 - x) * 2.0 + 1.0 / pos - (-y) / 4.0); }, {&x, &y, &pos}));
  }
  SUBCASE("unary maps") {
    require_ok(nitro::nn::gradcheck([&] {
      return nitro::sum(nitro::exp(x) + nitro::tanh(y) + nitro::sigmoid(x) + nitro::gelu(y) + nitro::softplus(x) + nitro::relu(y) +
                        nitro::square(x) + nitro::abs(y));
    }, {&x, &y}));
    require_ok(nitro::nn::gradcheck([&] { return nitro::sum(nitro::log(pos) + nitro::sqrt(pos) + nitro::pow(pos, 1.5) + nitro::clamp(x, -0.5, 0.5)); },
                                    {&pos, &x}));
  }
  SUBCASE("reductions") {
    require_ok(nitro::nn::gradcheck([&] {
      return nitro::sum(nitro::square(nitro::sum(x, 0))) + nitro::sum(nitro::mean(y, 1) * 3.0) + nitro::mean(nitro::logsumexp(x)) +
             nitro::sum(nitro::max(y)) + nitro::mean(x * y);
    }, {&x, &y}));
  }
  SUBCASE("softmax and log-softmax") {
    require_ok(nitro::nn::gradcheck([&] { return nitro::sum(nitro::softmax(x) * y) + nitro::sum(nitro::log_softmax(y) * x); }, {&x, &y}));
  }
  SUBCASE("matrix products, transposes, slices, concatenation, reshapes") {
    D A = random({3, 5}, g), B = random({5, 2}, g);
    require_ok(nitro::nn::gradcheck([&] { return nitro::sum(nitro::square(nitro::matmul(A, B))) + nitro::sum(nitro::transpose(A) * 0.5); }, {&A, &B}));
    require_ok(nitro::nn::gradcheck([&] {
      D s = nitro::slice_batch(x, 1, 3);
      D c = nitro::concat_features(s, nitro::slice_batch(y, 0, 2));
      return nitro::sum(nitro::square(c)) + nitro::sum(nitro::flatten(x.reshape({2, 2, 3})) * y);
    }, {&x, &y}));
  }
}

TEST_CASE("the tape: gradients reach leaves and accumulate; no_grad records nothing") {
  nitro::arena mem;
  nitro::tape tp(mem);
  nitro::step_context ctx{&mem, &tp, true, 0, 0};
  nitro::context_scope scope(ctx);
  std::vector<double> gx(2, 0.0);
  D x = D::from({1, 2}, {2});
  x.set_var(tp.leaf(gx.data(), sizeof(double) * 2));
  D y = nitro::sum(x * x) + nitro::sum(x);  // dy/dx = 2x + 1
  {
    nitro::no_grad ng;
    D z = x * 3.0;
    CHECK_FALSE(z.requires_grad());
  }
  tp.backward<double>(y.var(), 1.0);
  CHECK(gx == std::vector<double>{3, 5});
  CHECK(x.grad().to_vector() == std::vector<double>{3, 5});
}

TEST_CASE("the arena: after the first step, a step of the same shapes needs no new memory") {
  nitro::arena mem;
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 40; ++i) mem.allocate(100000);
    if (step == 0) CHECK(mem.chunk_count() > 1);
    mem.reset();
    CHECK(mem.chunk_count() == 1);
  }
  std::size_t cap = mem.capacity();
  for (int i = 0; i < 40; ++i) mem.allocate(100000);
  CHECK(mem.capacity() == cap);
  CHECK(reinterpret_cast<std::uintptr_t>(mem.allocate(3)) % 64 == 0);
}

namespace {
template <class T>
void maps_agree(nitro::map_op op, T a, T b, std::vector<T> const& xs, double tol) {
  INFO(nitro::to_string(op), " ", sizeof(T) * 8, "-bit");
  auto& cpu = nitro::cpu::ops::instance();
  const auto n = static_cast<std::int64_t>(xs.size());
  std::vector<T> y(xs.size()), gy(xs.size()), gx(xs.size(), T(0.25));
  for (std::size_t i = 0; i < xs.size(); ++i) gy[i] = T(0.5) + T(i % 3);
  cpu.map(op, n, a, b, xs.data(), y.data());
  cpu.map_backward(op, n, a, b, xs.data(), y.data(), gy.data(), gx.data());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    INFO("x = ", xs[i]);
    const T want = nitro::elementwise::map_value(op, a, b, xs[i]);
    const T slope = nitro::elementwise::map_derivative(op, a, b, xs[i], want);
    CHECK(double(y[i]) == doctest::Approx(double(want)).epsilon(tol).scale(1));
    CHECK(double(gx[i]) == doctest::Approx(0.25 + double(gy[i]) * double(slope)).epsilon(tol).scale(1));
  }
}
}  // namespace

TEST_CASE("element-wise: the CPU's vectorised kernels compute each element as the one-element definitions the CUDA kernels run") {
  using nitro::map_op;
  std::vector<double> xs;
  for (int i = -40; i <= 40; ++i) xs.push_back(i * 0.173 + 0.011);  // no exact 0 (relu's and abs's kinks)
  std::vector<double> pos;
  for (double x : xs) pos.push_back(std::fabs(x) + 0.05);
  std::vector<float> xf(xs.begin(), xs.end()), posf(pos.begin(), pos.end());
  for (auto op : {map_op::exp, map_op::square, map_op::abs, map_op::relu, map_op::sigmoid, map_op::tanh, map_op::softplus, map_op::gelu}) {
    maps_agree<double>(op, 0, 0, xs, 1e-13);
    maps_agree<float>(op, 0, 0, xf, 2e-6);
  }
  for (auto op : {map_op::log, map_op::sqrt}) {
    maps_agree<double>(op, 0, 0, pos, 1e-13);
    maps_agree<float>(op, 0, 0, posf, 2e-6);
  }
  maps_agree<double>(map_op::affine, -1.5, 0.25, xs, 1e-14);
  maps_agree<double>(map_op::rdiv, 2.0, 0, pos, 1e-13);
  maps_agree<double>(map_op::pow, 1.7, 0, pos, 1e-13);
  maps_agree<double>(map_op::clamp, -0.5, 0.75, xs, 1e-14);
  maps_agree<float>(map_op::pow, 3.f, 0, posf, 2e-6);

  // every binary op, flat and broadcast ([3] against [3, 4]; [1, 4] against [3, 4])
  auto& cpu = nitro::cpu::ops::instance();
  nitro::rng g(5);
  for (auto op : {nitro::binop::add, nitro::binop::sub, nitro::binop::mul, nitro::binop::div, nitro::binop::max, nitro::binop::min,
                  nitro::binop::eq, nitro::binop::ne, nitro::binop::lt, nitro::binop::gt}) {
    INFO(nitro::to_string(op));
    for (shape sb : {shape{3, 4}, shape{3}, shape{1, 4}}) {
      const shape sa{3, 4};
      std::vector<double> a(12), b(static_cast<std::size_t>(sb.numel())), gy(12), ga(12, 0.0), gb(b.size(), 0.0), y(12);
      for (auto& v : a) v = std::round(g.uniform(-3, 3));  // integers: ties for max, min and ==
      for (auto& v : b) v = std::round(g.uniform(-3, 3)) + (op == nitro::binop::div ? 0.5 : 0.0);
      for (auto& v : gy) v = g.uniform(-1, 1);
      const nitro::broadcast_plan p = nitro::plan_broadcast(sa, sb, "test");
      CHECK(p.same == (sb == sa));
      cpu.binary(op, p, a.data(), b.data(), y.data());
      cpu.binary_backward(op, p, a.data(), b.data(), gy.data(), ga.data(), gb.data());
      std::vector<double> want_gb(b.size(), 0.0);
      for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 3; ++i) {
          const std::size_t o = std::size_t(i + 3 * j);
          const std::size_t ib = sb == sa ? o : sb.rank() == 1 ? std::size_t(i) : std::size_t(j);
          CHECK(y[o] == nitro::elementwise::binary_value(op, a[o], b[ib]));
          CHECK(ga[o] == doctest::Approx(gy[o] * nitro::elementwise::binary_da(op, a[o], b[ib])).epsilon(1e-14));
          want_gb[ib] += gy[o] * nitro::elementwise::binary_db(op, a[o], b[ib]);
        }
      for (std::size_t i = 0; i < b.size(); ++i) CHECK(gb[i] == doctest::Approx(want_gb[i]).epsilon(1e-13).scale(1));
    }
  }
}
