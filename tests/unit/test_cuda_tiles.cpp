// The CUDA backend's tile math, run on the CPU: the layouts of the tensor-core tiles, the block
// GEMM, the fully fused MLP (forward and backward, FP32 and TF32), the fused loss, the optimizer's
// update of one element and the model traits — each against the Eigen backend (nitro's layers,
// losses and tape). The kernels in kernels/ run these same functions on the GPU; tests/gpu/ checks
// the kernels themselves where a device is present.
#include <nitro/nitro.hpp>
#include <nitro/tensor/cuda/mlp_tile.hpp>
#include <nitro/nn/cuda/mlp_traits.hpp>
#include <nitro/tensor/cuda/optimizer_math.hpp>
#include <nitro/tensor/cuda/pointwise.hpp>
#include <nitro/tensor/cuda/scalars.hpp>
#include <nitro/tensor/cuda/tile.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <vector>

namespace cu = nitro::cuda;
namespace tl = nitro::cuda::tile;
using nitro::shape;
using nitro::Tensor;

namespace {

std::vector<float> random_vector(std::size_t n, nitro::rng& g, double lo = -1, double hi = 1) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(g.uniform(lo, hi));
  return v;
}

// max |a - b| / max(|b|, floor) over the elements: the relative error, with a floor so that
// entries near zero are judged on the scale of the whole array
double max_rel_error(float const* a, float const* b, std::size_t n) {
  double scale = 0;
  for (std::size_t i = 0; i < n; ++i) scale = std::max(scale, double(std::fabs(b[i])));
  const double floor = std::max(1e-6, 1e-2 * scale);
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])) / std::max(double(std::fabs(b[i])), floor));
  return worst;
}

// ||a - b|| / ||b||: the error of a whole array, for TF32 results in relu networks, where a pre-
// activation that TF32 moves across zero changes single gradient entries completely
double norm_rel_error(float const* a, float const* b, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

template <class Store>
std::int64_t offset_of(std::string_view keypath) {
  for (auto const& li : Store::leaves)
    if (li.keypath == keypath) return li.offset;
  return -1;
}

}  // namespace

// ---- TF32 and the tile layouts --------------------------------------------------------------------

TEST_CASE("round_tf32 keeps 10 mantissa bits, rounding to nearest with ties away from zero") {
  CHECK(cu::round_tf32(1.0f) == 1.0f);
  CHECK(cu::round_tf32(-2.5f) == -2.5f);
  const float ulp = std::ldexp(1.0f, -10);  // the TF32 step just above 1
  CHECK(cu::round_tf32(1.0f + ulp) == 1.0f + ulp);
  CHECK(cu::round_tf32(1.0f + 0.49f * ulp) == 1.0f);
  CHECK(cu::round_tf32(1.0f + 0.5f * ulp) == 1.0f + ulp);    // a tie goes away from zero
  CHECK(cu::round_tf32(-1.0f - 0.5f * ulp) == -1.0f - ulp);
  CHECK(cu::round_tf32(1.0f + 0.51f * ulp) == 1.0f + ulp);
  CHECK(std::isinf(cu::round_tf32(INFINITY)));
  CHECK(std::isnan(cu::round_tf32(NAN)));
  nitro::rng g(3);
  for (int i = 0; i < 1000; ++i) {
    const float x = static_cast<float>(g.uniform(-100, 100));
    const float r = cu::round_tf32(x);
    std::uint32_t u;
    std::memcpy(&u, &r, 4);
    CHECK((u & 0x1fffu) == 0u);
    CHECK(std::fabs(r - x) <= std::fabs(x) * std::ldexp(1.0f, -11) * 1.0001f);
  }
}

TEST_CASE("the m16n8k8 register layouts cover each element of A, B and C exactly once") {
  int a[16][8] = {}, b[8][8] = {}, c[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) ++a[tl::a_row(lane, i)][tl::a_col(lane, i)];
    for (int i = 0; i < 2; ++i) ++b[tl::b_row(lane, i)][tl::b_col(lane, i)];
    for (int i = 0; i < 4; ++i) ++c[tl::c_row(lane, i)][tl::c_col(lane, i)];
  }
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < 8; ++k) CHECK(a[r][k] == 1);
  for (int k = 0; k < 8; ++k)
    for (int n = 0; n < 8; ++n) CHECK(b[k][n] == 1);
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) CHECK(c[r][n] == 1);
  // the PTX ISA's examples: lane 5 is group 1, thread 1
  CHECK(tl::a_row(5, 0) == 1);
  CHECK(tl::a_col(5, 2) == 5);
  CHECK(tl::b_row(5, 1) == 5);
  CHECK(tl::c_row(5, 3) == 9);
  CHECK(tl::c_col(5, 3) == 3);
}

TEST_CASE("a gemm plan gives every tile of the product to exactly one warp") {
  auto check = [](auto plan, int warps) {
    using P = decltype(plan);
    std::vector<int> hits(static_cast<std::size_t>(P::m * P::n), 0);
    for (int w = 0; w < P::active; ++w)
      for (int j = 0; j < P::nt; ++j)
        for (int r = 0; r < 16; ++r)
          for (int c = 0; c < 8; ++c) ++hits[static_cast<std::size_t>((P::row0(w) + r) + (P::col0(w) + 8 * j + c) * P::m)];
    CHECK(P::active <= warps);
    CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
  };
  check(tl::gemm_plan<128, 64, 128, 8>{}, 8);
  check(tl::gemm_plan<16, 64, 128, 8>{}, 8);
  check(tl::gemm_plan<16, 16, 128, 4>{}, 4);
  check(tl::gemm_plan<48, 128, 48, 4>{}, 4);
  check(tl::gemm_plan<64, 128, 64, 4>{}, 4);
  check(tl::gemm_plan<32, 64, 128, 4>{}, 4);
  static_assert(tl::gemm_plan<128, 128, 64, 8>::nt == 16);
  static_assert(tl::gemm_plan<16, 128, 64, 8>::active == 8);
}

