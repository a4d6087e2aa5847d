// tensor/backend.hpp: the backend seam. Layers reach the products and parallel regions of the
// backend through the step context — including the chunks a convolution runs on worker threads —
// and the handle installs its backend's kernels in every step and evaluation; outside a step the
// CPU's serve.
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

namespace {

using D = nitro::basic_tensor<double>;

// The CPU's kernels, counted: a second backend as far as the seam can tell.
struct counting_ops final : nitro::device_ops {
  std::atomic<int> gemms{0}, regions{0}, fused{0}, epilogue_backwards{0}, attentions{0}, attention_backwards{0};
  std::atomic<int> maps{0}, map_backwards{0}, binaries{0}, binary_backwards{0}, reductions{0}, reduction_backwards{0}, softmaxes{0},
      softmax_backwards{0}, copies{0}, transposes{0}, losses{0}, loss_backwards{0}, counts{0};
  std::atomic<int> norms{0}, norm_backwards{0}, dropouts{0}, dropout_backwards{0}, lookups{0}, lookup_backwards{0}, pools{0}, pool_backwards{0},
      convs{0}, conv_backwards{0};
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
  void map(nitro::map_op op, std::int64_t n, float a, float b, float const* x, float* y) override {
    ++maps;
    nitro::cpu::ops::instance().map(op, n, a, b, x, y);
  }
  void map(nitro::map_op op, std::int64_t n, double a, double b, double const* x, double* y) override {
    ++maps;
    nitro::cpu::ops::instance().map(op, n, a, b, x, y);
  }
  void map_backward(nitro::map_op op, std::int64_t n, float a, float b, float const* x, float const* y, float const* gy, float* gx) override {
    ++map_backwards;
    nitro::cpu::ops::instance().map_backward(op, n, a, b, x, y, gy, gx);
  }
  void map_backward(nitro::map_op op, std::int64_t n, double a, double b, double const* x, double const* y, double const* gy,
                    double* gx) override {
    ++map_backwards;
    nitro::cpu::ops::instance().map_backward(op, n, a, b, x, y, gy, gx);
  }
  void binary(nitro::binop op, nitro::broadcast_plan const& p, float const* a, float const* b, float* y) override {
    ++binaries;
    nitro::cpu::ops::instance().binary(op, p, a, b, y);
  }
  void binary(nitro::binop op, nitro::broadcast_plan const& p, double const* a, double const* b, double* y) override {
    ++binaries;
    nitro::cpu::ops::instance().binary(op, p, a, b, y);
  }
  void binary_backward(nitro::binop op, nitro::broadcast_plan const& p, float const* a, float const* b, float const* gy, float* ga,
                       float* gb) override {
    ++binary_backwards;
    nitro::cpu::ops::instance().binary_backward(op, p, a, b, gy, ga, gb);
  }
  void binary_backward(nitro::binop op, nitro::broadcast_plan const& p, double const* a, double const* b, double const* gy, double* ga,
                       double* gb) override {
    ++binary_backwards;
    nitro::cpu::ops::instance().binary_backward(op, p, a, b, gy, ga, gb);
  }
  void reduce(nitro::reduce_op op, nitro::reduction r, float const* x, float* y) override {
    ++reductions;
    nitro::cpu::ops::instance().reduce(op, r, x, y);
  }
  void reduce(nitro::reduce_op op, nitro::reduction r, double const* x, double* y) override {
    ++reductions;
    nitro::cpu::ops::instance().reduce(op, r, x, y);
  }
  void reduce_backward(nitro::reduce_op op, nitro::reduction r, float const* x, float const* y, float const* gy, float* gx) override {
    ++reduction_backwards;
    nitro::cpu::ops::instance().reduce_backward(op, r, x, y, gy, gx);
  }
  void reduce_backward(nitro::reduce_op op, nitro::reduction r, double const* x, double const* y, double const* gy, double* gx) override {
    ++reduction_backwards;
    nitro::cpu::ops::instance().reduce_backward(op, r, x, y, gy, gx);
  }
  void softmax(bool log, std::int64_t rows, std::int64_t cols, float const* x, float* y) override {
    ++softmaxes;
    nitro::cpu::ops::instance().softmax(log, rows, cols, x, y);
  }
  void softmax(bool log, std::int64_t rows, std::int64_t cols, double const* x, double* y) override {
    ++softmaxes;
    nitro::cpu::ops::instance().softmax(log, rows, cols, x, y);
  }
  void softmax_backward(bool log, std::int64_t rows, std::int64_t cols, float const* y, float const* gy, float* gx) override {
    ++softmax_backwards;
    nitro::cpu::ops::instance().softmax_backward(log, rows, cols, y, gy, gx);
  }
  void softmax_backward(bool log, std::int64_t rows, std::int64_t cols, double const* y, double const* gy, double* gx) override {
    ++softmax_backwards;
    nitro::cpu::ops::instance().softmax_backward(log, rows, cols, y, gy, gx);
  }
  void cross_entropy(std::int64_t C, std::int64_t B, float const* x, float const* t, bool ix, float s, float* p, float* l) override {
    ++losses;
    nitro::cpu::ops::instance().cross_entropy(C, B, x, t, ix, s, p, l);
  }
  void cross_entropy(std::int64_t C, std::int64_t B, double const* x, double const* t, bool ix, double s, double* p, double* l) override {
    ++losses;
    nitro::cpu::ops::instance().cross_entropy(C, B, x, t, ix, s, p, l);
  }
  void cross_entropy_backward(std::int64_t C, std::int64_t B, float const* p, float const* t, bool ix, float s, float const* gl,
                              float* g) override {
    ++loss_backwards;
    nitro::cpu::ops::instance().cross_entropy_backward(C, B, p, t, ix, s, gl, g);
  }
  void cross_entropy_backward(std::int64_t C, std::int64_t B, double const* p, double const* t, bool ix, double s, double const* gl,
                              double* g) override {
    ++loss_backwards;
    nitro::cpu::ops::instance().cross_entropy_backward(C, B, p, t, ix, s, gl, g);
  }
  void squared_error(std::int64_t n, float const* a, float const* b, float* l) override {
    ++losses;
    nitro::cpu::ops::instance().squared_error(n, a, b, l);
  }
  void squared_error(std::int64_t n, double const* a, double const* b, double* l) override {
    ++losses;
    nitro::cpu::ops::instance().squared_error(n, a, b, l);
  }
  void squared_error_backward(std::int64_t n, float const* a, float const* b, float const* gl, float* ga, float* gb) override {
    ++loss_backwards;
    nitro::cpu::ops::instance().squared_error_backward(n, a, b, gl, ga, gb);
  }
  void squared_error_backward(std::int64_t n, double const* a, double const* b, double const* gl, double* ga, double* gb) override {
    ++loss_backwards;
    nitro::cpu::ops::instance().squared_error_backward(n, a, b, gl, ga, gb);
  }
  void binary_cross_entropy(std::int64_t n, float const* x, float const* t, float* l) override {
    ++losses;
    nitro::cpu::ops::instance().binary_cross_entropy(n, x, t, l);
  }
  void binary_cross_entropy(std::int64_t n, double const* x, double const* t, double* l) override {
    ++losses;
    nitro::cpu::ops::instance().binary_cross_entropy(n, x, t, l);
  }
  void binary_cross_entropy_backward(std::int64_t n, float const* x, float const* t, float const* gl, float* gx, float* gt) override {
    ++loss_backwards;
    nitro::cpu::ops::instance().binary_cross_entropy_backward(n, x, t, gl, gx, gt);
  }
  void binary_cross_entropy_backward(std::int64_t n, double const* x, double const* t, double const* gl, double* gx, double* gt) override {
    ++loss_backwards;
    nitro::cpu::ops::instance().binary_cross_entropy_backward(n, x, t, gl, gx, gt);
  }
  void classification_counts(std::int64_t C, std::int64_t B, float const* x, float const* t, bool idx, float* right, float* cm) override {
    ++counts;
    nitro::cpu::ops::instance().classification_counts(C, B, x, t, idx, right, cm);
  }
  void classification_counts(std::int64_t C, std::int64_t B, double const* x, double const* t, bool idx, double* right, double* cm) override {
    ++counts;
    nitro::cpu::ops::instance().classification_counts(C, B, x, t, idx, right, cm);
  }
  void copy(std::int64_t r, std::int64_t c, float const* s, std::int64_t ls, float* d, std::int64_t ld, bool acc) override {
    ++copies;
    nitro::cpu::ops::instance().copy(r, c, s, ls, d, ld, acc);
  }
  void copy(std::int64_t r, std::int64_t c, double const* s, std::int64_t ls, double* d, std::int64_t ld, bool acc) override {
    ++copies;
    nitro::cpu::ops::instance().copy(r, c, s, ls, d, ld, acc);
  }
  void transpose(std::int64_t m, std::int64_t n, float const* s, float* d, bool acc) override {
    ++transposes;
    nitro::cpu::ops::instance().transpose(m, n, s, d, acc);
  }
  void transpose(std::int64_t m, std::int64_t n, double const* s, double* d, bool acc) override {
    ++transposes;
    nitro::cpu::ops::instance().transpose(m, n, s, d, acc);
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
  void layer_norm(std::int64_t F, std::int64_t n, double eps, float const* x, float const* w, float const* b, float* y, float* st) override {
    ++norms;
    nitro::cpu::ops::instance().layer_norm(F, n, eps, x, w, b, y, st);
  }
  void layer_norm(std::int64_t F, std::int64_t n, double eps, double const* x, double const* w, double const* b, double* y,
                  double* st) override {
    ++norms;
    nitro::cpu::ops::instance().layer_norm(F, n, eps, x, w, b, y, st);
  }
  void layer_norm_backward(std::int64_t F, std::int64_t n, float const* x, float const* w, float const* st, float const* gy, float* gx,
                           float* gw, float* gb) override {
    ++norm_backwards;
    nitro::cpu::ops::instance().layer_norm_backward(F, n, x, w, st, gy, gx, gw, gb);
  }
  void layer_norm_backward(std::int64_t F, std::int64_t n, double const* x, double const* w, double const* st, double const* gy, double* gx,
                           double* gw, double* gb) override {
    ++norm_backwards;
    nitro::cpu::ops::instance().layer_norm_backward(F, n, x, w, st, gy, gx, gw, gb);
  }
  void batch_norm(bool tr, std::int64_t in, std::int64_t C, std::int64_t B, double eps, double mom, float const* x, float const* w,
                  float const* b, float const* rm, float const* rv, float* st, float* nm, float* nv, float* y) override {
    ++norms;
    nitro::cpu::ops::instance().batch_norm(tr, in, C, B, eps, mom, x, w, b, rm, rv, st, nm, nv, y);
  }
  void batch_norm(bool tr, std::int64_t in, std::int64_t C, std::int64_t B, double eps, double mom, double const* x, double const* w,
                  double const* b, double const* rm, double const* rv, double* st, double* nm, double* nv, double* y) override {
    ++norms;
    nitro::cpu::ops::instance().batch_norm(tr, in, C, B, eps, mom, x, w, b, rm, rv, st, nm, nv, y);
  }
  void batch_norm_backward(bool tr, std::int64_t in, std::int64_t C, std::int64_t B, float const* x, float const* w, float const* st,
                           float const* gy, float* gx, float* gw, float* gb) override {
    ++norm_backwards;
    nitro::cpu::ops::instance().batch_norm_backward(tr, in, C, B, x, w, st, gy, gx, gw, gb);
  }
  void batch_norm_backward(bool tr, std::int64_t in, std::int64_t C, std::int64_t B, double const* x, double const* w, double const* st,
                           double const* gy, double* gx, double* gw, double* gb) override {
    ++norm_backwards;
    nitro::cpu::ops::instance().batch_norm_backward(tr, in, C, B, x, w, st, gy, gx, gw, gb);
  }
  void dropout(std::uint64_t seed, std::uint64_t below, std::int64_t n, float scale, float const* x, float* y) override {
    ++dropouts;
    nitro::cpu::ops::instance().dropout(seed, below, n, scale, x, y);
  }
  void dropout(std::uint64_t seed, std::uint64_t below, std::int64_t n, double scale, double const* x, double* y) override {
    ++dropouts;
    nitro::cpu::ops::instance().dropout(seed, below, n, scale, x, y);
  }
  void dropout_backward(std::uint64_t seed, std::uint64_t below, std::int64_t n, float scale, float const* gy, float* gx) override {
    ++dropout_backwards;
    nitro::cpu::ops::instance().dropout_backward(seed, below, n, scale, gy, gx);
  }
  void dropout_backward(std::uint64_t seed, std::uint64_t below, std::int64_t n, double scale, double const* gy, double* gx) override {
    ++dropout_backwards;
    nitro::cpu::ops::instance().dropout_backward(seed, below, n, scale, gy, gx);
  }
  std::int64_t embedding(std::int64_t v, std::int64_t d, std::int64_t n, float const* idx, float const* w, float* y) override {
    ++lookups;
    return nitro::cpu::ops::instance().embedding(v, d, n, idx, w, y);
  }
  std::int64_t embedding(std::int64_t v, std::int64_t d, std::int64_t n, double const* idx, double const* w, double* y) override {
    ++lookups;
    return nitro::cpu::ops::instance().embedding(v, d, n, idx, w, y);
  }
  void embedding_backward(std::int64_t v, std::int64_t d, std::int64_t n, float const* idx, float const* gy, float* gw) override {
    ++lookup_backwards;
    nitro::cpu::ops::instance().embedding_backward(v, d, n, idx, gy, gw);
  }
  void embedding_backward(std::int64_t v, std::int64_t d, std::int64_t n, double const* idx, double const* gy, double* gw) override {
    ++lookup_backwards;
    nitro::cpu::ops::instance().embedding_backward(v, d, n, idx, gy, gw);
  }
  std::int64_t conv2d_scratch(nitro::conv_window const& p, bool backward) const override {
    return nitro::cpu::ops::instance().conv2d_scratch(p, backward);
  }
  void conv2d(nitro::conv_window const& p, float const* x, float const* w, float const* b, nitro::epilogue_act act, float* z, float* y,
              float* s) override {
    ++convs;
    nitro::cpu::ops::instance().conv2d(p, x, w, b, act, z, y, s);
  }
  void conv2d(nitro::conv_window const& p, double const* x, double const* w, double const* b, nitro::epilogue_act act, double* z, double* y,
              double* s) override {
    ++convs;
    nitro::cpu::ops::instance().conv2d(p, x, w, b, act, z, y, s);
  }
  void conv2d_backward(nitro::conv_window const& p, nitro::epilogue_act act, float const* x, float const* w, float const* yz, float const* gy,
                       float* gx, float* gw, float* gb, float* s) override {
    ++conv_backwards;
    nitro::cpu::ops::instance().conv2d_backward(p, act, x, w, yz, gy, gx, gw, gb, s);
  }
  void conv2d_backward(nitro::conv_window const& p, nitro::epilogue_act act, double const* x, double const* w, double const* yz,
                       double const* gy, double* gx, double* gw, double* gb, double* s) override {
    ++conv_backwards;
    nitro::cpu::ops::instance().conv2d_backward(p, act, x, w, yz, gy, gx, gw, gb, s);
  }
  void pool2d(nitro::pool_kind kind, nitro::pool_window const& p, float const* x, float* y, std::uint32_t* arg) override {
    ++pools;
    nitro::cpu::ops::instance().pool2d(kind, p, x, y, arg);
  }
  void pool2d(nitro::pool_kind kind, nitro::pool_window const& p, double const* x, double* y, std::uint32_t* arg) override {
    ++pools;
    nitro::cpu::ops::instance().pool2d(kind, p, x, y, arg);
  }
  void pool2d_backward(nitro::pool_kind kind, nitro::pool_window const& p, float const* gy, std::uint32_t const* arg, float* gx) override {
    ++pool_backwards;
    nitro::cpu::ops::instance().pool2d_backward(kind, p, gy, arg, gx);
  }
  void pool2d_backward(nitro::pool_kind kind, nitro::pool_window const& p, double const* gy, std::uint32_t const* arg, double* gx) override {
    ++pool_backwards;
    nitro::cpu::ops::instance().pool2d_backward(kind, p, gy, arg, gx);
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

TEST_CASE("backend seam: element-wise maps, broadcast arithmetic, reductions and matmul, forward and backward, run on the step context's kernels") {
  counting_ops ops;
  nitro::arena mem;
  nitro::tape tp(mem);
  nitro::step_context ctx{&mem, &tp, true, 1, 0, &ops};
  D a = filled({3, 4}, 0.3), bias = filled({3}, 0.2), w = filled({4, 3}, 0.1);
  std::vector<double> ga(12), gb(3), gw(12);
  {
    nitro::context_scope scope(ctx);
    a.set_var(tp.leaf(ga.data(), sizeof(double) * 12));
    bias.set_var(tp.leaf(gb.data(), sizeof(double) * 3));
    w.set_var(tp.leaf(gw.data(), sizeof(double) * 12));
    D h = nitro::tanh(a + bias) * 2.0;           // map, binary (broadcast), map (affine)
    D y = nitro::matmul(w, h);                   // [4, 3] x [3, 4]
    D s = nitro::sum(nitro::clamp(y, -1.0, 1.0) > D::zeros({4, 4}));  // a comparison: no gradient
    CHECK(s.numel() == 1);
    D l = nitro::sum(nitro::square(y));
    tp.backward<double>(l.var(), 1.0);
  }
  CHECK(int(ops.maps) == 4);            // tanh, * 2, clamp, square
  CHECK(int(ops.binaries) == 2);        // + bias, >
  CHECK(int(ops.gemms) == 3);           // matmul, and its two gradients
  CHECK(int(ops.map_backwards) == 3);   // square, * 2, tanh (clamp's output fed only a comparison)
  CHECK(int(ops.binary_backwards) == 1);
  CHECK(int(ops.reductions) == 2);           // the two sums
  CHECK(int(ops.reduction_backwards) == 1);  // the comparison's sum has no gradient
  // the same gradients as the chain rule by hand, on the CPU outside any step
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) {
      double dh = 0;  // d l / d h(i, j) = sum_r 2 y(r, j) w(r, i)
      for (int r = 0; r < 4; ++r) {
        double yr = 0;
        for (int q = 0; q < 3; ++q) yr += w[r + 4 * q] * 2.0 * std::tanh(a[q + 3 * j] + bias[q]);
        dh += 2 * yr * w[r + 4 * i];
      }
      const double t = std::tanh(a[i + 3 * j] + bias[i]);
      CHECK(ga[std::size_t(i + 3 * j)] == doctest::Approx(dh * 2.0 * (1 - t * t)).epsilon(1e-12));
    }
  double bsum = 0, asum = 0;
  for (double v : gb) bsum += v;
  for (double v : ga) asum += v;
  CHECK(bsum == doctest::Approx(asum).epsilon(1e-12));  // the broadcast bias gathers every column's gradient
}

TEST_CASE("backend seam: softmax, log-softmax, logsumexp, max, argmax and sums along a dimension run on the step context's kernels") {
  counting_ops ops;
  nitro::arena mem;
  nitro::tape tp(mem);
  nitro::step_context ctx{&mem, &tp, true, 1, 0, &ops};
  D x = filled({5, 4, 3}, 0.4);
  std::vector<double> gx(60);
  D lse, mx, am, s1, sm;
  {
    nitro::context_scope scope(ctx);
    x.set_var(tp.leaf(gx.data(), sizeof(double) * 60));
    sm = nitro::softmax(x);
    D ls = nitro::log_softmax(x);
    lse = nitro::logsumexp(x);
    mx = nitro::max(x);
    am = nitro::argmax(x);
    s1 = nitro::sum(x, 1);
    D l = nitro::sum(sm * x) + nitro::sum(ls) + nitro::sum(lse) + nitro::sum(mx) + nitro::sum(s1);
    tp.backward<double>(l.var(), 1.0);
  }
  CHECK(int(ops.softmaxes) == 2);
  CHECK(int(ops.softmax_backwards) == 2);
  CHECK(int(ops.reductions) == 4 + 5);  // logsumexp, max, argmax, sum(x, 1); the five sums of l
  CHECK(int(ops.reduction_backwards) == 3 + 5);  // argmax has none
  CHECK(lse.shape() == nitro::shape{1, 4, 3});
  CHECK(s1.shape() == nitro::shape{5, 1, 3});
  // the values against the definitions, column by column
  for (int c = 0; c < 12; ++c) {
    double m = -1e300, z = 0;
    int best = 0;
    for (int i = 0; i < 5; ++i) {
      if (x[i + 5 * c] > m) { m = x[i + 5 * c]; best = i; }
    }
    for (int i = 0; i < 5; ++i) z += std::exp(x[i + 5 * c] - m);
    CHECK(lse[c] == doctest::Approx(m + std::log(z)).epsilon(1e-14));
    CHECK(mx[c] == m);
    CHECK(am[c] == best);
    for (int i = 0; i < 5; ++i) CHECK(sm[i + 5 * c] == doctest::Approx(std::exp(x[i + 5 * c] - m) / z).epsilon(1e-14));
  }
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 5; ++i) {
      double t = 0;
      for (int k = 0; k < 4; ++k) t += x[i + 5 * k + 20 * b];
      CHECK(s1[i + 5 * b] == doctest::Approx(t).epsilon(1e-14));
    }
}

TEST_CASE("backend seam: the three losses, forward and backward, run on the step context's kernels, with the gradient they define") {
  counting_ops ops;
  nitro::arena mem;
  nitro::tape tp(mem);
  nitro::step_context ctx{&mem, &tp, true, 1, 0, &ops};
  D x = filled({4, 3}, 0.3), soft = filled({4, 3}, 0.1), idx = D::owned({3}), y = filled({4, 3}, 0.2);
  idx[0] = 2; idx[1] = 0; idx[2] = 3;
  for (std::int64_t i = 0; i < soft.numel(); ++i) soft[i] = 0.1 + 0.05 * double(i % 4);
  std::vector<double> gx(12), gy(12);
  double ce_index = 0, ce_soft = 0, sq = 0, bce = 0;
  {
    nitro::context_scope scope(ctx);
    x.set_var(tp.leaf(gx.data(), sizeof(double) * 12));
    y.set_var(tp.leaf(gy.data(), sizeof(double) * 12));
    D a = nitro::nn::logitcrossentropy(x, idx, 0.1);
    D b = nitro::nn::logitcrossentropy(x, soft);
    D c = nitro::nn::mse(x, y);
    D d = nitro::nn::logitbinarycrossentropy(x, y);
    ce_index = a[0]; ce_soft = b[0]; sq = c[0]; bce = d[0];
    D l = a + b * 2.0 + c * 3.0 + d * 5.0;
    tp.backward<double>(l.var(), 1.0);
  }
  CHECK(int(ops.losses) == 4);
  CHECK(int(ops.loss_backwards) == 4);
  // the values and the gradients against tensor/loss.hpp's one-column and one-element definitions
  double want_index = 0, want_soft = 0, want_sq = 0, want_bce = 0;
  std::vector<double> wgx(12, 0.0), wgy(12, 0.0), p(4);
  const double on = 0.9, off = 0.1 / 4;
  for (int c = 0; c < 3; ++c) {
    want_index += nitro::loss::cross_entropy_column(&x[4 * c], 4, static_cast<double const*>(nullptr), std::int64_t(idx[c]), on, off, p.data()) / 3;
    nitro::loss::cross_entropy_column_backward(p.data(), 4, static_cast<double const*>(nullptr), std::int64_t(idx[c]), on, off, 1.0 / 3, &wgx[4 * c]);
    want_soft += nitro::loss::cross_entropy_column(&x[4 * c], 4, &soft[4 * c], -1, 1.0, 0.0, p.data()) / 3;
    nitro::loss::cross_entropy_column_backward(p.data(), 4, &soft[4 * c], -1, 1.0, 0.0, 2.0 / 3, &wgx[4 * c]);
  }
  for (int i = 0; i < 12; ++i) {
    want_sq += nitro::loss::squared_error(x[i], y[i]) / 12;
    want_bce += nitro::loss::binary_cross_entropy(x[i], y[i]) / 12;
    wgx[i] += 3.0 / 12 * nitro::loss::squared_error_da(x[i], y[i]) + 5.0 / 12 * nitro::loss::binary_cross_entropy_dx(x[i], y[i]);
    wgy[i] += -3.0 / 12 * nitro::loss::squared_error_da(x[i], y[i]) + 5.0 / 12 * nitro::loss::binary_cross_entropy_dt(x[i], y[i]);
  }
  CHECK(ce_index == doctest::Approx(want_index).epsilon(1e-14));
  CHECK(ce_soft == doctest::Approx(want_soft).epsilon(1e-14));
  CHECK(sq == doctest::Approx(want_sq).epsilon(1e-14));
  CHECK(bce == doctest::Approx(want_bce).epsilon(1e-14));
  for (int i = 0; i < 12; ++i) {
    CHECK(gx[std::size_t(i)] == doctest::Approx(wgx[std::size_t(i)]).epsilon(1e-13));
    CHECK(gy[std::size_t(i)] == doctest::Approx(wgy[std::size_t(i)]).epsilon(1e-13));
  }
  // and by finite differences, through the public losses (the CPU's kernels outside a step)
  auto total = [&](D const& xs) {
    return nitro::nn::logitcrossentropy(xs, idx, 0.1)[0] + 2 * nitro::nn::logitcrossentropy(xs, soft)[0] + 3 * nitro::nn::mse(xs, y)[0] +
           5 * nitro::nn::logitbinarycrossentropy(xs, y)[0];
  };
  for (int i = 0; i < 12; ++i) {
    D xp = D::owned({4, 3}), xm = D::owned({4, 3});
    for (int j = 0; j < 12; ++j) xp[j] = xm[j] = x[j];
    xp[i] += 1e-6;
    xm[i] -= 1e-6;
    CHECK(gx[std::size_t(i)] == doctest::Approx((total(xp) - total(xm)) / 2e-6).epsilon(1e-6));
  }
  // a class index outside [0, C) is the kernel's E-LOSS-003
  idx[1] = 4;
  std::string code;
  try {
    (void)nitro::nn::logitcrossentropy(x, idx);
  } catch (nitro::error const& e) {
    code = e.code();
  }
  CHECK(code == "E-LOSS-003");
}

TEST_CASE("backend seam: the metrics' counts (accuracy, the confusion matrix) run on the step context's kernels, inside the step's arena") {
  counting_ops ops;
  nitro::arena mem;
  nitro::tape tp(mem);
  nitro::step_context ctx{&mem, &tp, false, 1, 0, &ops};
  // 5 columns of 3 classes; column 3 ties classes 0 and 2 (the first wins), column 4's index is 7
  D x = D::from({0.1, 0.9, 0.2,  2.0, -1.0, 0.5,  0.3, 0.3, 0.8,  0.7, 0.1, 0.7,  0.0, 1.0, 0.0}, {3, 5});
  D idx = D::from({1, 0, 1, 2, 7}, {5});
  D soft = D::from({0.1, 0.8, 0.1,  0.6, 0.2, 0.2,  0.2, 0.1, 0.7,  0.4, 0.4, 0.2,  0.3, 0.3, 0.4}, {3, 5});
  double by_index = 0, by_soft = 0;
  std::vector<double> cm;
  {
    nitro::context_scope scope(ctx);
    const std::size_t before = mem.bytes_in_use();
    by_index = nitro::nn::correct_count(x, idx);
    by_soft = nitro::nn::correct_count(x, soft);
    D m = nitro::nn::confusion_matrix(x, idx);
    CHECK(mem.bytes_in_use() > before);  // the counter and the matrix: the step's arena, not the heap
    cm = m.to_vector();
  }
  CHECK(int(ops.counts) == 3);
  CHECK(by_index == 2);  // columns 0 (class 1) and 1 (class 0); column 3 predicts 0, not 2
  CHECK(by_soft == 4);   // columns 0 to 3: column 3's target ties 0 and 1 (the first wins), as its logits do
  // (true, predicted), column-major; column 4's true class 7 is outside [0, 3): not counted
  const std::vector<double> want{/*pred 0*/ 1, 0, 1, /*pred 1*/ 0, 1, 0, /*pred 2*/ 0, 1, 0};
  CHECK(cm == want);
  // outside a step: the CPU's kernels, the same counts
  CHECK(nitro::nn::correct_count(x, idx) == 2);
  CHECK(nitro::nn::confusion_matrix(x, idx).to_vector() == want);
  // against tensor/loss.hpp's definitions, column by column
  double want_soft = 0;
  for (int c = 0; c < 5; ++c)
    want_soft += nitro::loss::argmax_column(&x[3 * c], 3) == nitro::loss::target_class(&soft[0], false, c, 3) ? 1 : 0;
  CHECK(by_soft == want_soft);
}

TEST_CASE("backend seam: layer norm, batch norm, dropout and the embedding lookup run on the step context's kernels, forward and backward") {
  counting_ops ops;
  // layer norm: each column (mean, biased variance) normalised, then w xhat + b
  D x = filled({6, 5}, 0.3);
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] += 0.01 * double(i * i % 11);
  auto ln = nitro::nn::layer_norm<6>();
  D y = step_on(ops, ln, x);
  CHECK(int(ops.norms) == 1);
  CHECK(int(ops.norm_backwards) == 1);
  auto ps = params_of<decltype(ln)>(0.01);
  for (int n = 0; n < 5; ++n) {
    double mu = 0, var = 0;
    for (int f = 0; f < 6; ++f) mu += x[6 * n + f] / 6;
    for (int f = 0; f < 6; ++f) var += (x[6 * n + f] - mu) * (x[6 * n + f] - mu) / 6;
    for (int f = 0; f < 6; ++f)
      CHECK(y[6 * n + f] == doctest::Approx((x[6 * n + f] - mu) / std::sqrt(var + 1e-5) * nitro::get<"weight">(ps)[f] +
                                            nitro::get<"bias">(ps)[f]).epsilon(1e-12));
  }

