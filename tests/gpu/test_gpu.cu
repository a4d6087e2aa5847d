// The CUDA backend on a GPU, against the CPU (Eigen) backend: the fused MLP kernels (FP32, TF32),
// the cuBLASLt path, the fused loss with its smoothing read from the device scalars, the fused
// optimizer updates, SAM, clipping, transfers, cuDNN's layers, NCCL, whole training steps, the
// step arena in device memory, the element-wise, reduction, softmax, loss and copy kernels, and the
// kernels table on the GPU (cuda::ops): its products, epilogues, attention and metrics' counts, and
// a tape's whole graph recorded through it.
// Each comparison prints its max relative error. Without a device the program prints a SKIPPED line
// and exits 77, which CTest reports as skipped (SKIP_RETURN_CODE); a case this build cannot run (no
// cuDNN, no NCCL) is a doctest::skip() case, counted as skipped in the summary, never as passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <nitro/cuda.cuh>

#include <nitro/core/rng.hpp>
#include <nitro/nn/layers/activation.hpp>
#include <nitro/nn/layers/chain.hpp>
#include <nitro/nn/layers/conv2d.hpp>
#include <nitro/nn/layers/dense.hpp>
#include <nitro/nn/layers/norm.hpp>
#include <nitro/nn/layers/pool.hpp>
#include <nitro/nn/classification.hpp>
#include <nitro/nn/losses.hpp>
#include <nitro/nn/metrics.hpp>
#include <nitro/optim/param_store.hpp>
#include <nitro/optim/rules/adam.hpp>
#include <nitro/optim/rules/decayed_weights.hpp>
#include <nitro/optim/rules/lion.hpp>
#include <nitro/optim/rules/sgd.hpp>
#include <nitro/optim/sam.hpp>
#include <nitro/tensor/cuda/optimizer_math.hpp>
#include <nitro/tensor/ops.hpp>

#include <algorithm>
#include <array>
#include <type_traits>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace cu = nitro::cuda;
using nitro::shape;
using nitro::Tensor;

namespace {

template <class T = float>
std::vector<T> random_vector(std::size_t n, nitro::rng& g, double lo = -1, double hi = 1) {
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(g.uniform(lo, hi));
  return v;
}

// max |a - b| / max(|b|, 1% of max |b|)
template <class T>
double max_rel_error(T const* a, T const* b, std::size_t n) {
  double scale = 0;
  for (std::size_t i = 0; i < n; ++i) scale = std::max(scale, double(std::fabs(b[i])));
  const double floor = std::max(1e-6, 1e-2 * scale);
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])) / std::max(double(std::fabs(b[i])), floor));
  return worst;
}
double norm_rel_error(float const* a, float const* b, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}
template <class T>
double max_rel_error(std::vector<T> const& a, std::vector<T> const& b) { return max_rel_error(a.data(), b.data(), std::min(a.size(), b.size())); }