TEST_CASE("the block GEMM, emulated warp by warp, equals Eigen's product (FP32 exactly, TF32 to its precision)") {
  nitro::rng g(5);
  constexpr int M = 64, N = 32, K = 48;
  auto a = random_vector(M * K, g), b = random_vector(K * N, g);
  Eigen::Map<Eigen::MatrixXf> A(a.data(), M, K), B(b.data(), K, N);
  Eigen::MatrixXf want = A * B;
  using P = tl::gemm_plan<M, N, K, 4>;
  tl::emulated_block blk(4);
  std::vector<float> got(M * N);
  auto run = [&](auto math) {
    auto acc = blk.regs<P::nt * 4>();
    tl::block_gemm<decltype(math)::value, P>(blk, acc, tl::col_major{a.data(), M}, tl::col_major{b.data(), K}, false);
    tl::block_epilogue<P>(blk, acc, [&](int r, int c, float v) { got[static_cast<std::size_t>(r + c * M)] = v; });
    return max_rel_error(got.data(), want.data(), got.size());
  };
  CHECK(run(std::integral_constant<tl::math, tl::math::fp32>{}) < 1e-5);
  const double tf32 = run(std::integral_constant<tl::math, tl::math::tf32>{});
  CHECK(tf32 < 3e-2);  // 10-bit mantissas: ~5e-4 per product, judged against a floor of 1% of the largest entry
  CHECK(tf32 > 1e-6);  // TF32 really rounds: the result is not the FP32 one
  // TF32 with operands already representable in TF32 is FP32-exact up to summation order
  for (auto& x : a) x = cu::round_tf32(x);
  for (auto& x : b) x = cu::round_tf32(x);
  want = A * B;
  CHECK(run(std::integral_constant<tl::math, tl::math::tf32>{}) < 1e-5);
  // a row-major B view: B(k, n) at p[n + k * ld]
  std::vector<float> bt(K * N);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) bt[static_cast<std::size_t>(n + k * N)] = b[static_cast<std::size_t>(k + n * K)];
  auto acc = blk.regs<P::nt * 4>();
  tl::block_gemm<tl::math::fp32, P>(blk, acc, tl::col_major{a.data(), M}, tl::row_major{bt.data(), N}, false);
  tl::block_epilogue<P>(blk, acc, [&](int r, int c, float v) { got[static_cast<std::size_t>(r + c * M)] = v; });
  CHECK(max_rel_error(got.data(), want.data(), got.size()) < 1e-5);
}

// ---- the fully fused MLP against nitro's dense layers and tape --------------------------------------

namespace {

// What the Eigen backend computes for a model, and what the fused MLP's tile programs compute for
// the same parameters and data: outputs, parameter gradients, input gradient.
struct mlp_comparison {
  double y = 0, dparams = 0, dx = 0;        // max relative error
  double y_n = 0, dparams_n = 0, dx_n = 0;  // relative error of the whole array
};

// dz_mode: the backward program writes each layer's gradient (args.dz) and the weight gradients are
// formed here as dz_l input_l^T, the GEMM the device leaves to cuBLASLt in that mode.
template <class Cfg, class Model>
mlp_comparison compare_fused_mlp(Model const& model, std::int64_t B, std::uint64_t seed, bool dz_mode = false) {
  using Store = nitro::param_store<typename Model::param_spec>;
  constexpr std::int64_t In = Cfg::in, Out = Cfg::out;
  nitro::rng g(seed);
  Store store(true);
  {
    auto ps = store.view();
    nitro::nn::layer_state<Model> st;
    model.init(ps, st, g);
  }
  auto x = random_vector(static_cast<std::size_t>(In * B), g);
  auto r = random_vector(static_cast<std::size_t>(Out * B), g);  // loss = sum(y .* r), so dy = r

  // the Eigen backend
  std::vector<float> y_ref(static_cast<std::size_t>(Out * B)), dx_ref(static_cast<std::size_t>(In * B), 0.0f);
  {
    nitro::arena mem;
    nitro::tape tp(mem);
    nitro::step_context ctx{&mem, &tp, true, 1, 0};
    nitro::context_scope scope(ctx);
    store.zero_grads();
    auto ps = store.view(tp);
    nitro::nn::layer_state<Model> st;
    Tensor xt(x.data(), shape{In, B}, tp.leaf(dx_ref.data(), dx_ref.size() * sizeof(float)));
    Tensor rt(r.data(), shape{Out, B});
    Tensor y = model(xt, ps, st).first;
    Tensor loss = nitro::sum(y * rt);
    tp.backward<float>(loss.var(), 1.0f);
    std::copy(y.data(), y.data() + y.numel(), y_ref.begin());
  }
  std::vector<float> grads_ref(store.grads(), store.grads() + Store::size);

  // the fused MLP's tile programs, every tile of the batch in turn
  cu::mlp_args a;
  std::vector<std::vector<float>> saved(Cfg::layers);
  std::vector<float> y(static_cast<std::size_t>(Out * B)), z_out(static_cast<std::size_t>(Out * B)), dx(static_cast<std::size_t>(In * B));
  std::vector<float> grads(static_cast<std::size_t>(Store::size), 0.0f);
  a.x = x.data();
  a.y = y.data();
  a.z_out = z_out.data();
  a.dy = r.data();
  a.dx = dx.data();
  a.batch = B;
  for (int l = 0; l < Cfg::layers; ++l) {
    const std::string name = "layer_" + std::to_string(l + 1);
    const auto wo = offset_of<Store>(name + ".weight"), bo = offset_of<Store>(name + ".bias");
    a.w[l] = store.values() + wo;
    a.dw[l] = grads.data() + wo;
    a.b[l] = bo >= 0 ? store.values() + bo : nullptr;
    a.db[l] = bo >= 0 ? grads.data() + bo : nullptr;
    if (l < Cfg::layers - 1) {
      saved[static_cast<std::size_t>(l)].assign(static_cast<std::size_t>(Cfg::width * B), 0.0f);
      a.saved[l] = saved[static_cast<std::size_t>(l)].data();
    }
  }
  std::vector<std::vector<float>> dz(Cfg::layers);
  if (dz_mode)
    for (int l = 0; l < Cfg::layers; ++l) {
      dz[static_cast<std::size_t>(l)].assign(static_cast<std::size_t>(Cfg::out_of(l) * B), 0.0f);
      a.dz[l] = dz[static_cast<std::size_t>(l)].data();
    }
  cu::emulate_mlp_forward<Cfg>(a, true);
  cu::emulate_mlp_backward<Cfg>(a);
  if (dz_mode)
    for (int l = 0; l < Cfg::layers; ++l) {
      const std::int64_t rows = Cfg::out_of(l), cols = Cfg::in_of(l);
      float const* input = l == 0 ? x.data() : saved[static_cast<std::size_t>(l - 1)].data();
      Eigen::Map<Eigen::MatrixXf> D(dz[static_cast<std::size_t>(l)].data(), rows, B), H(const_cast<float*>(input), cols, B);
      Eigen::Map<Eigen::MatrixXf>(a.dw[l], rows, cols) += D * H.transpose();
    }

  mlp_comparison c;
  c.y = max_rel_error(y.data(), y_ref.data(), y.size());
  c.dparams = max_rel_error(grads.data(), grads_ref.data(), grads.size());
  c.dx = max_rel_error(dx.data(), dx_ref.data(), dx.size());
  c.y_n = norm_rel_error(y.data(), y_ref.data(), y.size());
  c.dparams_n = norm_rel_error(grads.data(), grads_ref.data(), grads.size());
  c.dx_n = norm_rel_error(dx.data(), dx_ref.data(), dx.size());
  return c;
}

}  // namespace