  // dropout: the layer drops exactly what tensor/dropout_mask.hpp's definition says, for the step's
  // seed folded with its call counter, and scales the rest by 1 / (1 - p)
  D xd = filled({40, 25}, 0.5);
  D yd = step_on(ops, nitro::nn::dropout(0.25), xd);
  CHECK(int(ops.dropouts) == 1);
  CHECK(int(ops.dropout_backwards) == 1);
  const std::uint64_t seed = nitro::fold(nitro::fold(1, nitro::nn::detail::dropout_stream), 0);
  const std::uint64_t below = nitro::dropout_mask::threshold(0.25);
  int kept = 0;
  for (std::int64_t i = 0; i < xd.numel(); ++i) {
    const bool keep = nitro::dropout_mask::keeps(seed, i, below);
    kept += keep;
    CHECK(yd[i] == (keep ? xd[i] / 0.75 : 0.0));
  }
  CHECK(kept > 700);  // about 750 of 1000
  CHECK(kept < 800);
  // the mask's words are SplitMix64's stream from the seed: nitro::splitmix64 of the advanced state
  for (std::uint64_t j = 0; j < 5; ++j) CHECK(nitro::dropout_mask::word(seed, j) == nitro::splitmix64(seed + j * 0x9e3779b97f4a7c15ULL));
  CHECK(nitro::dropout_mask::draw(seed, 3) == std::uint32_t(nitro::dropout_mask::word(seed, 1) >> 32));

