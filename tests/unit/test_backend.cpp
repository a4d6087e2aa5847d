// tensor/backend.hpp: the backend seam. Layers reach the products and parallel regions of the
// backend through the step context — including the chunks a convolution runs on worker threads —
// and the handle installs its backend's kernels in every step and evaluation; outside a step the
// CPU's serve.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>

namespace {

using D = nitro::basic_tensor<double>;

// The CPU's kernels, counted: a second backend as far as the seam can tell.
struct counting_ops final : nitro::device_ops {
  std::atomic<int> gemms{0}, regions{0}, fused{0}, epilogue_backwards{0}, attentions{0}, attention_backwards{0};
  nitro::device_kind device() const noexcept override { return nitro::device_kind::cpu; }
  char const* name() const noexcept override { return "counting"; }
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, float const* a, std::int64_t lda, float const* b,
            std::int64_t ldb, float beta, float* c, std::int64_t ldc) override {
    ++gemms;
    nitro::cpu::ops::instance().gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, double const* a, std::int64_t lda,
            double const* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) override {
    ++gemms;
    nitro::cpu::ops::instance().gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void gemm_epilogue(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float const* a, std::int64_t lda, float const* b,
                     std::int64_t ldb, float const* bias, nitro::epilogue_act act, float* z, float* c, std::int64_t ldc) override {
    ++fused;
    nitro::cpu::ops::instance().gemm_epilogue(ta, tb, m, n, k, a, lda, b, ldb, bias, act, z, c, ldc);
  }
  void gemm_epilogue(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double const* a, std::int64_t lda, double const* b,
                     std::int64_t ldb, double const* bias, nitro::epilogue_act act, double* z, double* c, std::int64_t ldc) override {
    ++fused;
    nitro::cpu::ops::instance().gemm_epilogue(ta, tb, m, n, k, a, lda, b, ldb, bias, act, z, c, ldc);
  }
  void epilogue_backward(nitro::epilogue_act act, std::int64_t m, std::int64_t n, float const* gy, float const* yz, float* g,
                         float* bias_grad) override {
    ++epilogue_backwards;
    nitro::cpu::ops::instance().epilogue_backward(act, m, n, gy, yz, g, bias_grad);
  }
  void epilogue_backward(nitro::epilogue_act act, std::int64_t m, std::int64_t n, double const* gy, double const* yz, double* g,
                         double* bias_grad) override {
    ++epilogue_backwards;
    nitro::cpu::ops::instance().epilogue_backward(act, m, n, gy, yz, g, bias_grad);
  }
  void causal_attention(std::int64_t h, std::int64_t d, std::int64_t t, std::int64_t b, float const* qkv, float* out, float* lse) override {
    ++attentions;
    nitro::cpu::ops::instance().causal_attention(h, d, t, b, qkv, out, lse);
  }
  void causal_attention(std::int64_t h, std::int64_t d, std::int64_t t, std::int64_t b, double const* qkv, double* out, double* lse) override {
    ++attentions;
    nitro::cpu::ops::instance().causal_attention(h, d, t, b, qkv, out, lse);
  }
  void causal_attention_backward(std::int64_t h, std::int64_t d, std::int64_t t, std::int64_t b, float const* qkv, float const* out,
                                 float const* lse, float const* gout, float* gqkv) override {
    ++attention_backwards;
    nitro::cpu::ops::instance().causal_attention_backward(h, d, t, b, qkv, out, lse, gout, gqkv);
  }
  void causal_attention_backward(std::int64_t h, std::int64_t d, std::int64_t t, std::int64_t b, double const* qkv, double const* out,
                                 double const* lse, double const* gout, double* gqkv) override {
    ++attention_backwards;
    nitro::cpu::ops::instance().causal_attention_backward(h, d, t, b, qkv, out, lse, gout, gqkv);
  }
  using nitro::device_ops::parallel_for;
  void parallel_for(int n, nitro::index_task task) override {
    ++regions;
    nitro::cpu::ops::instance().parallel_for(n, task);
  }
  using nitro::device_ops::for_each_share;
  void for_each_share(std::int64_t count, nitro::range_task task) override {
    ++regions;
    nitro::cpu::ops::instance().for_each_share(count, task);
  }
};

D filled(nitro::shape s, double v) {
  D t = D::owned(s);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = v * double(i % 7 - 3);
  return t;
}

template <class L>
nitro::nn::layer_params<L, double> params_of(double v) {
  nitro::nn::layer_params<L, double> ps;
  nitro::for_each_leaf_type<typename L::param_spec>([&](auto kp, auto spec) {
    *nitro::find_leaf<D>(ps, decltype(kp)::view()) = filled(decltype(spec)::type::shape(), v);
  });
  return ps;
}

// forward and backward of `layer` on x inside a step whose kernels are `ops`; returns y.
template <class L>
D step_on(nitro::device_ops& ops, L const& layer, D x) {
  nitro::arena mem;
  nitro::tape tp(mem);
  nitro::step_context ctx{&mem, &tp, true, 1, 0, &ops};
  nitro::context_scope scope(ctx);
  std::vector<double> gx(static_cast<std::size_t>(x.numel()), 0.0);
  x.set_var(tp.leaf(gx.data(), sizeof(double) * gx.size()));
  auto ps = params_of<L>(0.01);
  std::vector<std::vector<double>> grads;  // every parameter on the tape, so backward computes dW too
  grads.reserve(8);
  nitro::for_each_leaf(ps, [&](auto, D& leaf) {
    grads.emplace_back(static_cast<std::size_t>(leaf.numel()), 0.0);
    leaf.set_var(tp.leaf(grads.back().data(), sizeof(double) * grads.back().size()));
  });
  nitro::nn::layer_state<L, double> st;
  D y = layer(x, ps, st).first;
  D s = nitro::sum(y);
  tp.backward<double>(s.var(), 1.0);
  D out = D::owned(y.shape());
  for (std::int64_t i = 0; i < y.numel(); ++i) out[i] = y[i];
  return out;
}

}  // namespace