TEST_CASE("fused MLP, FP32: the fashion_mlp network (784 -> 128 -> 128 -> 10, relu) equals the Eigen backend") {
  auto model = nitro::nn::chain(nitro::nn::dense<784, 128>(nitro::nn::relu), nitro::nn::dense<128, 128>(nitro::nn::relu),
                                nitro::nn::dense<128, 10>());
  using Cfg = cu::fused_mlp_config_t<decltype(model), tl::math::fp32>;
  static_assert(Cfg::in == 784 && Cfg::width == 128 && Cfg::out == 10 && Cfg::hidden == 1);
  const auto c = compare_fused_mlp<Cfg>(model, 100, 7);  // 100 samples: one partial tile
  INFO("y " << c.y << "  dparams " << c.dparams << "  dx " << c.dx);
  CHECK(c.y < 1e-4);
  CHECK(c.dparams < 1e-4);
  CHECK(c.dx < 1e-4);
  // the split mode: per-layer gradients out of the kernel, weight gradients as one GEMM per layer
  const auto d = compare_fused_mlp<Cfg>(model, 150, 7, true);
  INFO("dz mode: y " << d.y << "  dparams " << d.dparams << "  dx " << d.dx);
  CHECK(d.dparams < 1e-4);
  CHECK(d.dx < 1e-4);
}

TEST_CASE("fused MLP, TF32: the same network within TF32's precision") {
  auto model = nitro::nn::chain(nitro::nn::dense<784, 128>(nitro::nn::relu), nitro::nn::dense<128, 128>(nitro::nn::relu),
                                nitro::nn::dense<128, 10>());
  using Cfg = cu::fused_mlp_config_t<decltype(model), tl::math::tf32>;
  const auto c = compare_fused_mlp<Cfg>(model, 70, 8);
  INFO("y " << c.y << "  dparams " << c.dparams_n << "  dx " << c.dx_n << " (relative error of the arrays)");
  CHECK(c.y < 5e-2);
  CHECK(c.dparams_n < 3e-2);  // element-wise, a relu that TF32 flips changes an entry completely
  CHECK(c.dx_n < 3e-2);
  // with a smooth activation every entry stays within TF32's precision
  auto smooth = nitro::nn::chain(nitro::nn::dense<784, 128>(nitro::nn::tanh), nitro::nn::dense<128, 128>(nitro::nn::tanh),
                                 nitro::nn::dense<128, 10>());
  const auto s = compare_fused_mlp<cu::fused_mlp_config_t<decltype(smooth), tl::math::tf32>>(smooth, 70, 8);
  INFO("tanh: y " << s.y << "  dparams " << s.dparams << "  dx " << s.dx);
  CHECK(s.y < 5e-2);
  CHECK(s.dparams < 5e-2);
  CHECK(s.dx < 5e-2);
}