  // the embedding: column n is the table's column tok[n]; a bad index is E-LAYER-005 at its position
  auto emb = nitro::nn::embedding<5, 3>();
  D tok = D::from({4, 0, 4, 2}, {4});
  D ye = step_on(ops, emb, tok);
  CHECK(int(ops.lookups) == 1);
  CHECK(int(ops.lookup_backwards) == 1);
  for (int n = 0; n < 4; ++n)
    for (int d = 0; d < 3; ++d) CHECK(ye[3 * n + d] == 0.01 * double((int(tok[n]) * 3 + d) % 7 - 3));
  tok[2] = 5;
  std::string what;
  try {
    (void)step_on(ops, emb, tok);
  } catch (nitro::error const& e) {
    what = std::string(e.code()) + " " + e.what();
  }
  CHECK(what.find("E-LAYER-005") == 0);
  CHECK(what.find("index 5.000000 at position 2") != std::string::npos);

  // batch norm in training: the batch's statistics, the running ones moved toward them, and the
  // gradient of x, w and b, all through the table
  auto bn = nitro::nn::batch_norm<3>();
  using BN = decltype(bn);
  D xb = filled({2, 2, 3, 4}, 0.2);
  for (std::int64_t i = 0; i < xb.numel(); ++i) xb[i] += 0.003 * double(i);
  std::vector<double> gxb(static_cast<std::size_t>(xb.numel())), gw(3), gb(3);
  D mean_new, var_new;
  {
    nitro::arena mem;
    nitro::tape tp(mem);
    nitro::step_context ctx{&mem, &tp, true, 1, 0, &ops};
    nitro::context_scope scope(ctx);
    auto bps = params_of<BN>(0.5);
    nitro::get<"weight">(bps).set_var(tp.leaf(gw.data(), sizeof(double) * 3));
    nitro::get<"bias">(bps).set_var(tp.leaf(gb.data(), sizeof(double) * 3));
    nitro::nn::layer_state<BN, double> st;
    nitro::get<"running_mean">(st) = D::from({0.0, 0.0, 0.0}, {3});
    nitro::get<"running_var">(st) = D::from({1.0, 1.0, 1.0}, {3});
    xb.set_var(tp.leaf(gxb.data(), sizeof(double) * gxb.size()));
    auto [yb, st2] = bn(xb, bps, st);
    D l = nitro::sum(yb * yb);
    tp.backward<double>(l.var(), 1.0);
    mean_new = nitro::get<"running_mean">(st2).clone();
    var_new = nitro::get<"running_var">(st2).clone();
  }
  CHECK(int(ops.norms) == 2);
  CHECK(int(ops.norm_backwards) == 2);
  D pooled = step_on(ops, nitro::nn::max_pool<2>(), filled({4, 4, 2, 3}, 0.1));
  CHECK(int(ops.pools) == 1);
  CHECK(int(ops.pool_backwards) == 1);
  CHECK(pooled.shape() == nitro::shape{2, 2, 2, 3});
  for (int c = 0; c < 3; ++c) {
    double mu = 0, sq = 0;
    for (int b = 0; b < 4; ++b)
      for (int i = 0; i < 4; ++i) mu += xb[4 * (c + 3 * b) + i] / 16;
    for (int b = 0; b < 4; ++b)
      for (int i = 0; i < 4; ++i) sq += (xb[4 * (c + 3 * b) + i] - mu) * (xb[4 * (c + 3 * b) + i] - mu);
    CHECK(mean_new[c] == doctest::Approx(0.1 * mu).epsilon(1e-12));
    CHECK(var_new[c] == doctest::Approx(0.9 + 0.1 * sq / 15).epsilon(1e-12));
    CHECK(gb[std::size_t(c)] != 0.0);  // sum(y^2) moves the bias of every channel
  }
}

TEST_CASE("the CPU's pooling kernels: every window (the common ones unrolled, the others at run-time extents) against one window at a time") {
  nitro::cpu::ops& cpu = nitro::cpu::ops::instance();
  nitro::rng g(5);
  for (auto [k, st, w, h] : {std::array<std::int64_t, 4>{2, 2, 8, 6}, {2, 1, 5, 5}, {3, 3, 9, 7}, {3, 2, 11, 8}, {3, 1, 6, 6}, {4, 3, 13, 10},
                             {9, 1, 10, 9}, {5, 5, 5, 5}})
    for (nitro::pool_kind kind : {nitro::pool_kind::max, nitro::pool_kind::average}) {
      const std::int64_t side = k, step = st;  // named copies: clang before 16 cannot capture a structured binding
      CAPTURE(side);
      CAPTURE(step);
      const nitro::pool_window p{k, st, w, h, (w - k) / st + 1, (h - k) / st + 1, 40};  // 40 planes: the pool's chunks
      std::vector<double> x(std::size_t(p.planes * p.in_plane())), gy(std::size_t(p.planes * p.out_plane()));
      for (auto& v : x) v = std::round(g.uniform(-2, 2) * 2) / 2;  // a coarse grid: windows tie
      for (auto& v : gy) v = g.uniform(-1, 1);
      std::vector<double> y(gy.size()), gx(x.size(), 0.25), want_gx(x.size(), 0.25);
      std::vector<std::uint32_t> arg(gy.size());
      const bool is_max = kind == nitro::pool_kind::max;
      cpu.pool2d(kind, p, x.data(), y.data(), is_max ? arg.data() : nullptr);
      cpu.pool2d_backward(kind, p, gy.data(), is_max ? arg.data() : nullptr, gx.data());
      bool same = true;
      for (std::int64_t pl = 0; pl < p.planes; ++pl)
        for (std::int64_t oy = 0; oy < p.oh; ++oy)
          for (std::int64_t ox = 0; ox < p.ow; ++ox) {
            const std::size_t o = std::size_t(ox + p.ow * (oy + p.oh * pl));
            double best = -1e300, sum = 0;
            std::uint32_t first = 0;
            for (std::int64_t ky = 0; ky < k; ++ky)
              for (std::int64_t kx = 0; kx < k; ++kx) {
                const double v = x[std::size_t(ox * st + kx + w * (oy * st + ky + h * pl))];
                if (v > best) { best = v; first = std::uint32_t(kx + k * ky); }
                sum += v;
              }
            same = same && (is_max ? y[o] == best && arg[o] == first : y[o] == doctest::Approx(sum / double(k * k)).epsilon(1e-14));
            for (std::int64_t ky = 0; ky < k; ++ky)
              for (std::int64_t kx = 0; kx < k; ++kx) {
                const std::size_t i = std::size_t(ox * st + kx + w * (oy * st + ky + h * pl));
                if (!is_max) want_gx[i] += gy[o] / double(k * k);
                else if (std::uint32_t(kx + k * ky) == first) want_gx[i] += gy[o];
              }
          }
      CHECK(same);
      for (std::size_t i = 0; i < x.size(); ++i) CHECK(gx[i] == doctest::Approx(want_gx[i]).epsilon(1e-13));
    }
}

TEST_CASE("backend seam: slices, concatenations and transposes copy on the step context's kernels, and their gradients land back") {
  counting_ops ops;
  nitro::arena mem;
  nitro::tape tp(mem);
  nitro::step_context ctx{&mem, &tp, true, 1, 0, &ops};
  D a = filled({3, 6}, 0.5), b = filled({2, 6}, 0.25);
  std::vector<double> ga(18), gb(12);
  D c, s, t;
  {
    nitro::context_scope scope(ctx);
    a.set_var(tp.leaf(ga.data(), sizeof(double) * 18));
    b.set_var(tp.leaf(gb.data(), sizeof(double) * 12));
    c = nitro::concat_features(a, b);     // [5, 6]
    s = nitro::slice_batch(c, 2, 5);      // [5, 3]: samples 2, 3, 4
    t = nitro::transpose(s);              // [3, 5]
    D w = D::owned({3, 5});
    for (int i = 0; i < 15; ++i) w[i] = i + 1;
    D l = nitro::sum(t * w);
    tp.backward<double>(l.var(), 1.0);
  }
  CHECK(int(ops.copies) == 2 + 1 + 1 + 2);  // concat's two blocks, the slice; the slice's and concat's backward
  CHECK(int(ops.transposes) == 2);
  for (int j = 0; j < 6; ++j)
    for (int i = 0; i < 5; ++i) CHECK(c[i + 5 * j] == (i < 3 ? a[i + 3 * j] : b[i - 3 + 2 * j]));
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 5; ++i) {
      CHECK(t[j + 3 * i] == c[i + 5 * (j + 2)]);
      // d l / d c(i, j + 2) = w(j, i); columns outside the slice get nothing
      const double g = j * 1.0 + 3.0 * i + 1.0;
      if (i < 3) CHECK(ga[std::size_t(i + 3 * (j + 2))] == g);
      else CHECK(gb[std::size_t(i - 3 + 2 * (j + 2))] == g);
    }
  for (int i = 0; i < 6; ++i) CHECK(ga[std::size_t(i)] == 0.0);  // samples 0 and 1
  for (int i = 0; i < 4; ++i) CHECK(gb[std::size_t(i)] == 0.0);
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

TEST_CASE("backend seam: a convolution is the step context's kernel, forward and backward, with its scratch in the step's arena") {
  counting_ops ops;
  // batch 64 of 12x12x3 images, padded, a relu fused; and a 1x1 kernel (each image its own im2col)
  D y = step_on(ops, nitro::nn::conv2d<3, 8, 3, 1, 1>(nitro::nn::relu), filled({12, 12, 3, 64}, 0.05));
  CHECK(y.shape() == nitro::shape{12, 12, 8, 64});
  CHECK(int(ops.convs) == 1);
  CHECK(int(ops.conv_backwards) == 1);
  CHECK(int(ops.gemms) == 0);  // the products are the convolution's own, inside its entry
  D y1 = step_on(ops, nitro::nn::conv2d<3, 4, 1>(), filled({5, 5, 3, 2}, 0.05));
  CHECK(y1.shape() == nitro::shape{5, 5, 4, 2});
  CHECK(int(ops.convs) == 2);
  // the values: a direct sum over the window, against the table's output, for the padded relu
  auto ps = params_of<nitro::nn::conv2d_layer<3, 8, 3, 1, 1, nitro::nn::relu_t>>(0.01);
  D x = filled({12, 12, 3, 64}, 0.05);
  auto const& w = nitro::get<"weight">(ps);
  auto const& b = nitro::get<"bias">(ps);
  for (int n : {0, 63})
    for (int o : {0, 7})
      for (int oy : {0, 5, 11})
        for (int ox : {0, 11}) {
          double s = b[o];
          for (int c = 0; c < 3; ++c)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                const int ix = ox - 1 + kx, iy = oy - 1 + ky;
                if (ix < 0 || ix >= 12 || iy < 0 || iy >= 12) continue;
                s += w[kx + 3 * (ky + 3 * (c + 3 * o))] * x[ix + 12 * (iy + 12 * (c + 3 * n))];
              }
          CHECK(y[ox + 12 * (oy + 12 * (o + 8 * n))] == doctest::Approx(std::max(s, 0.0)).epsilon(1e-12));
        }
}