template <class T>
struct dvec {
  cu::device_buffer<T> buf;
  std::size_t n = 0;
  dvec() = default;
  explicit dvec(std::vector<T> const& h) : buf(h.size() ? h.size() : 1), n(h.size()) {
    NITRO_CUDA_CHECK(cudaMemcpy(buf.data(), h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  explicit dvec(std::size_t count) : buf(count ? count : 1), n(count) { NITRO_CUDA_CHECK(cudaMemset(buf.data(), 0, n * sizeof(T))); }
  T* data() { return buf.data(); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    NITRO_CUDA_CHECK(cudaDeviceSynchronize());
    NITRO_CUDA_CHECK(cudaMemcpy(h.data(), buf.data(), n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

void report(char const* what, double err, double limit) {
  std::printf("  %-64s max relative error %.3e (limit %.0e)\n", what, err, limit);
  CHECK(err < limit);
}

// ---- a dense model on the CPU backend: outputs, parameter gradients, input gradient -------------
template <class Model>
struct cpu_run {
  std::vector<float> y, grads, dx;
};

template <class Model, class Store>
cpu_run<Model> run_cpu(Model const& model, Store& store, std::vector<float>& x, std::vector<float>& dy, std::int64_t in, std::int64_t out,
                       std::int64_t B) {
  cpu_run<Model> r;
  r.dx.assign(static_cast<std::size_t>(in * B), 0.0f);
  nitro::arena mem;
  nitro::tape tp(mem);
  nitro::step_context ctx{&mem, &tp, true, 1, 0};
  nitro::context_scope scope(ctx);
  store.zero_grads();
  auto ps = store.view(tp);
  nitro::nn::layer_state<Model> st;
  Tensor xt(x.data(), shape{in, B}, tp.leaf(r.dx.data(), r.dx.size() * sizeof(float)));
  Tensor y = model(xt, ps, st).first;
  Tensor loss = nitro::sum(y * Tensor(dy.data(), shape{out, B}));
  tp.backward<float>(loss.var(), 1.0f);
  r.y.assign(y.data(), y.data() + y.numel());
  r.grads.assign(store.grads(), store.grads() + Store::size);
  return r;
}

// The same model through a dense_program path; compares with the CPU run.
template <cu::dense_path Path, class Model>
void compare_program(char const* name, Model const& model, std::int64_t B, double limit, bool norm_metric,
                     cu::weight_grads wg = cu::weight_grads::atomics) {
  using Store = nitro::param_store<typename Model::param_spec>;
  using Program = cu::dense_program<Model, Store, Path>;
  constexpr std::int64_t In = Program::in, Out = Program::out;
  nitro::rng g(17);
  Store store(true);
  {
    auto ps = store.view();
    nitro::nn::layer_state<Model> st;
    model.init(ps, st, g);
  }
  auto x = random_vector(static_cast<std::size_t>(In * B), g);
  auto dy = random_vector(static_cast<std::size_t>(Out * B), g);
  const auto ref = run_cpu(model, store, x, dy, In, Out, B);

  nitro::cuda_backend be;
  Program prog(be);
  prog.upload(store.values());
  prog.set_weight_grads(wg);
  dvec<float> xd(x), dyd(dy), dxd(static_cast<std::size_t>(In * B));
  prog.zero_grads();
  float const* yd = prog.forward(xd.data(), B, true);
  prog.backward(dyd.data(), dxd.data());
  std::vector<float> y(static_cast<std::size_t>(Out * B)), grads(static_cast<std::size_t>(Store::size));
  NITRO_CUDA_CHECK(cudaStreamSynchronize(be.compute()));
  NITRO_CUDA_CHECK(cudaDeviceSynchronize());  // the backend's streams are non-blocking: a plain copy would not wait
  NITRO_CUDA_CHECK(cudaMemcpy(y.data(), yd, y.size() * sizeof(float), cudaMemcpyDeviceToHost));
  prog.download_grads(grads.data());
  const auto dx = dxd.get();
  auto err = [&](std::vector<float> const& a, std::vector<float> const& b) {
    return norm_metric ? norm_rel_error(a.data(), b.data(), b.size()) : max_rel_error(a, b);
  };
  std::printf("%s (%s%s, batch %lld)%s\n", name, cu::to_string(Path),
              Program::fused && prog.weight_grads_mode() == cu::weight_grads::gemm ? ", weight gradients by cuBLASLt" : "", (long long)B,
              norm_metric ? " [error of the whole array]" : "");
  report("  outputs", max_rel_error(y, ref.y), norm_metric ? 5e-2 : limit);
  report("  parameter gradients", err(grads, ref.grads), limit);
  report("  input gradient", err(dx, ref.dx), limit);
  // evaluation mode gives the same outputs
  float const* ye = prog.forward(xd.data(), B, false);
  std::vector<float> y2(y.size());
  NITRO_CUDA_CHECK(cudaStreamSynchronize(be.compute()));
  NITRO_CUDA_CHECK(cudaDeviceSynchronize());  // the backend's streams are non-blocking: a plain copy would not wait
  NITRO_CUDA_CHECK(cudaMemcpy(y2.data(), ye, y2.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(max_rel_error(y2, y) < 1e-6);
}

auto fashion_model() {
  using namespace nitro::nn;
  return chain(dense<784, 128>(relu), dense<128, 128>(relu), dense<128, 10>());
}
auto smooth_model() {
  using namespace nitro::nn;
  return chain(dense<40, 32>(gelu), dense<32, 32>(gelu), dense<32, 32>(gelu), dense<32, 5>(nitro::nn::tanh));
}

// Host vectors copied to the device for one case, and read back; each freed with the case.
struct device_vectors {
  cu::stream_memory& mem;
  std::vector<void*> owned;
  explicit device_vectors(cu::stream_memory& m) : mem(m) {}
  device_vectors(device_vectors const&) = delete;
  device_vectors& operator=(device_vectors const&) = delete;
  ~device_vectors() {
    for (void* p : owned) mem.deallocate(p, 0);
  }
  template <class T>
  T* operator()(std::vector<T> const& h) {
    auto* p = static_cast<T*>(mem.allocate(std::max<std::size_t>(h.size(), 1) * sizeof(T), 256));
    owned.push_back(p);
    mem.copy_from_host(p, h.data(), h.size() * sizeof(T));
    return p;
  }
  template <class T>
  std::vector<T> host(T const* p, std::size_t n) const {
    std::vector<T> h(n);
    mem.copy_to_host(h.data(), p, n * sizeof(T));
    return h;
  }
};

// What a kernel case compares: the CUDA backend's kernels against the CPU's, on vectors copied over.
struct kernel_case {
  nitro::cuda_backend be;
  cu::stream_memory& mem = be.memory();
  nitro::cpu::ops& cpu = nitro::cpu::ops::instance();
  device_vectors dev{mem};
  template <class T>
  std::vector<T> host(T const* p, std::size_t n) const { return dev.host(p, n); }
};

}  // namespace

TEST_CASE("a step arena on the device: tensors, gradients and seeds live on the GPU, the tape's closures on the host") {
  nitro::cuda_backend be;
  cu::stream_memory& mem = be.memory();
  CHECK(mem.device() == nitro::device_kind::cuda);
  nitro::arena data(mem), closures;
  nitro::tape t(data, closures);
  nitro::step_context ctx{&data, &t, true, 7, 0, nullptr};
  std::vector<float> back(1000);
  {
    nitro::context_scope scope(ctx);
    Tensor full = Tensor::full(shape{10, 100}, 2.5f);
    CHECK(full.device() == nitro::device_kind::cuda);
    cudaPointerAttributes attr{};
    REQUIRE(cudaPointerGetAttributes(&attr, full.data()) == cudaSuccess);
    CHECK(attr.type == cudaMemoryTypeDevice);
    mem.copy_to_host(back.data(), full.data(), 1000 * sizeof(float));
    CHECK(std::count(back.begin(), back.end(), 2.5f) == 1000);
    Tensor from = Tensor::from({1.f, 2.f, 3.f}, shape{3});
    CHECK(from.to_vector() == std::vector<float>{1.f, 2.f, 3.f});  // read back through its memory
    Tensor kept = from.clone();
    CHECK(kept.device() == nitro::device_kind::cpu);
    CHECK(kept[2] == 3.f);
    // a fresh gradient is zero on the device; backward seeds the output's
    const int v = t.new_var(1000 * sizeof(float));
    float* g = t.grad<float>(v);
    mem.copy_to_host(back.data(), g, 1000 * sizeof(float));
    CHECK(std::count(back.begin(), back.end(), 0.f) == 1000);
    const int out = t.new_var(sizeof(float));
    t.record([out](nitro::tape& tp) { (void)tp.grad_if_any<float>(out); });  // a host closure, run by backward
    t.backward<float>(out, 1.5f);
    float seed = 0;
    mem.copy_to_host(&seed, t.grad_if_any<float>(out), sizeof seed);
    CHECK(seed == 1.5f);
    t.backward<float>(out, 1.f);  // seeded again: added to what is there
    mem.copy_to_host(&seed, t.grad_if_any<float>(out), sizeof seed);
    CHECK(seed == 2.5f);
  }
  CHECK(closures.bytes_in_use() > 0);  // the closure: host memory, which the host ran
  t.clear();
  data.reset();
  closures.reset();
  CHECK(data.bytes_in_use() == 0);
}

TEST_CASE_FIXTURE(kernel_case, "element-wise kernels: every map and binary op, forward and backward, flat and broadcast, equal the CPU's") {
  nitro::rng g(11);
  constexpr std::size_t n = 4099;  // not a multiple of a block
  std::vector<float> x = random_vector(n, g, -3, 3), pos = random_vector(n, g, 0.05, 3), gy = random_vector(n, g);
  for (auto op : {nitro::map_op::exp, nitro::map_op::log, nitro::map_op::sqrt, nitro::map_op::square, nitro::map_op::abs,
                  nitro::map_op::relu, nitro::map_op::sigmoid, nitro::map_op::tanh, nitro::map_op::softplus, nitro::map_op::gelu,
                  nitro::map_op::affine, nitro::map_op::rdiv, nitro::map_op::pow, nitro::map_op::clamp}) {
    const bool positive = op == nitro::map_op::log || op == nitro::map_op::sqrt || op == nitro::map_op::rdiv || op == nitro::map_op::pow;
    const float a = op == nitro::map_op::clamp ? -0.5f : 1.7f, b = op == nitro::map_op::clamp ? 0.75f : 0.25f;
    std::vector<float> const& in = positive ? pos : x;
    std::vector<float> y(n), gx(n, 0.5f);
    cpu.map(op, std::int64_t(n), a, b, in.data(), y.data());
    cpu.map_backward(op, std::int64_t(n), a, b, in.data(), y.data(), gy.data(), gx.data());
    float* dx = dev(in); float* dy = dev(std::vector<float>(n)); float* dg = dev(gy); float* dgx = dev(std::vector<float>(n, 0.5f));
    cu::map<float>(be.compute(), op, std::int64_t(n), a, b, dx, dy);
    cu::map_backward<float>(be.compute(), op, std::int64_t(n), a, b, dx, dy, dg, dgx);
    const auto y_gpu = host(dy, n), gx_gpu = host(dgx, n);
    const double ey = max_rel_error(y_gpu.data(), y.data(), n), eg = max_rel_error(gx_gpu.data(), gx.data(), n);
    std::printf("  map %-8s forward %.2e  backward %.2e (max relative error)\n", nitro::to_string(op), ey, eg);
    CHECK(ey < 1e-5);
    CHECK(eg < 1e-5);
  }
  for (auto op : {nitro::binop::add, nitro::binop::sub, nitro::binop::mul, nitro::binop::div, nitro::binop::max, nitro::binop::min,
                  nitro::binop::eq, nitro::binop::ne, nitro::binop::lt, nitro::binop::gt}) {
    for (shape sb : {shape{37, 5, 3}, shape{37}, shape{1, 5}, shape{37, 1, 3}}) {
      const shape sa{37, 5, 3};
      const std::size_t na = std::size_t(sa.numel()), nb = std::size_t(sb.numel());
      std::vector<float> a = random_vector(na, g, -2, 2), b = random_vector(nb, g, 0.5, 2), go = random_vector(na, g);
      for (std::size_t i = 0; i < nb; i += 7) b[i] = a[i];  // ties for max, min, ==
      const nitro::broadcast_plan p = nitro::plan_broadcast(sa, sb, "test");
      std::vector<float> y(na), ga(na, 0.25f), gb(nb, 0.25f);
      cpu.binary(op, p, a.data(), b.data(), y.data());
      cpu.binary_backward(op, p, a.data(), b.data(), go.data(), ga.data(), gb.data());
      float* da = dev(a); float* db = dev(b); float* dy = dev(std::vector<float>(na)); float* dgo = dev(go);
      float* dga = dev(std::vector<float>(na, 0.25f)); float* dgb = dev(std::vector<float>(nb, 0.25f));
      cu::binary<float>(be.compute(), op, p, da, db, dy);
      cu::binary_backward<float>(be.compute(), op, p, da, db, dgo, dga, dgb);
      const double ey = max_rel_error(host(dy, na).data(), y.data(), na);
      const double ea = max_rel_error(host(dga, na).data(), ga.data(), na), eb = max_rel_error(host(dgb, nb).data(), gb.data(), nb);
      std::printf("  binary %-7s b %-10s forward %.2e  da %.2e  db %.2e\n", nitro::to_string(op), sb.to_string().c_str(), ey, ea, eb);
      CHECK(ey < 1e-6);
      CHECK(ea < 1e-5);
      CHECK(eb < 1e-5);
    }
  }
}

TEST_CASE_FIXTURE(kernel_case, "reduction kernels: sum, max, logsumexp, argmax along each dimension, and softmax, forward and backward, equal the CPU's") {
  nitro::rng g(12);
  // a short extent (a thread per output) and a long one (a block per output), each dimension
  for (shape s : {shape{7, 9, 5}, shape{300, 6, 4}, shape{3, 700, 2}, shape{5000}}) {
    const std::size_t n = std::size_t(s.numel());
    std::vector<float> x = random_vector(n, g, -4, 4);
    for (int d = 0; d < s.rank(); ++d)
      for (auto op : {nitro::reduce_op::sum, nitro::reduce_op::max, nitro::reduce_op::logsumexp, nitro::reduce_op::argmax}) {
        const nitro::reduction r = nitro::reduction_at(s, d);
        const std::size_t outs = std::size_t(r.inner * r.outer);
        std::vector<float> y(outs), gy = random_vector(outs, g), gx(n, 0.5f);
        cpu.reduce(op, r, x.data(), y.data());
        cpu.reduce_backward(op, r, x.data(), y.data(), gy.data(), gx.data());
        float* dx = dev(x); float* dy = dev(std::vector<float>(outs)); float* dgy = dev(gy); float* dgx = dev(std::vector<float>(n, 0.5f));
        cu::reduce<float>(be.compute(), op, r, dx, dy);
        cu::reduce_backward<float>(be.compute(), op, r, dx, dy, dgy, dgx);
        const double ey = max_rel_error(host(dy, outs).data(), y.data(), outs), eg = max_rel_error(host(dgx, n).data(), gx.data(), n);
        std::printf("  reduce %-9s %-12s dim %d  forward %.2e  backward %.2e\n", nitro::to_string(op), s.to_string().c_str(), d, ey, eg);
        CHECK(ey < 1e-5);
        CHECK(eg < 1e-5);
      }
  }
  for (bool log : {false, true})
    for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{10, 128}, {1000, 3}, {1, 5}}) {
      const std::size_t n = std::size_t(rows * cols);
      std::vector<float> x = random_vector(n, g, -5, 5), gy = random_vector(n, g), y(n), gx(n, 0.25f);
      cpu.softmax(log, rows, cols, x.data(), y.data());
      cpu.softmax_backward(log, rows, cols, y.data(), gy.data(), gx.data());
      float* dx = dev(x); float* dy = dev(std::vector<float>(n)); float* dgy = dev(gy); float* dgx = dev(std::vector<float>(n, 0.25f));
      cu::softmax<float>(be.compute(), log, rows, cols, dx, dy);
      cu::softmax_backward<float>(be.compute(), log, rows, cols, dy, dgy, dgx);
      const double ey = max_rel_error(host(dy, n).data(), y.data(), n), eg = max_rel_error(host(dgx, n).data(), gx.data(), n);
      std::printf("  %-11s %4lld x %-4lld forward %.2e  backward %.2e\n", log ? "log_softmax" : "softmax", (long long)rows, (long long)cols, ey, eg);
      CHECK(ey < 1e-5);
      CHECK(eg < 1e-5);
    }
}

TEST_CASE_FIXTURE(kernel_case, "copy kernels: strided blocks and transposes, written and accumulated, equal the CPU's") {
  nitro::rng g(13);
  for (bool accumulate : {false, true}) {
    // rows 37 of a source with 50 per column into a destination with 70 per column, 9 columns
    std::vector<float> src = random_vector(50 * 9, g), dst = random_vector(70 * 9, g);
    std::vector<float> want = dst;
    cpu.copy(37, 9, src.data(), 50, want.data(), 70, accumulate);
    float* ds = dev(src); float* dd = dev(dst);
    cu::copy<float>(be.compute(), 37, 9, ds, 50, dd, 70, accumulate);
    const auto got = host(dd, dst.size());
    CHECK(got == want);  // the untouched rows too
    for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{37, 70}, {1, 5}, {64, 64}, {100, 3}}) {
      std::vector<float> a = random_vector(std::size_t(m * n), g), t = random_vector(std::size_t(m * n), g), tw = t;
      cpu.transpose(m, n, a.data(), tw.data(), accumulate);
      float* da = dev(a); float* dt = dev(t);
      cu::transpose<float>(be.compute(), m, n, da, dt, accumulate);
      const double e = max_rel_error(host(dt, t.size()).data(), tw.data(), t.size());
      std::printf("  transpose %lld x %lld%s: %.2e\n", (long long)m, (long long)n, accumulate ? " (accumulated)" : "", e);
      CHECK(e < 1e-6);
    }
  }
}

TEST_CASE_FIXTURE(kernel_case, "loss kernels: cross-entropy (class indices and soft targets, smoothed), squared error, binary cross-entropy, each way, equal the CPU's") {
  nitro::rng g(13);
  const std::vector<float> gloss{1.75f};
  float* dgl = dev(gloss);
  // columns: fewer than a block's threads, and many more (each thread then sums several)
  for (auto [C, B] : {std::pair<std::int64_t, std::int64_t>{10, 128}, {10, 1000}, {96, 2048}, {3, 1}})
    for (bool indices : {true, false})
      for (float s : {0.0f, 0.1f}) {
        const std::size_t n = std::size_t(C * B);
        std::vector<float> x = random_vector(n, g, -6, 6), t(indices ? std::size_t(B) : n);
        for (std::size_t i = 0; i < t.size(); ++i) t[i] = indices ? float(g.uniform(0, 1) * double(C) * 0.999) : float(g.uniform(0, 1));
        if (indices)
          for (auto& v : t) v = std::floor(v);
        std::vector<float> p(n), loss(1), gx(n, 0.5f);
        cpu.cross_entropy(C, B, x.data(), t.data(), indices, s, p.data(), loss.data());
        cpu.cross_entropy_backward(C, B, p.data(), t.data(), indices, s, gloss.data(), gx.data());
        float* dx = dev(x); float* dt = dev(t); float* dp = dev(std::vector<float>(n)); float* dl = dev(std::vector<float>(1));
        float* dgx = dev(std::vector<float>(n, 0.5f));
        cu::cross_entropy<float>(be.compute(), C, B, dx, dt, indices, s, dp, dl);
        cu::cross_entropy_backward<float>(be.compute(), C, B, dp, dt, indices, s, dgl, dgx);
        const double el = max_rel_error(host(dl, 1).data(), loss.data(), 1), ep = max_rel_error(host(dp, n).data(), p.data(), n),
                     eg = max_rel_error(host(dgx, n).data(), gx.data(), n);
        std::printf("  cross_entropy %3lld x %-5lld %-7s s=%.1f  loss %.2e  softmax %.2e  backward %.2e\n", (long long)C, (long long)B,
                    indices ? "indices" : "soft", double(s), el, ep, eg);
        CHECK(el < 1e-5);
        CHECK(ep < 1e-5);
        CHECK(eg < 1e-5);
      }
  for (std::int64_t n : {std::int64_t(1), std::int64_t(255), std::int64_t(100000)})
    for (bool bce : {false, true}) {
      const std::size_t m = std::size_t(n);
      std::vector<float> a = random_vector(m, g, -5, 5), b = random_vector(m, g, 0, 1), loss(1), ga(m, 0.5f), gb(m, -0.5f);
      if (bce) {
        cpu.binary_cross_entropy(n, a.data(), b.data(), loss.data());
        cpu.binary_cross_entropy_backward(n, a.data(), b.data(), gloss.data(), ga.data(), gb.data());
      } else {
        cpu.squared_error(n, a.data(), b.data(), loss.data());
        cpu.squared_error_backward(n, a.data(), b.data(), gloss.data(), ga.data(), gb.data());
      }
      float* da = dev(a); float* db = dev(b); float* dl = dev(std::vector<float>(1));
      float* dga = dev(std::vector<float>(m, 0.5f)); float* dgb = dev(std::vector<float>(m, -0.5f));
      if (bce) {
        cu::binary_cross_entropy<float>(be.compute(), n, da, db, dl);
        cu::binary_cross_entropy_backward<float>(be.compute(), n, da, db, dgl, dga, dgb);
      } else {
        cu::squared_error<float>(be.compute(), n, da, db, dl);
        cu::squared_error_backward<float>(be.compute(), n, da, db, dgl, dga, dgb);
      }
      const double el = max_rel_error(host(dl, 1).data(), loss.data(), 1), ea = max_rel_error(host(dga, m).data(), ga.data(), m),
                   eb = max_rel_error(host(dgb, m).data(), gb.data(), m);
      std::printf("  %-20s n=%-7lld loss %.2e  backward %.2e / %.2e\n", bce ? "binary_cross_entropy" : "squared_error", (long long)n, el, ea, eb);
      CHECK(el < 1e-5);
      CHECK(ea < 1e-5);
      CHECK(eb < 1e-5);
    }
  // a class index outside [0, C): the loss is NaN and the flag says why (metric_sums::check: E-LOSS-003)
  {
    std::vector<float> x = random_vector(20, g), t{1, 7};
    auto* flags = static_cast<unsigned*>(mem.allocate(sizeof(unsigned), 256));
    mem.zero(flags, sizeof(unsigned));
    float* dl = dev(std::vector<float>(1));
    cu::cross_entropy<float>(be.compute(), 10, 2, dev(x), dev(t), true, 0.0f, dev(std::vector<float>(20)), dl, flags);
    unsigned f = 0;
    mem.copy_to_host(&f, flags, sizeof(unsigned));
    CHECK(std::isnan(host(dl, 1)[0]));
    cu::metric_sums sums;
    sums.flags = f;
    std::string code;
    try {
      sums.check();
    } catch (nitro::error const& e) {
      code = e.code();
    }
    CHECK(code == "E-LOSS-003");
    mem.deallocate(flags, 0);
  }
}

namespace {
// float products run in FP32 on both sides: rounding apart, in a different order
template <class T> constexpr double table_limit = std::is_same_v<T, float> ? 1e-4 : 1e-11;

template <class T>
void check_products(kernel_case& k, nitro::rng& g) {
  nitro::device_ops& gpu = k.be.ops();
  char const* type = std::is_same_v<T, float> ? "float" : "double";
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (auto [m, n, kk] : {std::array<std::int64_t, 3>{37, 19, 53}, {128, 64, 256}, {10, 1, 784}, {5, 7, 0}})
        for (T beta : {T(0), T(1), T(0.5)}) {
          const std::int64_t lda = (ta ? kk : m) + 3, ldb = (tb ? n : kk) + 1, ldc = m + 2;
          const std::size_t na = std::size_t(lda * (ta ? m : kk)), nb = std::size_t(ldb * (tb ? kk : n)), nc = std::size_t(ldc * n);
          auto a = random_vector<T>(std::max<std::size_t>(na, 1), g), b = random_vector<T>(std::max<std::size_t>(nb, 1), g);
          auto c = random_vector<T>(nc, g), want = c;
          k.cpu.gemm(ta, tb, m, n, kk, T(1.5), a.data(), lda, b.data(), ldb, beta, want.data(), ldc);
          T* dc = k.dev(c);
          gpu.gemm(ta, tb, m, n, kk, T(1.5), k.dev(a), lda, k.dev(b), ldb, beta, dc, ldc);
          const auto got = k.host(dc, nc);
          const double e = max_rel_error(got.data(), want.data(), nc);
          if (e >= table_limit<T>)
            std::printf("  gemm %s %c%c %lld x %lld x %lld beta %.1f: %.2e\n", type, ta ? 'T' : 'N', tb ? 'T' : 'N', (long long)m, (long long)n,
                        (long long)kk, double(beta), e);
          CHECK(e < table_limit<T>);
        }
  double worst = 0, worst_back = 0;
  using nitro::epilogue_act;
  for (epilogue_act act : {epilogue_act::identity, epilogue_act::relu, epilogue_act::tanh, epilogue_act::sigmoid, epilogue_act::gelu})
    for (bool bias : {false, true})
      for (bool keep_z : {false, true}) {
        const std::int64_t m = 70, n = 33, kk = 45;
        auto a = random_vector<T>(std::size_t(m * kk), g), b = random_vector<T>(std::size_t(kk * n), g), bv = random_vector<T>(std::size_t(m), g);
        std::vector<T> z(std::size_t(m * n), T(7)), c(std::size_t(m * n), T(9)), wz = z, wc = c;
        k.cpu.gemm_epilogue(false, false, m, n, kk, a.data(), m, b.data(), kk, bias ? bv.data() : nullptr, act, keep_z ? wz.data() : nullptr,
                            wc.data(), m);
        T* dz = k.dev(z); T* dc = k.dev(c);
        gpu.gemm_epilogue(false, false, m, n, kk, k.dev(a), m, k.dev(b), kk, bias ? k.dev(bv) : nullptr, act, keep_z ? dz : nullptr, dc, m);
        worst = std::max(worst, max_rel_error(k.host(dc, c.size()), wc));
        CHECK(max_rel_error(k.host(dc, c.size()), wc) < table_limit<T>);
        if (keep_z) CHECK(max_rel_error(k.host(dz, z.size()), wz) < table_limit<T>);
        // the backward, from the output (or the pre-activation gelu reads), into a fresh buffer and in place
        auto gy = random_vector<T>(c.size(), g);
        std::vector<T> yz = nitro::needs_preactivation(act) ? (keep_z ? wz : wc) : wc, gw(c.size()), dbw(std::size_t(m), T(0.25));
        if (nitro::needs_preactivation(act) && !keep_z) continue;  // gelu's backward needs the kept z
        k.cpu.epilogue_backward(act, m, n, gy.data(), yz.data(), gw.data(), bias ? dbw.data() : nullptr);
        T* dg = k.dev(std::vector<T>(c.size())); T* ddb = k.dev(std::vector<T>(std::size_t(m), T(0.25)));
        gpu.epilogue_backward(act, m, n, k.dev(gy), k.dev(yz), dg, bias ? ddb : nullptr);
        worst_back = std::max({worst_back, max_rel_error(k.host(dg, gw.size()), gw), max_rel_error(k.host(ddb, dbw.size()), dbw)});
        CHECK(max_rel_error(k.host(dg, gw.size()), gw) < table_limit<T>);
        CHECK(max_rel_error(k.host(ddb, dbw.size()), dbw) < table_limit<T>);
        T* dgy = k.dev(gy);  // in place: g is gy
        gpu.epilogue_backward(act, m, n, dgy, k.dev(yz), dgy, nullptr);
        CHECK(max_rel_error(k.host(dgy, gw.size()), gw) < table_limit<T>);
      }
  std::printf("  gemm_epilogue (%s, every activation, bias, kept z): %.2e; epilogue_backward: %.2e\n", type, worst, worst_back);
}

template <class T>
void check_attention(kernel_case& k, nitro::rng& g) {
  nitro::device_ops& gpu = k.be.ops();
  for (auto [heads, d, seq, batch] : {std::array<std::int64_t, 4>{2, 16, 37, 3}, {4, 64, 130, 2}, {1, 200, 9, 2}, {3, 5, 1, 4}}) {
    const std::int64_t w = heads * d;
    const std::size_t nq = std::size_t(3 * w * seq * batch), no = std::size_t(w * seq * batch), nl = std::size_t(heads * seq * batch);
    auto qkv = random_vector<T>(nq, g, -2, 2), gout = random_vector<T>(no, g);
    std::vector<T> out(no), lse(nl), gq(nq, T(0.5));
    k.cpu.causal_attention(heads, d, seq, batch, qkv.data(), out.data(), lse.data());
    k.cpu.causal_attention_backward(heads, d, seq, batch, qkv.data(), out.data(), lse.data(), gout.data(), gq.data());
    T* dq = k.dev(qkv); T* dout = k.dev(std::vector<T>(no)); T* dl = k.dev(std::vector<T>(nl)); T* dg = k.dev(std::vector<T>(nq, T(0.5)));
    gpu.causal_attention(heads, d, seq, batch, dq, dout, dl);
    gpu.causal_attention_backward(heads, d, seq, batch, dq, dout, dl, k.dev(gout), dg);
    const double eo = max_rel_error(k.host(dout, no), out), el = max_rel_error(k.host(dl, nl), lse), eg = max_rel_error(k.host(dg, nq), gq);
    std::printf("  causal_attention %s heads %lld x %lld, seq %lld, batch %lld: out %.2e  lse %.2e  backward %.2e\n",
                std::is_same_v<T, float> ? "float " : "double", (long long)heads, (long long)d, (long long)seq, (long long)batch, eo, el, eg);
    CHECK(eo < table_limit<T>);
    CHECK(el < table_limit<T>);
    CHECK(eg < table_limit<T>);
  }
}
template <class T>
void check_layer_kernels(kernel_case& k, nitro::rng& g) {
  nitro::device_ops& gpu = k.be.ops();
  char const* type = std::is_same_v<T, float> ? "float " : "double";
  for (auto [F, cols] : {std::array<std::int64_t, 2>{6, 5}, {64, 1000}, {200, 33}, {1000, 3}}) {
    const std::size_t n = std::size_t(F * cols);
    auto x = random_vector<T>(n, g, -2, 2), w = random_vector<T>(std::size_t(F), g), b = random_vector<T>(std::size_t(F), g);
    auto gy = random_vector<T>(n, g);
    std::vector<T> y(n), st(std::size_t(2 * cols)), gx(n, T(0.5)), gw(std::size_t(F), T(0.5)), gb(std::size_t(F), T(0.5));
    k.cpu.layer_norm(F, cols, 1e-5, x.data(), w.data(), b.data(), y.data(), st.data());
    k.cpu.layer_norm_backward(F, cols, x.data(), w.data(), st.data(), gy.data(), gx.data(), gw.data(), gb.data());
    T* dx = k.dev(x); T* dw = k.dev(w); T* dy = k.dev(y); T* dst = k.dev(st);
    T* dgx = k.dev(std::vector<T>(n, T(0.5))); T* dgw = k.dev(std::vector<T>(std::size_t(F), T(0.5))); T* dgb = k.dev(std::vector<T>(std::size_t(F), T(0.5)));
    gpu.layer_norm(F, cols, 1e-5, dx, dw, k.dev(b), dy, dst);
    gpu.layer_norm_backward(F, cols, dx, dw, dst, k.dev(gy), dgx, dgw, dgb);
    const double ey = max_rel_error(k.host(dy, n), y), es = max_rel_error(k.host(dst, st.size()), st);
    const double eb = std::max({max_rel_error(k.host(dgx, n), gx), max_rel_error(k.host(dgw, gw.size()), gw), max_rel_error(k.host(dgb, gb.size()), gb)});
    std::printf("  layer_norm %s %4lld x %-4lld: y %.2e  stats %.2e  backward %.2e\n", type, (long long)F, (long long)cols, ey, es, eb);
    CHECK(ey < table_limit<T>);
    CHECK(es < table_limit<T>);
    CHECK(eb < table_limit<T>);
  }
  for (auto [inner, C, B] : {std::array<std::int64_t, 3>{1, 16, 64}, {49, 8, 5}, {196, 3, 2}, {1, 300, 7}})
    for (bool training : {true, false}) {
      const std::size_t n = std::size_t(inner * C * B), c = std::size_t(C);
      auto x = random_vector<T>(n, g, -2, 3), w = random_vector<T>(c, g), b = random_vector<T>(c, g), rm = random_vector<T>(c, g);
      auto rv = random_vector<T>(c, g, 0.5, 2), gy = random_vector<T>(n, g);
      std::vector<T> y(n), st(2 * c), nm(c, T(-9)), nv(c, T(-9)), gx(n, T(0.5)), gw(c, T(0.5)), gb(c, T(0.5));
      k.cpu.batch_norm(training, inner, C, B, 1e-5, 0.1, x.data(), w.data(), b.data(), rm.data(), rv.data(), st.data(), nm.data(), nv.data(),
                       y.data());
      k.cpu.batch_norm_backward(training, inner, C, B, x.data(), w.data(), st.data(), gy.data(), gx.data(), gw.data(), gb.data());
      T* dx = k.dev(x); T* dw = k.dev(w); T* dy = k.dev(y); T* dst = k.dev(st); T* dnm = k.dev(std::vector<T>(c, T(-9)));
      T* dnv = k.dev(std::vector<T>(c, T(-9)));
      T* dgx = k.dev(std::vector<T>(n, T(0.5))); T* dgw = k.dev(std::vector<T>(c, T(0.5))); T* dgb = k.dev(std::vector<T>(c, T(0.5)));
      gpu.batch_norm(training, inner, C, B, 1e-5, 0.1, dx, dw, k.dev(b), k.dev(rm), k.dev(rv), dst, dnm, dnv, dy);
      gpu.batch_norm_backward(training, inner, C, B, dx, dw, dst, k.dev(gy), dgx, dgw, dgb);
      const double ey = max_rel_error(k.host(dy, n), y), es = max_rel_error(k.host(dst, st.size()), st);
      const double er = std::max(max_rel_error(k.host(dnm, c), nm), max_rel_error(k.host(dnv, c), nv));  // evaluation: both untouched (-9)
      const double eb = std::max({max_rel_error(k.host(dgx, n), gx), max_rel_error(k.host(dgw, c), gw), max_rel_error(k.host(dgb, c), gb)});
      std::printf("  batch_norm %s %-8s %3lld x %3lld x %-3lld: y %.2e  stats %.2e  running %.2e  backward %.2e\n", type,
                  training ? "training" : "eval", (long long)inner, (long long)C, (long long)B, ey, es, er, eb);
      CHECK(ey < table_limit<T>);
      CHECK(es < table_limit<T>);
      CHECK(er < table_limit<T>);
      CHECK(eb < table_limit<T>);
    }
  // dropout: the very mask of the CPU, so the same bits
  for (std::int64_t n : {1, 1001, 100000}) {
    const std::uint64_t seed = nitro::fold(99, std::uint64_t(n)), below = nitro::dropout_mask::threshold(0.3);
    auto x = random_vector<T>(std::size_t(n), g), gy = random_vector<T>(std::size_t(n), g);
    std::vector<T> y(static_cast<std::size_t>(n)), gx(static_cast<std::size_t>(n), T(0.5));
    k.cpu.dropout(seed, below, n, T(1 / 0.7), x.data(), y.data());
    k.cpu.dropout_backward(seed, below, n, T(1 / 0.7), gy.data(), gx.data());
    T* dy = k.dev(y); T* dgx = k.dev(std::vector<T>(std::size_t(n), T(0.5)));
    gpu.dropout(seed, below, n, T(1 / 0.7), k.dev(x), dy);
    gpu.dropout_backward(seed, below, n, T(1 / 0.7), k.dev(gy), dgx);
    CHECK(k.host(dy, y.size()) == y);
    CHECK(k.host(dgx, gx.size()) == gx);
  }
  // the embedding: whole columns, and the gradient summed position after position as the CPU does
  for (std::int64_t dim : {3, 64, 300}) {
    const std::int64_t vocab = 50, count = 257;
    std::vector<T> idx(static_cast<std::size_t>(count));
    for (auto& v : idx) v = T(g.below(std::uint64_t(vocab)));
    auto w = random_vector<T>(std::size_t(vocab * dim), g), gy = random_vector<T>(std::size_t(count * dim), g);
    std::vector<T> y(static_cast<std::size_t>(count * dim)), gw(w.size(), T(0.5));
    CHECK(k.cpu.embedding(vocab, dim, count, idx.data(), w.data(), y.data()) == -1);
    k.cpu.embedding_backward(vocab, dim, count, idx.data(), gy.data(), gw.data());
    T* di = k.dev(idx); T* dy = k.dev(y); T* dgw = k.dev(std::vector<T>(w.size(), T(0.5)));
    CHECK(gpu.embedding(vocab, dim, count, di, k.dev(w), dy) == -1);
    gpu.embedding_backward(vocab, dim, count, di, k.dev(gy), dgw);
    CHECK(k.host(dy, y.size()) == y);
    CHECK(k.host(dgw, gw.size()) == gw);
    k.be.cuda_ops().check_flags();  // every index in the vocabulary: nothing raised
    idx[5] = T(vocab);                // one outside: a column of zeros, and E-LAYER-005 at the check
    T* dbad = k.dev(idx);
    (void)gpu.embedding(vocab, dim, count, dbad, k.dev(w), dy);
    const auto got = k.host(dy, y.size());
    CHECK(std::all_of(got.begin() + 5 * dim, got.begin() + 6 * dim, [](T v) { return v == T(0); }));
    CHECK(std::equal(got.begin(), got.begin() + 5 * dim, y.begin()));
    CHECK_THROWS_WITH_AS(k.be.cuda_ops().check_flags(), doctest::Contains("E-LAYER-005"), nitro::error);
    k.be.cuda_ops().check_flags();  // cleared by the check that raised
  }
  // pooling: the windows' arithmetic is shared, and each input's gradient gathered in the CPU's
  // order, so the same bits; values on a coarse grid, so windows tie and the first largest must win
  for (auto [kk, st, w, h] : {std::array<std::int64_t, 4>{2, 2, 28, 28}, {3, 2, 13, 9}, {2, 1, 7, 8}, {5, 3, 17, 11}, {3, 3, 9, 9}})
    for (nitro::pool_kind kind : {nitro::pool_kind::max, nitro::pool_kind::average}) {
      const nitro::pool_window p{kk, st, w, h, (w - kk) / st + 1, (h - kk) / st + 1, 6};
      const std::size_t nin = std::size_t(p.planes * p.in_plane()), nout = std::size_t(p.planes * p.out_plane());
      auto x = random_vector<T>(nin, g, -2, 2), gy = random_vector<T>(nout, g);
      for (auto& v : x) v = std::round(v * 2) / 2;
      std::vector<T> y(nout), gx(nin, T(0.5));
      std::vector<std::uint32_t> arg(nout, 77u);
      const bool is_max = kind == nitro::pool_kind::max;
      k.cpu.pool2d(kind, p, x.data(), y.data(), is_max ? arg.data() : nullptr);
      k.cpu.pool2d_backward(kind, p, gy.data(), is_max ? arg.data() : nullptr, gx.data());
      T* dy = k.dev(y); T* dgx = k.dev(std::vector<T>(nin, T(0.5)));
      std::uint32_t* darg = k.dev(std::vector<std::uint32_t>(nout, 77u));
      gpu.pool2d(kind, p, k.dev(x), dy, is_max ? darg : nullptr);
      gpu.pool2d_backward(kind, p, k.dev(gy), is_max ? darg : nullptr, dgx);
      CHECK(k.host(dy, nout) == y);
      CHECK(k.host(darg, nout) == arg);
      CHECK(k.host(dgx, nin) == gx);
    }
  std::printf("  dropout, embedding, pooling (%s): the CPU's bits\n", type);
  // convolution: padded, strided, a 1x1 kernel (no im2col); each activation, with and without a bias
  for (auto [kk, st, pad, w, h, ci, co, bs] : {std::array<std::int64_t, 8>{3, 1, 1, 12, 12, 3, 8, 4}, {1, 1, 0, 5, 5, 3, 4, 2},
                                               {5, 2, 2, 13, 11, 2, 6, 3}})
    for (nitro::epilogue_act act : {nitro::epilogue_act::identity, nitro::epilogue_act::relu, nitro::epilogue_act::gelu})
      for (bool with_bias : {true, false}) {
        const nitro::conv_window p{kk, st, pad, w, h, ci, (w + 2 * pad - kk) / st + 1, (h + 2 * pad - kk) / st + 1, co, bs};
        const std::size_t nx = std::size_t(p.batch * p.in_plane() * ci), ny = std::size_t(p.batch * p.out_plane() * co);
        const std::size_t nw = std::size_t(p.rows() * co);
        auto x = random_vector<T>(nx, g), wt = random_vector<T>(nw, g), b = random_vector<T>(std::size_t(co), g), gy = random_vector<T>(ny, g);
        const bool keep_z = nitro::needs_preactivation(act);
        std::vector<T> y(ny), z(ny), gx(nx, T(0.5)), gw(nw, T(0.5)), gb(std::size_t(co), T(0.5));
        std::vector<T> scratch(std::size_t(std::max(k.cpu.conv2d_scratch(p, true), k.cpu.conv2d_scratch(p, false)) + 1));
        k.cpu.conv2d(p, x.data(), wt.data(), with_bias ? b.data() : nullptr, act, keep_z ? z.data() : nullptr, y.data(), scratch.data());
        k.cpu.conv2d_backward(p, act, x.data(), wt.data(), keep_z ? z.data() : y.data(), gy.data(), gx.data(), gw.data(),
                              with_bias ? gb.data() : nullptr, scratch.data());
        T* dx = k.dev(x); T* dw = k.dev(wt); T* dy = k.dev(y); T* dz = k.dev(z);
        T* ds = k.dev(std::vector<T>(std::size_t(std::max(gpu.conv2d_scratch(p, true), gpu.conv2d_scratch(p, false)) + 1)));
        T* dgx = k.dev(std::vector<T>(nx, T(0.5))); T* dgw = k.dev(std::vector<T>(nw, T(0.5))); T* dgb = k.dev(std::vector<T>(std::size_t(co), T(0.5)));
        gpu.conv2d(p, dx, dw, with_bias ? k.dev(b) : nullptr, act, keep_z ? dz : nullptr, dy, ds);
        gpu.conv2d_backward(p, act, dx, dw, keep_z ? dz : dy, k.dev(gy), dgx, dgw, with_bias ? dgb : nullptr, ds);
        const double ey = max_rel_error(k.host(dy, ny), y), ez = keep_z ? max_rel_error(k.host(dz, ny), z) : 0.0;
        const double eb = std::max({max_rel_error(k.host(dgx, nx), gx), max_rel_error(k.host(dgw, nw), gw),
                                    max_rel_error(k.host(dgb, gb.size()), gb)});
        std::printf("  conv2d %s k %lld s %lld pad %lld %s%s: y %.2e  z %.2e  backward %.2e\n", type, (long long)kk, (long long)st,
                    (long long)pad, nitro::to_string(act), with_bias ? " +bias" : "", ey, ez, eb);
        CHECK(ey < table_limit<T>);
        CHECK(ez < table_limit<T>);
        CHECK(eb < table_limit<T>);
      }
}
}  // namespace

TEST_CASE_FIXTURE(kernel_case, "the table's products on the GPU: gemm (each transpose, beta 0, 1, 0.5), gemm_epilogue and its backward, float and double, equal the CPU's") {
  nitro::rng g(21);
  check_products<float>(*this, g);
  check_products<double>(*this, g);
}

TEST_CASE_FIXTURE(kernel_case, "the table's causal attention on the GPU, forward (with lse) and backward, float and double, equals the CPU's") {
  nitro::rng g(22);
  check_attention<float>(*this, g);
  check_attention<double>(*this, g);
}

TEST_CASE_FIXTURE(kernel_case, "the table's layer norm, batch norm (training and evaluation), dropout, embedding lookup, pooling and convolution on the GPU, forward and backward, float and double, equal the CPU's") {
  nitro::rng g(25);
  check_layer_kernels<float>(*this, g);
  check_layer_kernels<double>(*this, g);
}

TEST_CASE_FIXTURE(kernel_case, "the metrics' counts on the GPU (accuracy and the confusion matrix; ties, soft targets, indices outside [0, C)) equal the CPU's") {
  nitro::rng g(24);
  nitro::device_ops& gpu = be.ops();
  for (auto [C, B] : {std::pair<std::int64_t, std::int64_t>{10, 1000}, {3, 37}, {96, 4099}})
    for (bool indices : {true, false}) {
      // logits on a coarse grid, so columns tie and the first largest must win on both sides
      std::vector<float> x = random_vector(std::size_t(C * B), g, -2, 2), t(indices ? std::size_t(B) : std::size_t(C * B));
      for (auto& v : x) v = std::round(v * 2) / 2;
      for (auto& v : t) v = indices ? std::floor(float(g.uniform(-0.05, 1.0)) * float(C + 1)) : std::round(float(g.uniform(0, 1)) * 4) / 4;
      std::vector<float> right{5}, cm(std::size_t(C * C), 1.0f);
      cpu.classification_counts(C, B, x.data(), t.data(), indices, right.data(), cm.data());
      float* dr = dev(std::vector<float>{5}); float* dcm = dev(std::vector<float>(std::size_t(C * C), 1.0f));
      gpu.classification_counts(C, B, dev(x), dev(t), indices, dr, dcm);
      gpu.classification_counts(C, B, dev(x), dev(t), indices, nullptr, nullptr);  // nothing asked: nothing written
      const float got = host(dr, 1)[0];
      std::printf("  classification_counts %3lld x %-5lld %-7s correct %.0f (CPU %.0f)\n", (long long)C, (long long)B, indices ? "indices" : "soft",
                  double(got), double(right[0]));
      CHECK(got == right[0]);
      CHECK(host(dcm, cm.size()) == cm);
    }
}

namespace {
struct SplitMetrics {
  BOOST_HANA_DEFINE_STRUCT(SplitMetrics, (nitro::mean_of, acc), (nitro::sum_of<Tensor>, confusion), (nitro::concat_of<Tensor>, logits));
};
// One split through the metrics accumulator as a handle's evaluation feeds it: each batch's logits
// and class indices placed in `mem` (null: the host), the loss, the count, the confusion matrix and
// the logits computed by `ops` and added with residency `where`.
nitro::metric_values accumulate_split(nitro::device_ops& ops, nitro::device_memory* mem, nitro::residency where, std::int64_t C,
                                      std::vector<std::vector<float>> const& logits, std::vector<std::vector<float>> const& labels) {
  nitro::metric_accumulator acc(where);
  auto data = mem ? std::make_unique<nitro::arena>(*mem) : std::make_unique<nitro::arena>();
  nitro::step_context ctx{data.get(), nullptr, false, 5, 0, &ops};
  for (std::size_t b = 0; b < logits.size(); ++b) {
    nitro::context_scope scope(ctx);
    auto place = [&](std::vector<float> const& h, shape s) {
      auto* p = static_cast<float*>(data->allocate(h.size() * sizeof(float), 256));
      if (mem) mem->copy_from_host(p, h.data(), h.size() * sizeof(float));
      else std::copy(h.begin(), h.end(), p);
      Tensor v(p, s);
      if (mem) v.set_memory(mem);
      return v;
    };
    const std::int64_t B = std::int64_t(labels[b].size());
    Tensor y = place(logits[b], shape{C, B}), label = place(labels[b], shape{B});
    acc.add_mean("loss", nitro::mean_of(nitro::nn::logitcrossentropy(y, label), 1.0));
    acc.add(SplitMetrics{{nitro::nn::correct(y, label), double(B)}, {nitro::nn::confusion_matrix(y, label)}, {y}});
  }
  return acc.result();
}
}  // namespace

TEST_CASE("metrics on the GPU: a split's loss, count, confusion matrix and logits add up on the device and cross once; host residency crosses per batch; both equal the CPU's") {
  nitro::cuda_backend be;
  nitro::rng g(31);
  const std::int64_t C = 10;
  std::vector<std::vector<float>> logits, labels;
  for (std::int64_t B : {128, 128, 128, 77}) {  // the last batch short, as a split's is
    logits.push_back(random_vector(std::size_t(C * B), g, -3, 3));
    std::vector<float> l(static_cast<std::size_t>(B));
    for (auto& v : l) v = std::floor(float(g.uniform(0, 1)) * float(C) * 0.999f);
    labels.push_back(l);
  }
  const auto want = accumulate_split(nitro::cpu::ops::instance(), nullptr, nitro::residency::device, C, logits, labels);
  const auto got = accumulate_split(be.ops(), &be.memory(), nitro::residency::device, C, logits, labels);
  const auto each = accumulate_split(be.ops(), &be.memory(), nitro::residency::host, C, logits, labels);
  be.cuda_ops().check_flags();
  std::printf("  device residency: %lld crossing(s), acc %.6f (CPU %.6f), loss %.7f (CPU %.7f); host residency: %lld crossings\n",
              (long long)got.host_crossings, got.at("acc"), want.at("acc"), got.at("loss"), want.at("loss"), (long long)each.host_crossings);
  CHECK(want.host_crossings == 0);  // host memory: nothing crosses
  CHECK(got.host_crossings == 1);   // the split's one read-back
  CHECK(each.host_crossings == 4 * 4);  // loss, count, matrix, logits: each batch's
  for (auto const* r : {&got, &each}) {
    CHECK(r->at("acc") == want.at("acc"));  // counts: exact in float
    CHECK(r->at("loss") == doctest::Approx(want.at("loss")).epsilon(1e-5));
    CHECK(r->tensor("confusion").to_vector() == want.tensor("confusion").to_vector());
    CHECK(r->tensor("logits").shape() == shape{C, 128 * 3 + 77});
    CHECK(r->tensor("logits").to_vector() == want.tensor("logits").to_vector());  // appended in order, bit for bit
  }
}

namespace {
// One small graph of the ops a model's hooks use — a product, a broadcast bias, tanh, causal
// attention, a transpose, softmax cross-entropy and a mean of squares — recorded on a tape whose
// arena lives in `mem` and whose kernels are `ops`; returns the loss and the leaves' gradients.
struct graph_result {
  float loss = 0;
  std::vector<float> gw1, gb1, gx, gw2;
};
graph_result run_graph(nitro::device_ops& ops, nitro::device_memory& mem, std::vector<float> const& w1, std::vector<float> const& b1,
                       std::vector<float> const& x, std::vector<float> const& w2, std::vector<float> const& target) {
  nitro::arena data(mem), closures;
  nitro::tape t(data, closures);
  nitro::step_context ctx{&data, &t, true, 3, 0, &ops};
  nitro::context_scope scope(ctx);
  // leaves: values and gradients in `mem`
  auto place = [&](std::vector<float> const& h) {
    auto* p = static_cast<float*>(data.allocate(h.size() * sizeof(float), 256));
    mem.copy_from_host(p, h.data(), h.size() * sizeof(float));
    return p;
  };
  auto leaf = [&](std::vector<float> const& h, shape s) {
    auto* gp = static_cast<float*>(data.allocate(h.size() * sizeof(float), 256));
    mem.zero(gp, h.size() * sizeof(float));
    Tensor v(place(h), s, t.leaf(gp, h.size() * sizeof(float)));
    v.set_memory(&mem);
    return std::pair{v, gp};
  };
  auto [W1, g1] = leaf(w1, shape{24, 8});
  auto [B1, gb] = leaf(b1, shape{24});
  auto [X, gx] = leaf(x, shape{8, 15});
  auto [W2, g2] = leaf(w2, shape{10, 8});
  Tensor tgt(place(target), shape{15});
  tgt.set_memory(&mem);
  Tensor h = nitro::tanh(nitro::matmul(W1, X) + B1);                                 // [24, 15]: 2 heads of 4, seq 5, batch 3
  Tensor a = nitro::causal_attention(h.reshape(shape{24, 5, 3}), 2).reshape(shape{8, 15});
  Tensor logits = nitro::matmul(W2, nitro::transpose(nitro::transpose(a)));           // [10, 15]
  Tensor loss = nitro::nn::logitcrossentropy(logits, tgt, 0.1f) + nitro::mean(a * a);
  CHECK(loss.device() == ops.device());
  t.backward<float>(loss.var(), 1.0f);
  graph_result r;
  r.loss = loss.item();
  auto back = [&](float const* p, std::size_t n) {
    std::vector<float> v(n);
    mem.copy_to_host(v.data(), p, n * sizeof(float));
    return v;
  };
  r.gw1 = back(g1, w1.size());
  r.gb1 = back(gb, b1.size());
  r.gx = back(gx, x.size());
  r.gw2 = back(g2, w2.size());
  return r;
}
}  // namespace

TEST_CASE("a step's tape through the GPU's table: the same graph, loss and gradients equal the CPU's") {
  nitro::cuda_backend be;
  nitro::rng g(23);
  auto w1 = random_vector(24 * 8, g), b1 = random_vector(24, g), x = random_vector(8 * 15, g), w2 = random_vector(10 * 8, g);
  std::vector<float> target(15);
  for (std::size_t i = 0; i < target.size(); ++i) target[i] = float(i % 10);
  const graph_result cpu = run_graph(nitro::cpu::ops::instance(), nitro::host_memory::instance(), w1, b1, x, w2, target);
  const graph_result gpu = run_graph(be.ops(), be.memory(), w1, b1, x, w2, target);
  const double el = std::fabs(double(gpu.loss) - cpu.loss) / std::fabs(double(cpu.loss));
  std::printf("  loss %.6f (CPU %.6f): %.2e; gradients W1 %.2e  b1 %.2e  x %.2e  W2 %.2e\n", gpu.loss, cpu.loss, el,
              max_rel_error(gpu.gw1, cpu.gw1), max_rel_error(gpu.gb1, cpu.gb1), max_rel_error(gpu.gx, cpu.gx), max_rel_error(gpu.gw2, cpu.gw2));
  CHECK(el < 1e-5);
  CHECK(max_rel_error(gpu.gw1, cpu.gw1) < 1e-4);
  CHECK(max_rel_error(gpu.gb1, cpu.gb1) < 1e-4);
  CHECK(max_rel_error(gpu.gx, cpu.gx) < 1e-4);
  CHECK(max_rel_error(gpu.gw2, cpu.gw2) < 1e-4);
  be.cuda_ops().check_flags();  // no bad class index: nothing raised
}

TEST_CASE("fused MLP kernels and the cuBLASLt path equal the CPU backend") {
  compare_program<cu::dense_path::fused_fp32>("fashion_mlp 784-128-128-10 relu", fashion_model(), 300, 1e-4, false);
  compare_program<cu::dense_path::fused_tf32>("fashion_mlp 784-128-128-10 relu", fashion_model(), 300, 3e-2, true);
  compare_program<cu::dense_path::fused_fp32>("fashion_mlp 784-128-128-10 relu", fashion_model(), 1000, 1e-4, false, cu::weight_grads::gemm);
  compare_program<cu::dense_path::cublaslt_fp32>("fashion_mlp 784-128-128-10 relu", fashion_model(), 300, 1e-4, false);
  compare_program<cu::dense_path::cublaslt_tf32>("fashion_mlp 784-128-128-10 relu", fashion_model(), 300, 3e-2, true);
  compare_program<cu::dense_path::fused_fp32>("40-32x3-5 gelu, tanh output", smooth_model(), 1000, 1e-4, false);
  compare_program<cu::dense_path::cublaslt_fp32>("40-32x3-5 gelu, tanh output", smooth_model(), 1000, 1e-4, false);
}

TEST_CASE("the fused loss reads its smoothing from the device scalars: a new value needs no recompile") {
  nitro::rng g(5);
  constexpr int C = 10;
  constexpr long long B = 777;
  auto logits = random_vector(C * B, g, -3, 3);
  std::vector<float> onehot(C * B, 0.0f), index(B);
  for (long long s = 0; s < B; ++s) {
    const int k = static_cast<int>(g.below(C));
    index[static_cast<std::size_t>(s)] = float(k);
    onehot[static_cast<std::size_t>(k + s * C)] = 1.0f;
  }
  nitro::cuda_backend be;
  cu::scalar_block block;
  const cu::scalar_ref smoothing = block.add(0.05f);
  dvec<float> ld(logits), td(onehot), id(index), gd(static_cast<std::size_t>(C * B));
  dvec<cu::metric_sums> sums(1);
  for (float s : {0.05f, 0.2f}) {
    block.set(smoothing, s);
    be.mirror_scalars(block.data(), block.bytes());
    for (int kind = 0; kind < 2; ++kind) {
      NITRO_CUDA_CHECK(cudaMemsetAsync(sums.data(), 0, sizeof(cu::metric_sums), be.compute()));
      cu::softmax_xent(ld.data(), C, B, kind ? id.data() : td.data(), kind == 1, smoothing, be.scalars(), gd.data(), sums.data(), be.compute());
      const auto grad = gd.get();
      const auto m = sums.get()[0];
      // the CPU backend
      nitro::arena mem;
      nitro::tape tp(mem);
      nitro::step_context ctx{&mem, &tp, true, 1, 0};
      nitro::context_scope scope(ctx);
      std::vector<float> gref(C * B, 0.0f);
      Tensor xt(logits.data(), shape{C, B}, tp.leaf(gref.data(), gref.size() * sizeof(float)));
      Tensor tt = kind ? Tensor(index.data(), shape{1, B}) : Tensor(onehot.data(), shape{C, B});
      Tensor loss = nitro::nn::logitcrossentropy(xt, tt, s);
      tp.backward<float>(loss.var(), 1.0f);
      char what[96];
      std::snprintf(what, sizeof what, "softmax cross-entropy, smoothing %.2f, %s target: gradient", s, kind ? "index" : "one-hot");
      report(what, max_rel_error(grad, gref), 1e-4);
      CHECK(m.mean_loss() == doctest::Approx(loss.item()).epsilon(1e-5));
      CHECK(m.correct == nitro::nn::correct_count(xt, tt));
      CHECK(m.samples == B);
      CHECK(m.flags == 0u);
    }
  }
  block.set(smoothing, 1.5f);  // outside [0, 1]: flagged, read back as E-LOSS-002
  be.mirror_scalars(block.data(), block.bytes());
  NITRO_CUDA_CHECK(cudaMemsetAsync(sums.data(), 0, sizeof(cu::metric_sums), be.compute()));
  cu::softmax_xent(ld.data(), C, B, td.data(), false, smoothing, be.scalars(), gd.data(), sums.data(), be.compute());
  CHECK_THROWS_WITH_AS(sums.get()[0].check(), doctest::Contains("E-LOSS-002"), nitro::error);
  CHECK(be.scalar_copies() == 3);  // the block moved once per change, not per call
}

namespace {
// n elements of one group through the kernel, against the element path on the host (the CPU
// program's arithmetic, tests/unit/test_cuda_tiles.cpp), five scheduled steps.
template <class R>
void group_update_matches(R const& rule, char const* name, nitro::cuda_backend& be, nitro::rng& g) {
  constexpr long long n = 10007;
  constexpr std::size_t S = R::states::size;
  cu::scalar_block block;
  auto h = cu::constant_refs(rule, 1e-2, 0.1);
  h.eta = block.add(1e-2f);
  auto p = random_vector(n, g), anchor = random_vector(n, g);
  std::vector<std::uint32_t> bits((n + 31) / 32);
  for (auto& b : bits) b = static_cast<std::uint32_t>(g());
  dvec<float> pd(p), ad(anchor);
  cu::group_optimizer<R> opt(rule, n, be.compute());
  opt.set_decay_mask(bits, be.compute());
  opt.set_anchor(ad.data(), be.compute());
  std::vector<std::vector<float>> st(S, std::vector<float>(n, 0.0f));
  for (long long t = 1; t <= 5; ++t) {
    block.set(h.eta, 1e-2f / float(t));  // a schedule: a new value each step, written to the slot
    be.mirror_scalars(block.data(), block.bytes());
    auto grad = random_vector(n, g);
    dvec<float> gd(grad);
    opt.step(pd.data(), gd.data(), h, t, be.scalars(), nullptr, be.compute());
    NITRO_CUDA_CHECK(cudaStreamSynchronize(be.compute()));
    const cu::rule_step<R> k = cu::rule_step_at(rule, h, block.data(), t);
    for (long long i = 0; i < n; ++i) {
      const auto j = static_cast<std::size_t>(i);
      float s[S > 0 ? S : 1];
      for (std::size_t q = 0; q < S; ++q) s[q] = st[q][j];
      cu::update_element<R, true>(k, p[j], grad[j], s, anchor[j], cu::mask_bit(bits.data(), i, true));
      for (std::size_t q = 0; q < S; ++q) st[q][j] = s[q];
    }
  }
  const std::string what = std::string("group update, ") + name + ", 5 scheduled steps, decay toward an anchor";
  report(what.c_str(), max_rel_error(pd.get(), p), 1e-5);
}
}  // namespace

TEST_CASE("one fused optimizer update per group: the CPU's rules (AdamW, SGD, Lion, a chain, SAM's inner rule), eta from a slot") {
  namespace optim = nitro::optim;
  nitro::rng g(9);
  nitro::cuda_backend be;
  group_update_matches(optim::adamw(), "adamw", be, g);
  group_update_matches(optim::sgd({.momentum = 0.9, .nesterov = true}), "sgd nesterov", be, g);
  group_update_matches(optim::lion(), "lion", be, g);
  group_update_matches(optim::chain(optim::decayed_weights(1e-2), optim::adam({.beta1 = 0.8})), "chain(decayed_weights, adam)", be, g);
  group_update_matches(optim::sam(optim::chain(optim::decayed_weights(1e-3), optim::sgd({.momentum = 0.5}))), "sam(chain(decayed_weights, sgd))", be, g);
}

TEST_CASE("global-norm clipping and SAM on the device") {
  nitro::rng g(10);
  constexpr long long n = 4099;
  nitro::cuda_backend be;
  auto grad = random_vector(n, g);
  dvec<float> gd(grad);
  dvec<double> sum_sq(1);
  dvec<float> factor(1);
  cu::clip_factor(gd.data(), n, cu::scalar_ref::constant(1.0), be.scalars(), sum_sq.data(), factor.data(), be.compute());
  double norm = 0;
  for (float x : grad) norm += double(x) * x;
  norm = std::sqrt(norm);
  CHECK(factor.get()[0] == doctest::Approx(std::min(1.0, 1.0 / (norm + 1e-6))).epsilon(1e-5));
  // SAM: p + e, then restored exactly
  auto p = random_vector(n, g);
  std::vector<std::uint32_t> perturb((n + 31) / 32, 0xffffffffu), adaptive((n + 31) / 32, 0x0000ffffu);
  perturb[3] = 0;
  dvec<float> pd(p), backup(static_cast<std::size_t>(n));
  dvec<std::uint32_t> pb(perturb), ab(adaptive);
  cu::sam_perturb(pd.data(), gd.data(), backup.data(), n, pb.data(), ab.data(), 0.01f, cu::scalar_ref::constant(0.05), be.scalars(), sum_sq.data(), be.compute());
  double n2 = 0;
  for (long long i = 0; i < n; ++i)
    n2 += cu::sam_norm_term(p[static_cast<std::size_t>(i)], grad[static_cast<std::size_t>(i)], cu::mask_bit(perturb.data(), i, true), cu::mask_bit(adaptive.data(), i, false), 0.01f);
  std::vector<float> want(p);
  for (long long i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    cu::sam_ascend(want[k], grad[k], cu::mask_bit(perturb.data(), i, true), cu::mask_bit(adaptive.data(), i, false), 0.01f,
                   static_cast<float>(0.05 / (std::sqrt(n2) + 1e-12)));
  }
  report("SAM/ASAM perturbation", max_rel_error(pd.get(), want), 1e-5);
  cu::sam_restore(pd.data(), backup.data(), n, be.compute());
  CHECK(pd.get() == p);  // the weights before, bit for bit
}

TEST_CASE("transfers: pinned buffers and a copy stream; each field's batches arrive intact and are counted") {
  nitro::rng g(11);
  nitro::cuda_backend be(0, 2);
  std::vector<std::vector<float>> batches;
  for (int k = 0; k < 6; ++k) batches.push_back(random_vector(784 * 64, g));
  std::vector<Tensor> on_device;
  for (int k = 0; k < 6; ++k) {
    Tensor h(batches[static_cast<std::size_t>(k)].data(), shape{784, 64});
    Tensor d = be.to_device("img", h);
    CHECK(d.device() == nitro::device_kind::cuda);
    CHECK(d.shape() == h.shape());
    const Tensor back = be.to_host(d);  // valid until the next to_device of "img"
    CHECK(std::equal(back.data(), back.data() + back.numel(), batches[static_cast<std::size_t>(k)].data()));
  }
  nitro::Index idx = nitro::Index::owned(shape{64});
  for (int i = 0; i < 64; ++i) idx[i] = i * 3;
  auto di = be.to_device("idx", idx);
  CHECK(be.to_host(di).to_vector() == idx.to_vector());
  CHECK(be.transfers_of("img").transfers == 6);
  CHECK(be.transfers_of("img").bytes == 6 * 784 * 64 * 4);
  CHECK(be.transfers_of("label").transfers == 0);
  CHECK(be.transfers_of("idx").bytes == 64 * 8);
  // a device tensor passes through unchanged and uncounted
  auto again = be.to_device("img", be.to_device("img", Tensor(batches[0].data(), shape{784, 64})));
  CHECK(again.device() == nitro::device_kind::cuda);
  CHECK(be.transfers_of("img").transfers == 7);
}

#if NITRO_HAVE_CUDNN
namespace {
template <class Layer>
void compare_dnn_layer(char const* name, Layer const& layer, shape xs, auto&& run_device) {
  using Ps = nitro::nn::layer_params<Layer>;
  using Store = nitro::param_store<typename Layer::param_spec>;
  using StStore = nitro::param_store<typename Layer::state_spec>;
  nitro::rng g(23);
  Store ps_store(true);
  StStore st_store(false);
  {
    auto ps = ps_store.view();
    auto st = st_store.view();
    layer.init(ps, st, g);
  }
  auto x = random_vector(static_cast<std::size_t>(xs.numel()), g);
  // CPU forward and backward with a random output gradient
  std::vector<float> dx_ref(x.size(), 0.0f), y_ref, dy;
  {
    nitro::arena mem;
    nitro::tape tp(mem);
    nitro::step_context ctx{&mem, &tp, true, 1, 0};
    nitro::context_scope scope(ctx);
    auto ps = ps_store.view(tp);
    auto st = st_store.view();
    Tensor xt(x.data(), xs, tp.leaf(dx_ref.data(), dx_ref.size() * sizeof(float)));
    Tensor y = layer(xt, ps, st).first;
    dy = random_vector(static_cast<std::size_t>(y.numel()), g);
    Tensor loss = nitro::sum(y * Tensor(dy.data(), y.shape()));
    tp.backward<float>(loss.var(), 1.0f);
    y_ref.assign(y.data(), y.data() + y.numel());
  }
  std::vector<float> grads_ref(ps_store.grads(), ps_store.grads() + Store::size);
  std::vector<float> y, dx, grads;
  run_device(ps_store, x, dy, y, dx, grads);
  std::printf("%s\n", name);
  report("  outputs", max_rel_error(y, y_ref), 1e-4);
  report("  input gradient", max_rel_error(dx, dx_ref), 1e-4);
  if (Store::size > 0) report("  parameter gradients", max_rel_error(grads, grads_ref), 1e-4);
}
}  // namespace

TEST_CASE("cuDNN convolution, pooling and batch normalisation equal nitro's CPU layers") {
  nitro::cuda_backend be;
  auto dnn = be.dnn();
  const int B = 8, H = 12, W = 12;
  {
    auto layer = nitro::nn::conv2d<3, 8, 3, 1, 1>(nitro::nn::relu);
    compare_dnn_layer("conv2d<3, 8, 3, 1, 1>(relu) on [12, 12, 3, 8]", layer, shape{W, H, 3, B},
                      [&](auto& store, std::vector<float>& x, std::vector<float>& dy, std::vector<float>& y, std::vector<float>& dx, std::vector<float>& grads) {
                        using Store = std::remove_cvref_t<decltype(store)>;
                        long long wo = -1, bo = -1;
                        for (auto const& li : Store::leaves) (li.keypath == "weight" ? wo : bo) = li.offset;
                        cu::conv2d_dnn conv({3, 8, 3, 1, 1, cu::activation_kind::relu});
                        conv.plan(dnn, B, H, W);
                        dvec<float> xd(x), pd(std::vector<float>(store.values(), store.values() + Store::size)), yd(static_cast<std::size_t>(conv.out_numel()));
                        dvec<float> dyd(dy), scratch(static_cast<std::size_t>(conv.out_numel())), dxd(x.size()), gd(static_cast<std::size_t>(Store::size));
                        conv.forward(dnn, be.compute(), xd.data(), pd.data() + wo, pd.data() + bo, nullptr, yd.data());
                        conv.backward(dnn, be.compute(), xd.data(), pd.data() + wo, yd.data(), dyd.data(), scratch.data(), dxd.data(), 0.0f, gd.data() + wo, gd.data() + bo);
                        y = yd.get();
                        dx = dxd.get();
                        grads = gd.get();
                      });
  }
  {
    auto layer = nitro::nn::max_pool<2>();
    compare_dnn_layer("max_pool<2> on [12, 12, 4, 8]", layer, shape{W, H, 4, B},
                      [&](auto&, std::vector<float>& x, std::vector<float>& dy, std::vector<float>& y, std::vector<float>& dx, std::vector<float>& grads) {
                        cu::pool2d_dnn pool(true, 2, 2);
                        pool.plan(B, 4, H, W);
                        dvec<float> xd(x), yd(dy.size()), dyd(dy), dxd(x.size());
                        pool.forward(dnn, be.compute(), xd.data(), yd.data());
                        pool.backward(dnn, be.compute(), yd.data(), dyd.data(), xd.data(), dxd.data(), 0.0f);
                        y = yd.get();
                        dx = dxd.get();
                        grads.clear();
                      });
  }
  {
    auto layer = nitro::nn::avg_pool<3, 2>();
    compare_dnn_layer("avg_pool<3, 2> on [12, 12, 4, 8]", layer, shape{W, H, 4, B},
                      [&](auto&, std::vector<float>& x, std::vector<float>& dy, std::vector<float>& y, std::vector<float>& dx, std::vector<float>& grads) {
                        cu::pool2d_dnn pool(false, 3, 2);
                        pool.plan(B, 4, H, W);
                        dvec<float> xd(x), yd(dy.size()), dyd(dy), dxd(x.size());
                        pool.forward(dnn, be.compute(), xd.data(), yd.data());
                        pool.backward(dnn, be.compute(), yd.data(), dyd.data(), xd.data(), dxd.data(), 0.0f);
                        y = yd.get();
                        dx = dxd.get();
                        grads.clear();
                      });
  }
  {
    auto layer = nitro::nn::batch_norm<6>();
    compare_dnn_layer("batch_norm<6> (training) on [5, 5, 6, 8]", layer, shape{5, 5, 6, B},
                      [&](auto& store, std::vector<float>& x, std::vector<float>& dy, std::vector<float>& y, std::vector<float>& dx, std::vector<float>& grads) {
                        using Store = std::remove_cvref_t<decltype(store)>;
                        long long wo = -1, bo = -1;
                        for (auto const& li : Store::leaves) (li.keypath == "weight" ? wo : bo) = li.offset;
                        cu::batch_norm_dnn bn(1e-5, 0.1);
                        bn.plan(B, 6, 25);
                        dvec<float> xd(x), pd(std::vector<float>(store.values(), store.values() + Store::size)), yd(x.size()), dyd(dy), dxd(x.size());
                        dvec<float> gd(static_cast<std::size_t>(Store::size)), rm(std::vector<float>(6, 0.0f)), rv(std::vector<float>(6, 1.0f)), sm(6), si(6);
                        bn.forward_training(dnn, be.compute(), xd.data(), pd.data() + wo, pd.data() + bo, yd.data(), rm.data(), rv.data(), sm.data(), si.data());
                        bn.backward(dnn, be.compute(), xd.data(), dyd.data(), pd.data() + wo, sm.data(), si.data(), dxd.data(), 0.0f, gd.data() + wo, gd.data() + bo);
                        y = yd.get();
                        dx = dxd.get();
                        grads = gd.get();
                        // running statistics: momentum 0.1, unbiased variance, as the CPU layer keeps them
                        const auto mean = rm.get(), var = rv.get();
                        for (int c = 0; c < 6; ++c) {
                          double s = 0, q = 0;
                          const int M = 25 * B;
                          for (int b = 0; b < B; ++b)
                            for (int i = 0; i < 25; ++i) s += x[static_cast<std::size_t>(i + 25 * (c + 6 * b))];
                          const double mu = s / M;
                          for (int b = 0; b < B; ++b)
                            for (int i = 0; i < 25; ++i) q += std::pow(x[static_cast<std::size_t>(i + 25 * (c + 6 * b))] - mu, 2);
                          CHECK(mean[static_cast<std::size_t>(c)] == doctest::Approx(0.1 * mu).epsilon(1e-4));
                          CHECK(var[static_cast<std::size_t>(c)] == doctest::Approx(0.9 + 0.1 * q / (M - 1)).epsilon(1e-4));
                        }
                      });
  }
}
#else
// not built with cuDNN: the case is reported as skipped (doctest's summary counts it), never as passed
TEST_CASE("cuDNN layers: this build found no cuDNN (NITRO_HAVE_CUDNN=0)" * doctest::skip()) {}
#endif

#if NITRO_HAVE_NCCL
TEST_CASE("n_devs: NCCL all-reduce (mean) and broadcast over the flat buffers of every device") {
  const int n = std::min(cu::device_count(), 2);
  cu::data_parallel dp(n);
  std::vector<std::unique_ptr<nitro::cuda_backend>> be;
  std::vector<cu::device_buffer<float>> bufs;
  std::vector<float*> ptrs;
  std::vector<cudaStream_t> streams;
  constexpr long long count = 1000;
  for (int i = 0; i < n; ++i) {
    be.push_back(std::make_unique<nitro::cuda_backend>(i));
    cu::device_scope on(i);
    bufs.emplace_back(static_cast<std::size_t>(count));
    std::vector<float> h(count, float(i + 1));
    NITRO_CUDA_CHECK(cudaMemcpy(bufs.back().data(), h.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    ptrs.push_back(bufs.back().data());
    streams.push_back(be.back()->compute());
  }
  dp.all_reduce_mean(ptrs.data(), count, streams.data());
  const float mean = (n + 1) / 2.0f;
  for (int i = 0; i < n; ++i) {
    cu::device_scope on(i);
    be[static_cast<std::size_t>(i)]->synchronize();
    std::vector<float> h(count);
    NITRO_CUDA_CHECK(cudaDeviceSynchronize());  // the backend's streams are non-blocking: a plain copy would not wait
    NITRO_CUDA_CHECK(cudaMemcpy(h.data(), ptrs[static_cast<std::size_t>(i)], count * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(std::all_of(h.begin(), h.end(), [&](float v) { return v == mean; }));
  }
  CHECK_THROWS_WITH_AS(cu::data_parallel(cu::device_count() + 1), doctest::Contains("E-CUDA-006"), nitro::error);
  if (n < 2) std::printf("n_devs: NCCL checked on one device; the two-device all-reduce needs a second GPU, which this machine lacks\n");
  else std::printf("n_devs: all-reduce over %d devices checked\n", n);
  const auto sl = cu::slice_of(1000, 1, 3);
  CHECK(sl.first == 333);
  CHECK(sl.count == 333);
}
#else
TEST_CASE("n_devs: this build found no NCCL (NITRO_HAVE_NCCL=0)" * doctest::skip()) {}
#endif

TEST_CASE("whole training steps on the device follow the CPU backend (fused FP32, AdamW, smoothing from the block)") {
  using Model = decltype(fashion_model());
  using Store = nitro::param_store<Model::param_spec>;
  using Program = cu::dense_program<Model, Store, cu::dense_path::fused_fp32>;
  const Model model = fashion_model();
  nitro::rng g(31);
  Store store(true);
  {
    auto ps = store.view();
    nitro::nn::layer_state<Model> st;
    model.init(ps, st, g);
  }
  constexpr long long B = 256;
  nitro::cuda_backend be;
  cu::scalar_block block;
  const cu::scalar_ref smoothing = block.add(0.1f);
  const auto rule = nitro::optim::adamw({.lambda = 1e-2});
  auto h = cu::constant_refs(rule, 1e-3, 1e-2);
  h.eta = block.add(1e-3f);
  Program prog(be);
  prog.upload(store.values());
  cu::dense_optimizer opt(prog, rule);
  std::vector<float> m(Store::size, 0.0f), v(Store::size, 0.0f);
  nitro::arena mem;
  nitro::tape tp(mem);
  for (long long t = 1; t <= 4; ++t) {
    auto x = random_vector(784 * B, g, 0, 1);
    std::vector<float> label(10 * B, 0.0f);
    for (long long s = 0; s < B; ++s) label[static_cast<std::size_t>(g.below(10) + s * 10)] = 1.0f;
    // device
    be.mirror_scalars(block.data(), block.bytes());
    Tensor xd = be.to_device("img", Tensor(x.data(), shape{784, B}));
    Tensor yd = be.to_device("label", Tensor(label.data(), shape{10, B}));
    prog.zero_grads();
    prog.loss_and_grads({xd.data(), yd.data(), false, B}, smoothing);
    opt.step(prog, {h}, t);
    // host
    nitro::step_context ctx{&mem, &tp, true, 1, 0};
    nitro::context_scope scope(ctx);
    store.zero_grads();
    auto ps = store.view(tp);
    nitro::nn::layer_state<Model> st;
    Tensor logits = model(Tensor(x.data(), shape{784, B}), ps, st).first;
    Tensor loss = nitro::nn::logitcrossentropy(logits, Tensor(label.data(), shape{10, B}), 0.1f);
    tp.backward<float>(loss.var(), 1.0f);
    const auto k = cu::rule_step_at(rule, h, block.data(), t);
    for (std::int64_t i = 0; i < Store::size; ++i) {
      bool decay = false;
      for (auto const& li : Store::leaves)
        if (i >= li.offset && i < li.offset + li.numel) decay = li.rank >= 2;
      const auto j = static_cast<std::size_t>(i);
      float s[2] = {m[j], v[j]};
      cu::update_element<nitro::optim::adamw_rule, false>(k, store.values()[i], store.grads()[i], s, 0.0f, decay);
      m[j] = s[0];
      v[j] = s[1];
    }
    tp.clear();
    mem.reset();
  }
  std::vector<float> p(Store::size);
  prog.download(p.data());
  // Adam divides by sqrt(v): a gradient entry that is ~0 on one side and tiny on the other moves
  // by a full step either way, so the whole array's error is the measure here
  std::printf("  4 AdamW training steps: parameters: max relative error %.3e (informative)\n", max_rel_error(p.data(), store.values(), p.size()));
  report("4 AdamW training steps: parameters [error of the whole array]", norm_rel_error(p.data(), store.values(), p.size()), 1e-4);
  const auto sums = prog.read_sums();
  CHECK(sums.samples == 4 * B);
}

int main(int argc, char** argv) {
  const int n = nitro::cuda::device_count();
  if (n == 0) {
    std::printf("test_gpu: SKIPPED: no CUDA device on this machine (cudaGetDeviceCount reports none); the GPU tests need one\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("test_gpu: %d device(s); device 0: %s (sm_%d%d)\n", n, prop.name, prop.major, prop.minor);
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