TEST_CASE("fused MLP: every activation, several widths and depths, tails of partial tiles") {
  SUBCASE("width 32, three hidden tanh layers, sigmoid output, 200 samples (two tiles, the second partial)") {
    auto model = nitro::nn::chain(nitro::nn::dense<40, 32>(nitro::nn::tanh), nitro::nn::dense<32, 32>(nitro::nn::tanh),
                                  nitro::nn::dense<32, 32>(nitro::nn::tanh), nitro::nn::dense<32, 32>(nitro::nn::tanh),
                                  nitro::nn::dense<32, 5>(nitro::nn::sigmoid));
    const auto c = compare_fused_mlp<cu::fused_mlp_config_t<decltype(model), tl::math::fp32>>(model, 200, 9);
    INFO("y " << c.y << "  dparams " << c.dparams << "  dx " << c.dx);
    CHECK(c.y < 1e-4);
    CHECK(c.dparams < 1e-4);
    CHECK(c.dx < 1e-4);
  }
  SUBCASE("width 16, gelu hidden and gelu output (pre-activations saved), 33 samples") {
    auto model = nitro::nn::chain(nitro::nn::dense<16, 16>(nitro::nn::gelu), nitro::nn::dense<16, 16>(nitro::nn::gelu),
                                  nitro::nn::dense<16, 16>(nitro::nn::gelu));
    const auto c = compare_fused_mlp<cu::fused_mlp_config_t<decltype(model), tl::math::fp32>>(model, 33, 10);
    INFO("y " << c.y << "  dparams " << c.dparams << "  dx " << c.dx);
    CHECK(c.y < 1e-4);
    CHECK(c.dparams < 1e-4);
    CHECK(c.dx < 1e-4);
  }
  SUBCASE("width 48 without biases, no hidden layer, 130 samples, TF32") {
    auto model = nitro::nn::chain(nitro::nn::dense<20, 48, false>(nitro::nn::relu), nitro::nn::dense<48, 24, false>());
    using Cfg = cu::fused_mlp_config_t<decltype(model), tl::math::tf32>;
    static_assert(Cfg::hidden == 0 && Cfg::out_p == 32);
    const auto c = compare_fused_mlp<Cfg>(model, 130, 11);
    INFO("y " << c.y << "  dparams " << c.dparams_n << "  dx " << c.dx_n);
    CHECK(c.y < 5e-2);
    CHECK(c.dparams_n < 1e-2);
    CHECK(c.dx_n < 3e-2);
  }
  SUBCASE("width 64, relu, 128 samples exactly (one full tile)") {
    auto model = nitro::nn::chain(nitro::nn::dense<64, 64>(nitro::nn::relu), nitro::nn::dense<64, 64>(nitro::nn::relu),
                                  nitro::nn::dense<64, 10>());
    const auto c = compare_fused_mlp<cu::fused_mlp_config_t<decltype(model), tl::math::fp32>>(model, 128, 12);
    INFO("y " << c.y << "  dparams " << c.dparams << "  dx " << c.dx);
    CHECK(c.y < 1e-4);
    CHECK(c.dparams < 1e-4);
    CHECK(c.dx < 1e-4);
  }
}

// ---- the fused loss of one sample ------------------------------------------------------------------

TEST_CASE("softmax_xent: loss, gradient and correct count equal logitcrossentropy and correct_count, with smoothing") {
  nitro::rng g(21);
  constexpr int C = 10, B = 37;
  auto x = random_vector(C * B, g, -4, 4);
  std::vector<float> onehot(C * B, 0.0f), index(B), soft(C * B);
  for (int s = 0; s < B; ++s) {
    const int k = static_cast<int>(g.below(C));
    index[static_cast<std::size_t>(s)] = static_cast<float>(k);
    onehot[static_cast<std::size_t>(k + s * C)] = 1.0f;
    float sum = 0;
    for (int i = 0; i < C; ++i) sum += soft[static_cast<std::size_t>(i + s * C)] = static_cast<float>(g.uniform());
    for (int i = 0; i < C; ++i) soft[static_cast<std::size_t>(i + s * C)] /= sum;
  }
  for (float smoothing : {0.0f, 0.05f, 0.3f}) {
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<float> const& target = kind == 0 ? onehot : kind == 1 ? index : soft;
      const shape ts = kind == 1 ? shape{1, B} : shape{C, B};
      // the Eigen backend
      nitro::arena mem;
      nitro::tape tp(mem);
      nitro::step_context ctx{&mem, &tp, true, 1, 0};
      nitro::context_scope scope(ctx);
      std::vector<float> gref(C * B, 0.0f);
      Tensor xt(x.data(), shape{C, B}, tp.leaf(gref.data(), gref.size() * sizeof(float)));
      Tensor tt(const_cast<float*>(target.data()), ts);
      Tensor loss = nitro::nn::logitcrossentropy(xt, tt, smoothing);
      tp.backward<float>(loss.var(), 1.0f);
      const float correct_ref = nitro::nn::correct_count(xt, tt);
      // the device's per-sample function
      std::vector<float> grad(C * B);
      double total = 0, correct = 0;
      for (int s = 0; s < B; ++s) {
        float const* tc = kind == 1 ? nullptr : target.data() + s * C;
        const int k = kind == 1 ? static_cast<int>(target[static_cast<std::size_t>(s)]) : -1;
        auto r = cu::softmax_xent(x.data() + s * C, C, tc, k, smoothing, 1.0f / B, grad.data() + s * C);
        total += r.loss;
        correct += r.correct ? 1 : 0;
      }
      INFO("smoothing " << smoothing << ", target kind " << kind);
      CHECK(total / B == doctest::Approx(loss.item()).epsilon(1e-5));
      CHECK(max_rel_error(grad.data(), gref.data(), grad.size()) < 1e-4);
      CHECK(correct == correct_ref);
    }
  }
}