namespace {
struct Batch { BOOST_HANA_DEFINE_STRUCT(Batch, (nitro::Tensor, x), (nitro::Tensor, y)); };
struct In { BOOST_HANA_DEFINE_STRUCT(In, (nitro::Tensor, x)); };
struct Target { BOOST_HANA_DEFINE_STRUCT(Target, (nitro::Tensor, y)); };

// Which kernels Probe's forward hook last ran on, and where its output was (not members: every
// member is reflected).
nitro::device_ops const* seen_forward = nullptr;
nitro::device_kind seen_output_device = nitro::device_kind::cpu;
void const* seen_output = nullptr;

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
    auto out = m(in.x, ps, st);
    seen_output_device = out.first.device();
    seen_output = out.first.data();
    return out;
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
// Memory that says it is another device's (host memory behind it, so the CPU's kernels can still
// compute on it), counting what the arena and the tape ask of it and remembering its chunks.
struct elsewhere_memory final : nitro::device_memory {
  int allocations = 0, deallocations = 0, zeros = 0, fills = 0, adds = 0, copies_in = 0, copies_out = 0;
  std::vector<std::pair<char const*, std::size_t>> chunks;
  nitro::device_kind device() const noexcept override { return nitro::device_kind::cuda; }
  void* allocate(std::size_t bytes, std::size_t align) override {
    ++allocations;
    void* p = nitro::host_memory::instance().allocate(bytes, align);
    chunks.emplace_back(static_cast<char const*>(p), bytes);
    return p;
  }
  void deallocate(void* p, std::size_t bytes) noexcept override {
    ++deallocations;
    std::erase_if(chunks, [&](auto const& c) { return c.first == p; });
    nitro::host_memory::instance().deallocate(p, bytes);
  }
  void zero(void* p, std::size_t bytes) override { ++zeros; nitro::host_memory::instance().zero(p, bytes); }
  void fill(float* p, std::size_t n, float v) override { ++fills; nitro::host_memory::instance().fill(p, n, v); }
  void fill(double* p, std::size_t n, double v) override { ++fills; nitro::host_memory::instance().fill(p, n, v); }
  void fill(std::int64_t* p, std::size_t n, std::int64_t v) override { ++fills; nitro::host_memory::instance().fill(p, n, v); }
  void add(float* p, std::size_t n, float v) override { ++adds; nitro::host_memory::instance().add(p, n, v); }
  void add(double* p, std::size_t n, double v) override { ++adds; nitro::host_memory::instance().add(p, n, v); }
  void copy_from_host(void* d, void const* s, std::size_t b) override { ++copies_in; nitro::host_memory::instance().copy_from_host(d, s, b); }
  void copy_to_host(void* d, void const* s, std::size_t b) override { ++copies_out; nitro::host_memory::instance().copy_to_host(d, s, b); }
  bool holds(void const* p) const {
    auto const* c = static_cast<char const*>(p);
    return std::any_of(chunks.begin(), chunks.end(), [&](auto const& k) { return c >= k.first && c < k.first + k.second; });
  }
};
// The CPU's kernels on that memory.
struct elsewhere_ops final : nitro::cpu::ops {
  elsewhere_memory mem;
  nitro::device_memory& memory() noexcept override { return mem; }
};
}  // namespace