TEST_CASE("backend seam: a dense layer's products and epilogues go to the step context's kernels; outside a step, the CPU's") {
  counting_ops ops;
  auto layer = nitro::nn::dense<6, 4>(nitro::nn::relu);
  D y = step_on(ops, layer, filled({6, 5}, 0.1));
  CHECK(int(ops.fused) == 1);               // y = relu(W x + b), one fused product
  CHECK(int(ops.epilogue_backwards) == 1);  // relu' and the bias's gradient
  CHECK(int(ops.gemms) == 2);               // dW and dx
  CHECK(&nitro::detail::active_ops() == &nitro::cpu::ops::instance());
  // the same layer outside any step: the CPU's kernels, the same numbers
  auto ps = params_of<decltype(layer)>(0.01);
  nitro::nn::layer_state<decltype(layer), double> st;
  D y_cpu = layer(filled({6, 5}, 0.1), ps, st).first;
  for (std::int64_t i = 0; i < y.numel(); ++i) CHECK(y[i] == y_cpu[i]);
  CHECK(int(ops.gemms) == 2);
  CHECK(int(ops.fused) == 1);
}

TEST_CASE("backend seam: attention's kernel, forward and backward, is the step context's; the products around it too") {
  counting_ops ops;
  auto layer = nitro::nn::causal_self_attention<4, 2>();
  D y = step_on(ops, layer, filled({4, 6, 3}, 0.1));  // [W, T, B]
  CHECK(int(ops.attentions) == 1);
  CHECK(int(ops.attention_backwards) == 1);
  CHECK(int(ops.fused) == 2);               // qkv and proj, each one fused product
  CHECK(int(ops.epilogue_backwards) == 2);  // their biases' gradients
  CHECK(int(ops.gemms) == 4);               // dW and dx of each
  auto ps = params_of<decltype(layer)>(0.01);
  D y_cpu = layer(filled({4, 6, 3}, 0.1), ps, {}).first;
  for (std::int64_t i = 0; i < y.numel(); ++i) CHECK(y[i] == y_cpu[i]);
  CHECK(int(ops.attentions) == 1);  // outside a step: the CPU's
}