TEST_CASE("the activations' forward and backward equal the Eigen backend's") {
  nitro::rng g(22);
  auto z = random_vector(200, g, -3, 3);
  auto dy = random_vector(200, g);
  auto check = [&](auto layer_act, auto kind) {
    using A = cu::act_math<decltype(kind)::value>;
    nitro::arena mem;
    nitro::tape tp(mem);
    nitro::step_context ctx{&mem, &tp, true, 1, 0};
    nitro::context_scope scope(ctx);
    std::vector<float> gref(200, 0.0f);
    Tensor zt(z.data(), shape{200}, tp.leaf(gref.data(), gref.size() * sizeof(float)));
    Tensor y = decltype(layer_act)::apply(zt);
    Tensor loss = nitro::sum(y * Tensor(dy.data(), shape{200}));
    tp.backward<float>(loss.var(), 1.0f);
    std::vector<float> yv(200), gv(200);
    for (int i = 0; i < 200; ++i) {
      yv[static_cast<std::size_t>(i)] = A::forward(z[static_cast<std::size_t>(i)]);
      gv[static_cast<std::size_t>(i)] = A::backward(dy[static_cast<std::size_t>(i)], A::needs_pre ? z[static_cast<std::size_t>(i)] : yv[static_cast<std::size_t>(i)]);
    }
    INFO(std::string(cu::to_string(decltype(kind)::value)));
    CHECK(max_rel_error(yv.data(), y.data(), 200) < 5e-5);  // Eigen vectorises tanh and the logistic with its own approximations
    CHECK(max_rel_error(gv.data(), gref.data(), 200) < 5e-5);
  };
  using K = cu::activation_kind;
  check(nitro::nn::relu, std::integral_constant<K, K::relu>{});
  check(nitro::nn::tanh, std::integral_constant<K, K::tanh>{});
  check(nitro::nn::sigmoid, std::integral_constant<K, K::sigmoid>{});
  check(nitro::nn::gelu, std::integral_constant<K, K::gelu>{});
  check(nitro::nn::identity, std::integral_constant<K, K::identity>{});
}

// ---- the optimizer's update of one element -----------------------------------------------------------
// The kernel's path (kernels/.../optimizer.cuh group_update): rule_step_at once, update_element per
// element, with the states gathered into the element's own array.
namespace {
template <class Rule>
void element_step(Rule const& r, cu::rule_refs_of<Rule> const& h, long long t, std::vector<float>& w, std::vector<float> const& g,
                  std::vector<std::vector<float>>& states, float const* anchor, std::vector<unsigned char> const& decay) {
  const cu::rule_step<Rule> k = cu::rule_step_at(r, h, nullptr, t);
  constexpr std::size_t S = Rule::states::size;
  for (std::size_t i = 0; i < w.size(); ++i) {
    float s[S > 0 ? S : 1];
    for (std::size_t j = 0; j < S; ++j) s[j] = states[j][i];
    if (anchor) cu::update_element<Rule, true>(k, w[i], g[i], s, anchor[i], decay[i] != 0);
    else cu::update_element<Rule, false>(k, w[i], g[i], s, 0.0f, decay[i] != 0);
    for (std::size_t j = 0; j < S; ++j) states[j][i] = s[j];
  }
}
}  // namespace

TEST_CASE("AdamW, element by element as the kernel runs it, follows torch.optim.AdamW (computed in double) for many steps") {
  nitro::rng g(31);
  constexpr int n = 257;
  auto p0 = random_vector(n, g);
  std::vector<double> p_ref(p0.begin(), p0.end()), m_ref(n, 0.0), v_ref(n, 0.0);
  std::vector<float> p = p0;
  std::vector<std::vector<float>> st(2, std::vector<float>(n, 0.0f));
  const std::vector<unsigned char> decay(n, 1);
  const double eta = 2e-3, b1 = 0.9, b2 = 0.99, eps = 1e-8, lambda = 0.05;
  const auto rule = nitro::optim::adamw({.beta1 = b1, .beta2 = b2, .eps = eps, .lambda = lambda});
  const auto h = cu::constant_refs(rule, eta, lambda);
  for (int t = 1; t <= 50; ++t) {
    auto grad = random_vector(n, g);
    for (int i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      // torch: p *= 1 - lr*wd; m, v updated; p -= lr * (m / (1 - b1^t)) / (sqrt(v) / sqrt(1 - b2^t) + eps)
      p_ref[k] *= 1 - eta * lambda;
      m_ref[k] = b1 * m_ref[k] + (1 - b1) * grad[k];
      v_ref[k] = b2 * v_ref[k] + (1 - b2) * double(grad[k]) * grad[k];
      p_ref[k] -= eta * (m_ref[k] / (1 - std::pow(b1, t))) / (std::sqrt(v_ref[k]) / std::sqrt(1 - std::pow(b2, t)) + eps);
    }
    element_step(rule, h, t, p, grad, st, nullptr, decay);
  }
  std::vector<float> pr(p_ref.begin(), p_ref.end());
  CHECK(max_rel_error(p.data(), pr.data(), n) < 1e-5);
}