TEST_CASE("the memory seam: a step arena takes its chunks from its device_memory; tensors say where they are; the tape zeroes and seeds through it") {
  elsewhere_memory mem;
  {
    nitro::arena data(mem), closures;
    CHECK(data.device() == nitro::device_kind::cuda);
    nitro::tape t(data, closures);
    nitro::step_context ctx{&data, &t, true, 1, 0, nullptr};
    nitro::context_scope scope(ctx);
    nitro::Tensor f = nitro::Tensor::full({3, 4}, 1.5f);
    CHECK(f.device() == nitro::device_kind::cuda);
    CHECK(mem.holds(f.data()));
    CHECK(mem.fills == 1);
    CHECK(f[11] == 1.5f);
    nitro::Tensor v = nitro::Tensor::from({1.f, 2.f}, {2});
    CHECK(mem.copies_in == 1);
    CHECK(v[1] == 2.f);
    // the host reads a tensor on a device through its memory: item, to_vector, clone (to the host)
    CHECK(v.memory() == &mem);
    CHECK(v.to_vector() == std::vector<float>{1.f, 2.f});
    CHECK(mem.copies_out == 1);
    nitro::Tensor kept = v.clone();
    CHECK(mem.copies_out == 2);
    CHECK(kept.device() == nitro::device_kind::cpu);
    CHECK(kept.owns_memory());
    CHECK(kept[0] == 1.f);
    CHECK(nitro::sum(v).item() == 3.f);
    CHECK(mem.copies_out == 3);
    CHECK(nitro::Index::full({2}, 7).device() == nitro::device_kind::cuda);
    CHECK(mem.fills == 2);
    // a closure is host memory the host runs: not a byte of it in the device's chunks
    const std::size_t before = data.bytes_in_use();
    const int out = t.new_var(2 * sizeof(float));
    t.record([out](nitro::tape& tp) { (void)tp.grad_if_any<float>(out); });
    CHECK(data.bytes_in_use() == before);
    CHECK(closures.bytes_in_use() > 0);
    const int other = t.new_var(8 * sizeof(float));
    float* g = t.grad<float>(other);  // zeroed by the device's memory
    CHECK(mem.zeros == 1);
    CHECK(mem.holds(g));
    CHECK(g[7] == 0.f);
    t.backward<float>(out, 2.f);  // a fresh output gradient: filled with the seed, not zeroed and added
    CHECK(mem.fills == 3);
    CHECK(mem.zeros == 1);
    CHECK(t.grad_if_any<float>(out)[1] == 2.f);
    t.backward<float>(out, 1.f);  // one that exists: the seed is added
    CHECK(mem.adds == 1);
    CHECK(t.grad_if_any<float>(out)[0] == 3.f);
    t.clear();
  }
  CHECK(mem.allocations == mem.deallocations);  // the arena gave every chunk back
  CHECK(mem.chunks.empty());
  // outside a step a tensor owns host memory, as before
  CHECK(nitro::Tensor::full({2}, 1.f).device() == nitro::device_kind::cpu);
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

namespace {
// A backend whose kernels are the CPU's on a memory said to be elsewhere (elsewhere_ops, or
// copy_counting_ops below).
struct elsewhere_backend {
  static constexpr nitro::device_kind device = nitro::device_kind::cpu;
  nitro::device_ops* kernels = nullptr;
  char const* name() const noexcept { return "elsewhere"; }
  std::string describe() const { return "elsewhere"; }
  template <class T>
  nitro::basic_tensor<T> to_device(std::string_view, nitro::basic_tensor<T> const& host) { return host; }
  nitro::device_ops& ops() const noexcept { return *kernels; }
};
}  // namespace

TEST_CASE("the handle's step arena is its backend's memory: every intermediate and gradient there, each backward seeded by it; the same losses") {
  elsewhere_ops k;
  nitro::Nitro h(Probe{}, nitro::max_epochs = 2, nitro::logger = nitro::no_loggers, nitro::device = elsewhere_backend{&k});
  h.train(false);
  CHECK(k.mem.allocations >= 1);
  CHECK(seen_output_device == nitro::device_kind::cuda);  // the model's output was made in the backend's memory
  CHECK(k.mem.holds(seen_output));
  CHECK(k.mem.fills == 2 * 4);  // each of the 8 steps' backward: the loss's gradient is the seed
  CHECK(k.mem.zeros >= 8);      // and each step's intermediate gradients start at zero there
  CHECK(k.mem.adds == 0);
  CHECK(h.step_memory().device() == nitro::device_kind::cuda);
  h.evaluate("valid");
  CHECK(seen_output_device == nitro::device_kind::cuda);
  // the same run on the plain CPU backend: the same weights, bit for bit (only where memory is
  // said to be changed)
  nitro::Nitro c(Probe{}, nitro::max_epochs = 2, nitro::logger = nitro::no_loggers);
  c.train(false);
  CHECK(seen_output_device == nitro::device_kind::cpu);
  float const* a = h.param_buffer().values();
  float const* b = c.param_buffer().values();
  const auto n = std::remove_cvref_t<decltype(h.param_buffer())>::size;
  CHECK(std::equal(a, a + n, b));
}

namespace {
// Probe with a model state (batch norm's running statistics) and, with Sam, SAM's two passes.
template <bool Sam>
struct Stateful {
  std::int64_t batch_size = 8;
  auto build_data() const { return Probe{}.build_data(); }
  auto loss(nitro::Tensor const& yhat, Target const& t) const { return nitro::nn::mse(yhat, t.y); }
  auto build_model() const {
    return nitro::nn::chain(nitro::nn::dense<2, 4>(nitro::nn::tanh), nitro::nn::batch_norm<4>(), nitro::nn::dense<4, 1>());
  }
  auto forward(auto const& m, auto const& ps, auto const& st, In const& in) const {
    auto const& w = nitro::get<"weight">(nitro::get<"layer_1">(ps));
    seen_weight = w.data();  // where forward reads the weights
    seen_weight_device = w.device();
    return m(in.x, ps, st);
  }
  auto optimizer() const {
    if constexpr (Sam) return nitro::optim::sam(nitro::optim::adamw());
    else return nitro::optim::adamw();
  }
  static inline void const* seen_weight = nullptr;
  static inline nitro::device_kind seen_weight_device = nitro::device_kind::cpu;
};
NITRO_EXPERIMENT(Stateful<false>, batch_size);
NITRO_EXPERIMENT(Stateful<true>, batch_size);

template <bool Sam>
void device_copy_follows_the_cpu(int accum) {
  CAPTURE(Sam);
  CAPTURE(accum);
  using E = Stateful<Sam>;
  elsewhere_ops k;
  nitro::Nitro h(E{}, nitro::max_epochs = 2, nitro::accum = accum, nitro::logger = nitro::no_loggers, nitro::device = elsewhere_backend{&k});
  auto const& host = h.param_buffer();
  const int steps = 2 * 4 / accum, batches = 2 * 4;
  h.train(false);
  // forward read the weights from the copy in the backend's memory, never the host's buffer
  CHECK(E::seen_weight_device == nitro::device_kind::cuda);
  CHECK(k.mem.holds(E::seen_weight));
  const bool in_host_buffer = E::seen_weight >= static_cast<void const*>(host.values()) &&
                              E::seen_weight < static_cast<void const*>(host.values() + std::remove_cvref_t<decltype(host)>::size);
  CHECK_FALSE(in_host_buffer);
  // what crossed: the values at each step's first micro-batch (SAM: at every micro-batch, and again
  // for w + e), the state at every micro-batch, and per epoch's valid evaluation both once; per
  // step the gradient (SAM: also each micro-batch's first pass); the state's two running leaves per
  // micro-batch
  const int uploads_training = (Sam ? 2 * batches : steps) + batches + 2 * 2;
  const int downloads_training = steps * (1 + (Sam ? accum : 0)) + batches * 2;
  CHECK(h.device_crossings().uploads == uploads_training);
  CHECK(h.device_crossings().downloads == downloads_training);
  // the same run on the CPU: the same weights and state, bit for bit
  nitro::Nitro c(E{}, nitro::max_epochs = 2, nitro::accum = accum, nitro::logger = nitro::no_loggers);
  c.train(false);
  CHECK(c.device_crossings().uploads == 0);
  CHECK(c.device_crossings().downloads == 0);
  const auto n = std::remove_cvref_t<decltype(h.param_buffer())>::size;
  CHECK(std::equal(host.values(), host.values() + n, c.param_buffer().values()));
  const auto ns = std::remove_cvref_t<decltype(h.state_buffer())>::size;
  CHECK(std::remove_cvref_t<decltype(h.state_buffer())>::count == 8);
  CHECK(std::equal(h.state_buffer().values(), h.state_buffer().values() + ns, c.state_buffer().values()));
  // an evaluation sends the weights once, and reads the host's weights of now, whoever wrote them
  CHECK(h.evaluate("valid").at("loss") == doctest::Approx(c.evaluate("valid").at("loss")).epsilon(1e-6));
  CHECK(h.device_crossings().uploads == uploads_training + 2);
  h.param_buffer().values()[0] += 1.0f;
  c.param_buffer().values()[0] += 1.0f;
  CHECK(h.evaluate("valid").at("loss") == doctest::Approx(c.evaluate("valid").at("loss")).epsilon(1e-6));
}
}  // namespace

TEST_CASE("parameters on a device: forward reads their copy in the backend's memory, the gradient crosses back once a step; the CPU's weights, bit for bit") {
  device_copy_follows_the_cpu<false>(1);
  device_copy_follows_the_cpu<false>(2);
  device_copy_follows_the_cpu<true>(1);
  device_copy_follows_the_cpu<true>(2);
}

namespace {
struct ClassBatch { BOOST_HANA_DEFINE_STRUCT(ClassBatch, (nitro::Tensor, x), (nitro::Tensor, label)); };
struct LabelIn { BOOST_HANA_DEFINE_STRUCT(LabelIn, (nitro::Tensor, label)); };
struct ClassMetrics {
  BOOST_HANA_DEFINE_STRUCT(ClassMetrics, (nitro::mean_of, acc), (nitro::sum_of<nitro::Tensor>, confusion),
                           (nitro::concat_of<nitro::Tensor>, logits));
};
// Three classes of points in the plane; valid is 37 samples: batches of 8, 8, 8, 8 and 5.
struct Classify {
  std::int64_t batch_size = 8;
  auto build_data() const {
    auto make = [](int n, int shift) {
      nitro::Tensor x = nitro::Tensor::owned({2, n}), label = nitro::Tensor::owned({n});
      for (int i = 0; i < n; ++i) {
        const int c = (i * 7 + shift) % 3;
        x(0, i) = float(c) + 0.3f * float((i * 5) % 4) - 0.4f;
        x(1, i) = float(2 - c) - 0.2f * float((i * 3) % 5);
        label[i] = float(c);
      }
      return ClassBatch{x, label};
    };
    return nitro::data::dataset<ClassBatch>{"three", {{"train", make(48, 0)}, {"valid", make(37, 1)}}, "classify"};
  }
  auto build_model() const { return nitro::nn::chain(nitro::nn::dense<2, 8>(nitro::nn::tanh), nitro::nn::dense<8, 3>()); }
  auto forward(auto const& m, auto const& ps, auto const& st, In const& in) const { return m(in.x, ps, st); }
  auto loss(nitro::Tensor const& y, LabelIn const& t) const { return nitro::nn::logitcrossentropy(y, t.label); }
  auto metrics(nitro::Tensor const& y, LabelIn const& t) const {
    return ClassMetrics{{nitro::nn::correct(y, t.label), double(t.label.numel())}, {nitro::nn::confusion_matrix(y, t.label)}, {y}};
  }
};
NITRO_EXPERIMENT(Classify, batch_size);
struct ClassifyOnHost : Classify {
  nitro::residency metrics_residency(nitro::hook::metrics) const { return nitro::residency::host; }
};
NITRO_EXPERIMENT(ClassifyOnHost, batch_size);
// The CPU's kernels on elsewhere_memory, counting the copies (dst += src: the accumulator's adds).
struct copy_counting_ops final : nitro::cpu::ops {
  elsewhere_memory mem;
  int copies = 0, accumulating = 0;
  nitro::device_memory& memory() noexcept override { return mem; }
  void copy(std::int64_t r, std::int64_t c, float const* s, std::int64_t ls, float* d, std::int64_t ld, bool acc) override {
    ++copies;
    accumulating += acc;
    nitro::cpu::ops::copy(r, c, s, ls, d, ld, acc);
  }
};
}  // namespace

TEST_CASE("metrics residency: on a device the split's metrics add up there and cross once; on the host each batch's values cross; the same values") {
  // the reference: the CPU backend, whose values are host memory (nothing crosses)
  nitro::Nitro cpu(Classify{}, nitro::max_epochs = 2, nitro::logger = nitro::no_loggers);
  cpu.train(false);
  const nitro::metric_values want = cpu.evaluate("valid");
  CHECK(want.host_crossings == 0);
  CHECK(want.batches == 5);

  copy_counting_ops k;
  nitro::Nitro dev(Classify{}, nitro::max_epochs = 2, nitro::logger = nitro::no_loggers, nitro::device = elsewhere_backend{&k});
  dev.train(false);
  const int out_before = k.mem.copies_out, adds_before = k.accumulating;
  const nitro::metric_values got = dev.evaluate("valid");
  CHECK(got.accumulated_on == nitro::residency::device);
  CHECK(got.host_crossings == 1);             // the split's one read-back
  CHECK(k.mem.copies_out - out_before == 1);  // and the memory saw nothing else leave
  // per batch after the first: the loss, the count and the matrix added on the device
  CHECK(k.accumulating - adds_before == 3 * (5 - 1));
  CHECK(got.at("acc") == want.at("acc"));     // counts: exact in float
  CHECK(got.at("loss") == doctest::Approx(want.at("loss")).epsilon(1e-6));  // float sums on the device, double on the host
  CHECK(got.tensor("confusion").to_vector() == want.tensor("confusion").to_vector());
  CHECK(got.tensor("logits").shape() == nitro::shape{3, 37});
  CHECK(got.tensor("logits").to_vector() == want.tensor("logits").to_vector());  // appended in order, bit for bit
  double total = 0;
  for (float v : got.tensor("confusion").to_vector()) total += v;
  CHECK(total == 37);

  // the next split starts from zero: the same values again, one crossing again
  const nitro::metric_values again = dev.evaluate("valid");
  CHECK(again.host_crossings == 1);
  CHECK(again.at("acc") == got.at("acc"));
  CHECK(again.tensor("confusion").to_vector() == got.tensor("confusion").to_vector());
  CHECK(again.tensor("logits").to_vector() == got.tensor("logits").to_vector());

  // host residency: every batch's loss, count, matrix and logits cross as they are added
  copy_counting_ops kh;
  nitro::Nitro host(ClassifyOnHost{}, nitro::max_epochs = 2, nitro::logger = nitro::no_loggers, nitro::device = elsewhere_backend{&kh});
  host.train(false);
  const int host_out_before = kh.mem.copies_out;
  const nitro::metric_values on_host = host.evaluate("valid");
  CHECK(on_host.accumulated_on == nitro::residency::host);
  CHECK(on_host.host_crossings == 4 * 5);
  CHECK(kh.mem.copies_out - host_out_before == 4 * 5);
  CHECK(on_host.at("acc") == want.at("acc"));
  CHECK(on_host.at("loss") == want.at("loss"));  // each batch's loss read back and summed in double, as on the CPU
  CHECK(on_host.tensor("confusion").to_vector() == want.tensor("confusion").to_vector());
  CHECK(on_host.tensor("logits").to_vector() == want.tensor("logits").to_vector());
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