TEST_CASE("the fused epilogue: every activation, with and without bias, kept pre-activation, against the unfused ops") {
  auto& ops = nitro::cpu::ops::instance();
  constexpr std::int64_t m = 5, n = 7, k = 3;
  nitro::rng g(3);
  std::vector<double> a(m * k), b(k * n), bias(m), gy(m * n);
  for (auto* v : {&a, &b, &bias, &gy})
    for (auto& x : *v) x = g.uniform(-1.5, 1.5);
  for (auto act : {nitro::epilogue_act::identity, nitro::epilogue_act::relu, nitro::epilogue_act::tanh, nitro::epilogue_act::sigmoid,
                   nitro::epilogue_act::gelu}) {
    INFO(nitro::to_string(act));
    for (bool with_bias : {false, true}) {
      std::vector<double> pre(m * n), c(m * n, 99.0), z(m * n, 99.0);
      ops.gemm(false, false, m, n, k, 1.0, a.data(), m, b.data(), k, 0.0, pre.data(), m);
      if (with_bias)
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t i = 0; i < m; ++i) pre[std::size_t(i + j * m)] += bias[std::size_t(i)];
      ops.gemm_epilogue(false, false, m, n, k, a.data(), m, b.data(), k, with_bias ? bias.data() : nullptr, act, z.data(), c.data(), m);
      // against the tensor ops of the same activation, and their gradient by the tape
      D x = D::owned({m, n});
      for (std::int64_t i = 0; i < m * n; ++i) x[i] = pre[std::size_t(i)];
      D want = act == nitro::epilogue_act::identity ? x
               : act == nitro::epilogue_act::relu   ? nitro::relu(x)
               : act == nitro::epilogue_act::tanh   ? nitro::tanh(x)
               : act == nitro::epilogue_act::sigmoid ? nitro::sigmoid(x)
                                                     : nitro::gelu(x);
      for (std::int64_t i = 0; i < m * n; ++i) {
        CHECK(z[std::size_t(i)] == doctest::Approx(pre[std::size_t(i)]).epsilon(1e-14));
        CHECK(c[std::size_t(i)] == doctest::Approx(want[i]).epsilon(1e-14));
      }
      // backward: g = gy act'(.), bias_grad += row sums of g
      std::vector<double> gout(m * n), bg(m, 1.0);
      ops.epilogue_backward(act, m, n, gy.data(), nitro::needs_preactivation(act) ? z.data() : c.data(), gout.data(), bg.data());
      for (std::int64_t i = 0; i < m; ++i) {
        double row = 0;
        for (std::int64_t j = 0; j < n; ++j) {
          const double p = pre[std::size_t(i + j * m)], h = 1e-6;
          auto f = [&](double v) {
            D t = D::owned({1});
            t[0] = v;
            D r = act == nitro::epilogue_act::identity ? t
                  : act == nitro::epilogue_act::relu   ? nitro::relu(t)
                  : act == nitro::epilogue_act::tanh   ? nitro::tanh(t)
                  : act == nitro::epilogue_act::sigmoid ? nitro::sigmoid(t)
                                                        : nitro::gelu(t);
            return r[0];
          };
          const double d = (f(p + h) - f(p - h)) / (2 * h);  // finite differences, away from relu's kink
          CHECK(gout[std::size_t(i + j * m)] == doctest::Approx(gy[std::size_t(i + j * m)] * d).epsilon(1e-6));
          row += gout[std::size_t(i + j * m)];
        }
        CHECK(bg[std::size_t(i)] == doctest::Approx(1.0 + row).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("backend seam: a convolution's chunks, run on worker threads, still use the step's kernels") {
  counting_ops ops;
  // batch 64 of 12x12x3 images: enough work that the chunks run as a parallel region
  D y = step_on(ops, nitro::nn::conv2d<3, 8, 3, 1, 1>(nitro::nn::relu), filled({12, 12, 3, 64}, 0.05));
  CHECK(y.shape() == nitro::shape{12, 12, 8, 64});
  if (std::thread::hardware_concurrency() > 1) CHECK(int(ops.regions) >= 1);
  CHECK(int(ops.gemms) == 64 * 3);  // per sample: the forward product, dW and dx (im2col path)
}

namespace {
struct Batch { BOOST_HANA_DEFINE_STRUCT(Batch, (nitro::Tensor, x), (nitro::Tensor, y)); };
struct In { BOOST_HANA_DEFINE_STRUCT(In, (nitro::Tensor, x)); };
struct Target { BOOST_HANA_DEFINE_STRUCT(Target, (nitro::Tensor, y)); };

// Which kernels Probe's forward hook last ran on (not a member: every member is reflected).
nitro::device_ops const* seen_forward = nullptr;

struct Probe {
  nitro::GraphConst<int, 4> width;
  std::int64_t batch_size = 8;
  auto build_data() const {
    nitro::Tensor x = nitro::Tensor::owned({2, 32}), y = nitro::Tensor::owned({1, 32});
    for (int i = 0; i < 32; ++i) { x(0, i) = float(i % 4); x(1, i) = float(i / 8); y(0, i) = x(0, i) - x(1, i); }
    return nitro::data::dataset<Batch>{"line", {{"train", Batch{x, y}}, {"valid", Batch{x, y}}}, "probe"};
  }
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<2, 4>(nitro::nn::tanh), nitro::nn::dense<4, 1>()); }
  auto forward(auto const& m, auto const& ps, auto const& st, In const& in) const {
    seen_forward = &nitro::detail::active_ops();
    return m(in.x, ps, st);
  }
  auto loss(nitro::Tensor const& yhat, Target const& t) const { return nitro::nn::mse(yhat, t.y); }
};
NITRO_EXPERIMENT(Probe, width, batch_size);
}  // namespace

TEST_CASE("backend seam: the handle runs its hooks on its backend's kernels, and says which backend it is") {
  static_assert(nitro::Backend<nitro::cpu_backend>);
  nitro::Nitro h(Probe{}, nitro::max_epochs = 1, nitro::logger = nitro::no_loggers);
  h.train(false);
  CHECK(seen_forward == &h.backend().ops());
  seen_forward = nullptr;
  h.evaluate("valid");
  CHECK(seen_forward == &h.backend().ops());
  CHECK(std::string(h.backend().name()) == "cpu (Eigen)");
  CHECK(h.backend().device == nitro::device_kind::cpu);
}

namespace {
// A backend of its own: the CPU's memory, the counted kernels. Copies share the counter.
struct counting_backend {
  static constexpr nitro::device_kind device = nitro::device_kind::cpu;
  counting_ops* kernels = nullptr;
  char const* name() const noexcept { return "counting"; }
  std::string describe() const { return "counting"; }
  template <class T>
  nitro::basic_tensor<T> to_device(std::string_view, nitro::basic_tensor<T> const& host) { return host; }
  nitro::device_ops& ops() const noexcept { return *kernels; }
};
static_assert(nitro::Backend<counting_backend>);

nitro::keyword_record record_of(std::vector<nitro::keyword_record> const& rs, std::string const& name) {
  auto it = std::find_if(rs.begin(), rs.end(), [&](auto const& r) { return r.name == name; });
  REQUIRE(it != rs.end());
  return *it;
}
}  // namespace

TEST_CASE("the device construction fact: the handle trains and evaluates on the backend it is given, and records it") {
  counting_ops k;
  nitro::Nitro h(Probe{}, nitro::max_epochs = 1, nitro::logger = nitro::no_loggers, nitro::device = counting_backend{&k});
  h.train(false);
  CHECK(seen_forward == &k);
  const int trained = k.gemms, trained_fused = k.fused;
  CHECK(trained >= 2 * 4);       // 4 steps of 8 samples, each at least the two backward products
  CHECK(trained_fused >= 4);     // and a fused forward product
  CHECK(k.epilogue_backwards >= 4);
  h.evaluate("valid");
  CHECK(k.fused > trained_fused);  // evaluation runs forward only, on the same kernels
  CHECK(int(k.gemms) == trained);
  CHECK(std::string(h.backend().name()) == "counting");
  const auto given = record_of(h.keywords().records(), "device");
  CHECK(given.value == "counting");
  CHECK(given.source == nitro::keyword_source::keyword);
  CHECK(given.fact);
  CHECK(nitro::show_text(h.description()).find("counting") != std::string::npos);

  nitro::Nitro d(Probe{}, nitro::max_epochs = 1, nitro::logger = nitro::no_loggers);  // the default: the CPU
  const auto fallback = record_of(d.keywords().records(), "device");
  CHECK(fallback.value == "cpu (Eigen)");
  CHECK(fallback.source == nitro::keyword_source::fallback);
}

TEST_CASE("n_devs above 1 on a backend of one device is E-CUDA-011, naming the backend") {
  const auto [code, sentence] = [] {
    try {
      nitro::Nitro h(Probe{}, nitro::n_devs = 2, nitro::logger = nitro::no_loggers);
    } catch (nitro::error const& e) {
      return std::pair<std::string, std::string>{e.code(), e.what()};
    }
    return std::pair<std::string, std::string>{};
  }();
  CHECK(code == "E-CUDA-011");
  CHECK(sentence.find("n_devs = 2 (from the keyword)") != std::string::npos);
  CHECK(sentence.find("cpu (Eigen) backend") != std::string::npos);
}

TEST_CASE("the replicas construction fact: none by default; a job of one rank leaves the handle one process") {
  nitro::Nitro alone(Probe{}, nitro::logger = nitro::no_loggers);
  CHECK(alone.distributed() == nullptr);
  CHECK(record_of(alone.keywords().records(), "replicas").value == "none");
  nitro::dist::single_process one;
  nitro::Nitro h(Probe{}, nitro::logger = nitro::no_loggers, nitro::kw::replicas = &one);
  CHECK(h.distributed() == nullptr);  // one rank: no collective is ever made
  CHECK(h.writes_records());
  const auto r = record_of(h.keywords().records(), "replicas");
  CHECK(r.value == "1 rank");
  CHECK(r.source == nitro::keyword_source::keyword);
}

TEST_CASE("show() says what the handle does: its loaders' own options, no accumulation claim without a metrics hook, no copies on the CPU") {
  nitro::Nitro h(Probe{}, nitro::logger = nitro::no_loggers);
  const std::string text = nitro::show_text(h.description());
  CHECK(text.find("no metrics hook: the loss is the metric") != std::string::npos);
  CHECK(text.find("accumulate on") == std::string::npos);  // Probe has no metrics hook: nothing but the loss accumulates
  // the CPU copies nothing, and says so rather than a count derived from the setting
  CHECK(text.find("    copies: none (the cpu backend's device memory is host memory") != std::string::npos);
  const auto train = h.loader_options_for("train"), valid = h.loader_options_for("valid");
  CHECK(train.shuffle);
  CHECK(train.drop_last);
  CHECK_FALSE(valid.shuffle);
  CHECK_FALSE(valid.drop_last);
  const auto d = h.description();
  REQUIRE(d.splits.size() == 2);
  CHECK(d.splits[0].prefetch.rfind("loader thread, " + std::to_string(train.prefetch) + " ahead, shuffled, full batches;", 0) == 0);
  CHECK(d.splits[1].prefetch.rfind("loader thread, " + std::to_string(valid.prefetch) + " ahead;", 0) == 0);
  CHECK(d.splits[0].batches == 32 / 8);
}