TEST_CASE("SGD (momentum, Nesterov) and Lion follow their formulas element by element; decay pulls toward the anchor; masks select") {
  namespace optim = nitro::optim;
  auto one = [](auto const& rule, double eta, double lambda, long long t, float& p, float g, float* s, float anchor, bool decay) {
    const auto k = cu::rule_step_at(rule, cu::constant_refs(rule, eta, lambda), nullptr, t);
    cu::update_element<std::remove_cvref_t<decltype(rule)>, true>(k, p, g, s, anchor, decay);
  };
  auto momentum = optim::sgd({.momentum = 0.9});
  float p = 1.0f, m = 0.0f;
  one(momentum, 0.1, 0.5, 1, p, 2.0f, &m, 0.0f, false);  // PyTorch's first step: the buffer is the gradient itself
  CHECK(m == doctest::Approx(2.0));
  CHECK(p == doctest::Approx(1.0 - 0.1 * 2.0));
  one(momentum, 0.1, 0.5, 2, p, 1.0f, &m, 0.0f, false);
  CHECK(m == doctest::Approx(0.9 * 2.0 + 1.0));
  CHECK(p == doctest::Approx(0.8 - 0.1 * 2.8));
  one(optim::sgd({.momentum = 0.9, .dampening = 0.5}), 0.1, 0.5, 3, p, 1.0f, &m, 0.0f, false);
  CHECK(m == doctest::Approx(0.9 * 2.8 + 0.5));
  p = 1.0f;
  m = 0.0f;
  one(optim::sgd({.momentum = 0.9, .nesterov = true}), 0.1, 0.5, 1, p, 2.0f, &m, 0.0f, false);
  CHECK(p == doctest::Approx(1.0 - 0.1 * (2.0 + 0.9 * 2.0)));
  // decoupled decay toward an anchor of 3: p moves by eta lambda (p - 3), gradients aside
  p = 1.0f;
  one(optim::sgd(), 0.1, 0.5, 4, p, 0.0f, &m, 3.0f, true);
  CHECK(p == doctest::Approx(1.0 - 0.1 * 0.5 * (1.0 - 3.0)));
  // coupled L2 toward the anchor (chain(decayed_weights, sgd)): u = g + wd (w - 3)
  p = 1.0f;
  m = 0.0f;
  one(optim::chain(optim::decayed_weights(0.25), optim::sgd()), 0.1, 0.0, 1, p, 1.0f, &m, 3.0f, true);
  CHECK(p == doctest::Approx(1.0 - 0.1 * (1.0 + 0.25 * (1.0 - 3.0))));
  // lion: the sign of the interpolation, then the momentum update
  p = 0.5f;
  m = 1.0f;
  one(optim::lion({.beta1 = 0.9, .beta2 = 0.99}), 0.01, 0.0, 1, p, -20.0f, &m, 0.0f, false);  // 0.9 - 2 < 0: sign -1
  CHECK(p == doctest::Approx(0.51));
  CHECK(m == doctest::Approx(0.99 - 0.2));
  // masks: bit i of a word array; a null mask answers the default
  const std::uint32_t bits[2] = {0x5u, 0x80000000u};
  CHECK(cu::mask_bit(bits, 0, false));
  CHECK_FALSE(cu::mask_bit(bits, 1, true));
  CHECK(cu::mask_bit(bits, 2, false));
  CHECK(cu::mask_bit(bits, 63, false));
  CHECK(cu::mask_bit(nullptr, 7, true));
}

namespace {
// One step of a CPU rule as the optimizer program runs it (optim/program.hpp's run_blocks): block by
// block, u = g; the rule's block (optim::apply_rule); then decoupled decay toward the anchor on the
// decayed runs and the step.
template <class Rule>
void cpu_step(Rule const& r, std::int64_t t, double eta, double lambda, std::vector<float>& w, std::vector<float> const& g,
              std::vector<std::vector<float>>& states, float const* anchor, std::vector<unsigned char> const& decay) {
  namespace optim = nitro::optim;
  const auto k = r.prepare(r.values.data(), t);
  const auto wk = nitro::rule_math::decay_of(float(eta), float(eta * lambda));
  const auto n = static_cast<std::int64_t>(w.size());
  std::vector<float> u(g), scratch(optim::block_size);
  std::int64_t begin = 0;
  while (begin < n) {  // runs of equal decay, then blocks of them, as the program's runs
    std::int64_t end = begin;
    while (end < n && decay[std::size_t(end)] == decay[std::size_t(begin)] && end - begin < optim::block_size) ++end;
    std::vector<float*> st;
    for (auto& s : states) st.push_back(s.data() + begin);
    const optim::block b{u.data() + begin, w.data() + begin, anchor ? anchor + begin : nullptr, st.data(), scratch.data(), end - begin};
    auto W = optim::detail::arr(w.data() + begin, end - begin);
    auto U = optim::detail::arr(u.data() + begin, end - begin);
    const bool d = decay[std::size_t(begin)] != 0;
    if (anchor) {
      auto A = optim::detail::arr(anchor + begin, end - begin);
      if (d) optim::apply_rule<Rule, true, true>(k, b), nitro::rule_math::weight_step<true, true>(W, U, A, wk);
      else optim::apply_rule<Rule, false, true>(k, b), nitro::rule_math::weight_step<false, true>(W, U, A, wk);
    } else {
      if (d) optim::apply_rule<Rule, true, false>(k, b), nitro::rule_math::weight_step<true, false>(W, U, 0.0f, wk);
      else optim::apply_rule<Rule, false, false>(k, b), nitro::rule_math::weight_step<false, false>(W, U, 0.0f, wk);
    }
    begin = end;
  }
}

template <class Rule>
double backends_differ(Rule const& rule, double eta, double lambda, bool with_anchor, nitro::rng& gen) {
  const std::size_t n = 1037;  // two blocks and a tail that is no multiple of any vector width
  std::vector<float> w_cpu = random_vector(n, gen), w_dev = w_cpu;
  const std::vector<float> anchor = random_vector(n, gen);
  std::vector<unsigned char> decay(n);
  for (std::size_t i = 0; i < n; ++i) decay[i] = (i / 97) % 2 == 0;  // runs of decayed and undecayed leaves
  std::vector<std::vector<float>> st_cpu(Rule::states::size, std::vector<float>(n, 0.0f)), st_dev = st_cpu;
  const auto h = cu::constant_refs(rule, eta, lambda);
  double worst = 0;
  for (std::int64_t t = 1; t <= 6; ++t) {
    const std::vector<float> g = random_vector(n, gen);
    cpu_step(rule, t, eta, lambda, w_cpu, g, st_cpu, with_anchor ? anchor.data() : nullptr, decay);
    element_step(rule, h, t, w_dev, g, st_dev, with_anchor ? anchor.data() : nullptr, decay);
    worst = std::max(worst, max_rel_error(w_dev.data(), w_cpu.data(), n));
  }
  return worst;
}
}  // namespace

TEST_CASE("one arithmetic on both backends: the CPU program's blocks and the kernel's elements agree for every rule, chain, anchor and SAM wrapper") {
  namespace optim = nitro::optim;
  nitro::rng gen(11);
  // the constants are the same floats on either side; what differs is where the compiler fuses a
  // multiply and an add (-march=native; nvcc fuses too): a few ulps, grown by momentum over six steps.
  // Built with -ffp-contract=off the two sides agree bit for bit.
  constexpr double ulps = 1e-5;
  CHECK(backends_differ(optim::adamw({.lambda = 0.1}), 0.01, 0.1, false, gen) < ulps);
  CHECK(backends_differ(optim::adamw({.lambda = 0.1}), 0.01, 0.1, true, gen) < ulps);  // decay toward w0
  CHECK(backends_differ(optim::adam({.beta1 = 0.8, .beta2 = 0.99}), 0.01, 0.0, false, gen) < ulps);
  CHECK(backends_differ(optim::sgd({.momentum = 0.9, .dampening = 0.1, .nesterov = true}), 0.05, 0.01, false, gen) < ulps);
  CHECK(backends_differ(optim::sgd({.dampening = 0.5}), 0.05, 0.0, false, gen) < ulps);
  CHECK(backends_differ(optim::lion({.beta1 = 0.9, .beta2 = 0.99}), 0.001, 0.5, true, gen) < ulps);
  CHECK(backends_differ(optim::chain(optim::decayed_weights(1e-2), optim::sgd({.momentum = 0.9})), 0.05, 0.0, true, gen) < ulps);
  CHECK(backends_differ(optim::chain(optim::decayed_weights(1e-2), optim::adam(), optim::sgd({.momentum = 0.5})), 0.01, 0.0, false, gen) < ulps);
  CHECK(backends_differ(optim::sam(optim::adamw(), {.rho = 0.05}), 0.01, 0.01, false, gen) < ulps);
  CHECK(backends_differ(optim::asam(optim::chain(optim::decayed_weights(1e-3), optim::lion())), 0.001, 0.1, true, gen) < ulps);
  // and the comparison can fail: a different beta1 on one side is seen
  const auto h = cu::constant_refs(optim::adamw({.beta1 = 0.5}), 0.01, 0.1);
  std::vector<float> a = random_vector(64, gen), b = a;
  std::vector<std::vector<float>> sa(2, std::vector<float>(64, 0.0f)), sb = sa;
  const std::vector<unsigned char> decay(64, 1);
  for (std::int64_t t = 1; t <= 3; ++t) {
    const std::vector<float> g = random_vector(64, gen);
    cpu_step(optim::adamw(), t, 0.01, 0.1, a, g, sa, nullptr, decay);
    element_step(optim::adamw({.beta1 = 0.5}), h, t, b, g, sb, nullptr, decay);
  }
  CHECK(max_rel_error(b.data(), a.data(), 64) > 1e-4);
}

TEST_CASE("SAM and ASAM perturbations and global-norm clipping") {
  // SAM: e = rho g / ||g||
  const float g[3] = {3.0f, 4.0f, 12.0f};
  const float p[3] = {1.0f, -2.0f, 0.5f};
  double norm2 = 0;
  for (int i = 0; i < 2; ++i) norm2 += cu::sam_norm_term(p[i], g[i], true, false, 0.0f);
  norm2 += cu::sam_norm_term(p[2], g[2], false, false, 0.0f);  // no_perturb: not counted
  CHECK(norm2 == doctest::Approx(25.0));
  const float k = 0.05f / (5.0f + 1e-12f);
  float w = p[0];
  cu::sam_ascend(w, g[0], true, false, 0.0f, k);
  CHECK(w - p[0] == doctest::Approx(0.05 * 3.0 / 5.0));
  w = p[2];
  cu::sam_ascend(w, g[2], false, false, 0.0f, k);
  CHECK(w == p[2]);
  // ASAM: T = |w| + eta; e = rho T^2 g / ||T g||
  const float eta = 0.01f;
  const double t0 = 1.01, t1 = 2.01;
  const double n = std::sqrt(t0 * t0 * 9 + t1 * t1 * 16);
  double n2 = cu::sam_norm_term(p[0], g[0], true, true, eta) + cu::sam_norm_term(p[1], g[1], true, true, eta);
  CHECK(std::sqrt(n2) == doctest::Approx(n));
  w = p[1];
  cu::sam_ascend(w, g[1], true, true, eta, static_cast<float>(0.05 / n));
  CHECK(w - p[1] == doctest::Approx(0.05 * t1 * t1 * 4 / n));
  // the element is the CPU program's arithmetic: rule_math::sam_ascent on an array (up to the vector
  // units' fused multiply-adds)
  Eigen::ArrayXf W(2), G(2);
  W << p[0], p[1];
  G << g[0], g[1];
  nitro::rule_math::sam_ascent<true>(W, G, eta, static_cast<float>(0.05 / n));
  float w0 = p[0];
  cu::sam_ascend(w0, g[0], true, true, eta, static_cast<float>(0.05 / n));
  CHECK(W[0] == doctest::Approx(w0).epsilon(1e-6));
  CHECK(W[1] == doctest::Approx(w).epsilon(1e-6));
  // clipping
  CHECK(cu::clip_scale(10.0f, 1.0f) == doctest::Approx(0.1).epsilon(1e-5));
  CHECK(cu::clip_scale(0.5f, 1.0f) == 1.0f);
  CHECK(cu::clip_scale(10.0f, 0.0f) == 1.0f);
}

// ---- device scalars ------------------------------------------------------------------------------------

namespace {
struct ScalarsExp {
  nitro::GraphConst<int, 32> width;
  nitro::Device<float> smoothing{0.05f};
  float lr = 1e-3f;
  nitro::Device<double> lambda{0.25};
  nitro::Device<int> warmup{7};
};
NITRO_EXPERIMENT(ScalarsExp, width, smoothing, lr, lambda, warmup);
}  // namespace

TEST_CASE("device scalars: slots in declaration order of the Device fields, read through a reference") {
  static_assert(cu::device_field_count<ScalarsExp>() == 3);
  static_assert(cu::device_slot<ScalarsExp>("smoothing") == 0);
  static_assert(cu::device_slot<ScalarsExp>("warmup") == 2);
  static_assert(cu::device_slot<ScalarsExp>("lr") == -1);
  ScalarsExp e;
  cu::scalar_block block;
  block.bind(e);
  const auto s = cu::device_scalar<ScalarsExp>("smoothing");
  const auto l = cu::device_scalar<ScalarsExp>("lambda");
  const auto w = cu::device_scalar<ScalarsExp>("warmup");
  CHECK(s.read(block.data()) == doctest::Approx(0.05));
  CHECK(l.read(block.data()) == 0.25);
  CHECK(w.read(block.data()) == 7.0);
  e.smoothing = 0.2f;  // a write to the field is a write to its slot: the next read sees it
  CHECK(s.read(block.data()) == doctest::Approx(0.2));
  const auto eta = block.add(1e-3f);
  CHECK(eta.slot == 3);
  block.set(eta, 5e-4);
  CHECK(eta.read(block.data()) == doctest::Approx(5e-4));
  CHECK(block.bytes() == 4 * 8);
  CHECK(cu::scalar_ref::constant(0.5).read(block.data()) == 0.5);
  CHECK_THROWS_WITH_AS(cu::device_scalar<ScalarsExp>("lr"), doctest::Contains("E-CUDA-010"), nitro::error);
  CHECK_THROWS_WITH_AS(cu::device_scalar<ScalarsExp>("nope"), doctest::Contains("E-CUDA-010"), nitro::error);
}

TEST_CASE("device scalars: a slot added before bind() would alias a Device field, and is refused; a slot read with no block is NaN") {
  ScalarsExp e;
  cu::scalar_block early;
  const auto eta = early.add(1e-3f);
  CHECK(eta.slot == 0);  // where the first Device field belongs
  CHECK_THROWS_WITH_AS(early.bind(e), doctest::Contains("E-CUDA-010"), nitro::error);
  CHECK(eta.read(early.data()) == doctest::Approx(1e-3));  // the refused bind left the slot alone
  // the twin: bind, then add
  cu::scalar_block block;
  block.bind(e);
  const auto later = block.add(1e-3f);
  CHECK(later.slot == 3);
  CHECK(cu::device_scalar<ScalarsExp>("smoothing").read(block.data()) == doctest::Approx(0.05));
  // a launch that passed no block (nothing mirrored yet) reads NaN for a slot, the constant otherwise
  CHECK(std::isnan(later.read(nullptr)));
  CHECK(cu::scalar_ref::constant(0.5).read(nullptr) == 0.5);
}

// ---- which models fuse ---------------------------------------------------------------------------------

TEST_CASE("dense_chain: the fused kernel takes dense chains of one width in [16, 128]; the rest runs through cuBLASLt") {
  using namespace nitro::nn;
  using Fashion = decltype(chain(dense<784, 128>(relu), dense<128, 128>(relu), dense<128, 10>()));
  static_assert(cu::dense_chain<Fashion>::is_dense && cu::dense_chain<Fashion>::fusable);
  static_assert(cu::dense_chain<Fashion>::layers == 3);
  static_assert(cu::dense_chain<Fashion>::info[2].out == 10);
  using Wide = decltype(chain(dense<784, 256>(relu), dense<256, 10>()));
  static_assert(cu::dense_chain<Wide>::is_dense && !cu::dense_chain<Wide>::fusable);
  static_assert(std::is_same_v<cu::dense_chain<Wide>::reason, cu::width_outside_16_to_128<256>>);
  using Odd = decltype(chain(dense<10, 24>(relu), dense<24, 10>()));
  static_assert(std::is_same_v<cu::dense_chain<Odd>::reason, cu::width_not_a_multiple_of_16<24>>);
  using Mixed = decltype(chain(dense<10, 32>(relu), dense<32, 64>(relu), dense<64, 10>()));
  static_assert(std::is_same_v<cu::dense_chain<Mixed>::reason, cu::hidden_widths_differ<32, 64>>);
  using Acts = decltype(chain(dense<10, 32>(relu), dense<32, 32>(nitro::nn::tanh), dense<32, 10>()));
  static_assert(std::is_same_v<cu::dense_chain<Acts>::reason, cu::hidden_activations_differ<relu_t, tanh_t>>);
  using Soft = decltype(chain(dense<784, 32>(relu), dense<32, 10>(), nitro::nn::softmax));
  static_assert(!cu::dense_chain<Soft>::is_dense);
  static_assert(std::is_same_v<cu::dense_chain<Soft>::reason, cu::not_a_dense_layer<softmax_t>>);
  using Single = decltype(dense<784, 10>());
  static_assert(cu::dense_chain<Single>::is_dense && !cu::dense_chain<Single>::fusable);
  using Cfg = cu::fused_mlp_config_t<Fashion, tl::math::tf32>;
  static_assert(Cfg::warps == 8 && Cfg::bt == 64 && Cfg::backward_smem_bytes <= 227 * 1024);
  static_assert(Cfg::macs_per_sample == 784 * 128 + 128 * 128 + 128 * 10);
  CHECK(std::string(cu::to_string(Cfg::act_hidden)) == "relu");
}
