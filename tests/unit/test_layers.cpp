// nn/layers: conv2d, max_pool, avg_pool, flatten, dropout, layer_norm, batch_norm, embedding.
// Every layer's gradient against finite differences in float64 (both modes where they differ),
// values against hand computations and against PyTorch (tests/data/layers/torch_reference.json,
// made by make_reference.py beside it), the modes' behaviour (dropout's masks, batch_norm's running
// statistics), coded errors for wrong inputs, and a small CNN that learns Fashion-MNIST.
#include <nitro/cli/model_text.hpp>
#include <nitro/nitro.hpp>

#include <doctest/doctest.h>
#include "../support/layer_check.hpp"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

using D = nitro::basic_tensor<double>;
using nitro::shape;

namespace layers_test {

using namespace layer_check;

// Runs f under a tape and returns the gradients of its scalar result w.r.t. inputs.
template <class F>
std::vector<std::vector<double>> backprop(F&& f, std::vector<D*> inputs, bool training = true, std::uint64_t seed = 1) {
  nitro::arena mem;
  nitro::tape tp(mem);
  nitro::step_context ctx{&mem, &tp, training, seed, 0};
  nitro::context_scope scope(ctx);
  std::vector<std::vector<double>> grads;
  grads.reserve(inputs.size());
  for (D* in : inputs) {
    grads.emplace_back(static_cast<std::size_t>(in->numel()), 0.0);
    in->set_var(tp.leaf(grads.back().data(), sizeof(double) * static_cast<std::size_t>(in->numel())));
  }
  D y = f();
  tp.backward<double>(y.var(), 1.0);
  for (D* in : inputs) in->set_var(-1);
  return grads;
}

// PyTorch's numbers for one case of torch_reference.json.
struct reference {
  nlohmann::json j;
  explicit reference(char const* name) {
    std::ifstream in(std::string(NITRO_TEST_DATA_DIR) + "/layers/torch_reference.json");
    REQUIRE(in.good());
    j = nlohmann::json::parse(in).at(name);
  }
  D operator[](char const* key) const {
    auto const& e = j.at(key);
    std::vector<std::int64_t> dims = e.at("shape").get<std::vector<std::int64_t>>();
    return D::from(e.at("data").get<std::vector<double>>(), shape::from(dims.begin(), dims.end()));
  }
};
void check_close(std::vector<double> const& got, D const& want, double tol, char const* what) {
  INFO(what);
  REQUIRE(static_cast<std::int64_t>(got.size()) == want.numel());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[static_cast<std::int64_t>(i)]));
  CHECK(worst < tol);
}
void check_close(D const& got, D const& want, double tol, char const* what) {
  INFO(what);
  CHECK(got.shape() == want.shape());
  check_close(got.to_vector(), want, tol, what);
}

// A direct convolution, for comparison: y[ox, oy, o, b] = bias[o] + sum w[kx, ky, c, o] x[...].
std::vector<double> naive_conv(std::vector<double> const& x, std::vector<double> const& w, std::vector<double> const& bias, int W, int H,
                               int C, int B, int O, int K, int S, int P) {
  int OW = (W + 2 * P - K) / S + 1, OH = (H + 2 * P - K) / S + 1;
  std::vector<double> y(static_cast<std::size_t>(OW * OH * O * B));
  for (int b = 0; b < B; ++b)
    for (int o = 0; o < O; ++o)
      for (int oy = 0; oy < OH; ++oy)
        for (int ox = 0; ox < OW; ++ox) {
          double s = bias[static_cast<std::size_t>(o)];
          for (int c = 0; c < C; ++c)
            for (int ky = 0; ky < K; ++ky)
              for (int kx = 0; kx < K; ++kx) {
                int ix = ox * S - P + kx, iy = oy * S - P + ky;
                if (ix < 0 || iy < 0 || ix >= W || iy >= H) continue;
                s += w[static_cast<std::size_t>(kx + K * (ky + K * (c + C * o)))] * x[static_cast<std::size_t>(ix + W * (iy + H * (c + C * b)))];
              }
          y[static_cast<std::size_t>(ox + OW * (oy + OH * (o + O * b)))] = s;
        }
  return y;
}

}  // namespace layers_test

using namespace layers_test;
namespace nn = nitro::nn;

// ---- conv2d ---------------------------------------------------------------------------------------

TEST_CASE("conv2d: gradients against finite differences for kernels, strides, paddings and every fused activation") {
  nitro::rng g(21);
  gradcheck_layer(nn::conv2d<2, 3, 3, 1, 1>(), random({5, 4, 2, 2}, g), g);
  gradcheck_layer(nn::conv2d<2, 3, 3, 2, 1>(nn::relu), random({6, 5, 2, 2}, g), g);
  gradcheck_layer(nn::conv2d<2, 2, 3, 2, 0>(nn::gelu), random({7, 5, 2, 2}, g), g);
  gradcheck_layer(nn::conv2d<1, 2, 2, 1, 0>(nn::tanh), random({4, 3, 1, 3}, g), g);
  gradcheck_layer(nn::conv2d<3, 2, 1>(nn::sigmoid), random({3, 4, 3, 2}, g), g);  // 1x1: no im2col
  gradcheck_layer(nn::conv2d<2, 2, 3, 1, 2, false>(), random({3, 3, 2, 2}, g), g);  // padding 2 and no bias
  // 18 samples: several chunks of the batch, each with its own partial weight gradient
  gradcheck_layer(nn::conv2d<1, 2, 3, 1, 1>(nn::relu), random({4, 4, 1, 18}, g), g);
}

TEST_CASE("conv2d: output, input, weight and bias gradients equal PyTorch's (layout [kx, ky, cin, cout] = torch's bytes)") {
  reference ref("conv2d");
  auto layer = nn::conv2d<3, 4, 3, 2, 1>();
  nn::layer_params<decltype(layer), double> ps;
  D x = ref["x"], r = ref["r"];
  nitro::get<"weight">(ps) = ref["weight"];
  nitro::get<"bias">(ps) = ref["bias"];
  CHECK(nitro::get<"weight">(ps).shape() == shape{3, 3, 3, 4});
  check_close(layer(x, ps, {}).first, ref["y"], 1e-12, "y");
  D& w = nitro::get<"weight">(ps);
  D& b = nitro::get<"bias">(ps);
  auto grads = backprop([&] { return nitro::sum(layer(x, ps, {}).first * r); }, {&x, &w, &b});
  check_close(grads[0], ref["dx"], 1e-12, "dx");
  check_close(grads[1], ref["dweight"], 1e-12, "dweight");
  check_close(grads[2], ref["dbias"], 1e-12, "dbias");
}

TEST_CASE("conv2d: float32 on the backend's threads equals a direct convolution, forward and backward") {
  // large enough that the batch is split over the thread pool
  constexpr int W = 12, H = 10, C = 8, B = 32, O = 16, K = 3, S = 1, P = 1;
  nitro::rng g(5);
  auto layer = nn::conv2d<C, O, K, S, P>();
  nn::layer_params<decltype(layer), float> ps;
  nitro::Tensor x = nitro::Tensor::owned({W, H, C, B});
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = float(g.uniform(-1, 1));
  nitro::get<"weight">(ps) = nitro::Tensor::owned({K, K, C, O});
  nitro::get<"bias">(ps) = nitro::Tensor::owned({O});
  nitro::rng gi(2);
  nitro::tree<> none;
  layer.init(ps, none, gi);
  auto to_d = [](nitro::Tensor const& t) { return std::vector<double>(t.data(), t.data() + t.numel()); };
  std::vector<double> want = naive_conv(to_d(x), to_d(nitro::get<"weight">(ps)), to_d(nitro::get<"bias">(ps)), W, H, C, B, O, K, S, P);
  nitro::Tensor y = layer(x, ps, {}).first;
  REQUIRE(y.shape() == shape{W, H, O, B});
  double worst = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i) worst = std::max(worst, std::abs(double(y[i]) - want[static_cast<std::size_t>(i)]));
  CHECK(worst < 1e-4);
  // backward: d sum(y) / d bias[o] = W*H*B; d sum(y) / d x = sum of the weights that touch each pixel
  nitro::arena mem;
  nitro::tape tp(mem);
  nitro::step_context ctx{&mem, &tp, true, 1, 0};
  nitro::context_scope scope(ctx);
  std::vector<float> gx(static_cast<std::size_t>(x.numel())), gw(K * K * C * O), gb(O);
  x.set_var(tp.leaf(gx.data(), gx.size() * sizeof(float)));
  nitro::get<"weight">(ps).set_var(tp.leaf(gw.data(), gw.size() * sizeof(float)));
  nitro::get<"bias">(ps).set_var(tp.leaf(gb.data(), gb.size() * sizeof(float)));
  nitro::Tensor loss = nitro::sum(layer(x, ps, {}).first);
  tp.backward<float>(loss.var(), 1.0f);
  for (int o = 0; o < O; ++o) CHECK(gb[static_cast<std::size_t>(o)] == doctest::Approx(W * H * B));
  // dW[kx, ky, c, o] = sum over b and output pixels of the tapped input: the same for every o
  std::vector<double> xs = to_d(x);
  for (int c = 0; c < C; c += 3)
    for (int ky = 0; ky < K; ++ky)
      for (int kx = 0; kx < K; ++kx) {
        double s = 0;
        for (int b = 0; b < B; ++b)
          for (int oy = 0; oy < H; ++oy)
            for (int ox = 0; ox < W; ++ox) {
              int ix = ox - P + kx, iy = oy - P + ky;
              if (ix >= 0 && iy >= 0 && ix < W && iy < H) s += xs[static_cast<std::size_t>(ix + W * (iy + H * (c + C * b)))];
            }
        CHECK(gw[static_cast<std::size_t>(kx + K * (ky + K * (c + C * 5)))] == doctest::Approx(s).epsilon(1e-4));
      }
  // an interior pixel is tapped by every weight of its channel
  auto const& wt = nitro::get<"weight">(ps);
  for (int c = 0; c < C; ++c) {
    double s = 0;
    for (int o = 0; o < O; ++o)
      for (int k = 0; k < K * K; ++k) s += wt[k + K * K * (c + C * o)];
    CHECK(gx[static_cast<std::size_t>(4 + W * (5 + H * (c + C * 7)))] == doctest::Approx(s).epsilon(1e-4));
  }
}

TEST_CASE("conv2d: im2col gives every tap the pixel it reads or the padding's zero, for same-size windows (one run a tap) and the rest") {
  // (k, stride, pad, w, h): same-size windows take one copy a tap, including images smaller than the
  // window and padding wider than the image; the others go row by row
  const std::int64_t windows[][5] = {{3, 1, 1, 5, 4}, {3, 1, 1, 1, 1}, {3, 1, 1, 2, 7}, {5, 1, 2, 6, 3}, {5, 1, 2, 1, 2},
                                     {7, 1, 3, 3, 3}, {7, 1, 3, 2, 5}, {3, 2, 1, 7, 5}, {2, 1, 0, 4, 3}, {3, 1, 2, 4, 4}};
  for (auto const& win : windows) {
    nitro::conv_window p;
    p.k = win[0], p.stride = win[1], p.pad = win[2], p.w = win[3], p.h = win[4], p.in_c = 3, p.out_c = 1, p.batch = 1;
    p.ow = (p.w + 2 * p.pad - p.k) / p.stride + 1, p.oh = (p.h + 2 * p.pad - p.k) / p.stride + 1;
    CAPTURE(p.k);
    CAPTURE(p.stride);
    CAPTURE(p.pad);
    CAPTURE(p.w);
    CAPTURE(p.h);
    std::vector<float> x(static_cast<std::size_t>(p.w * p.h * p.in_c));
    std::iota(x.begin(), x.end(), 1.0f);  // no pixel is zero: a zero read is the padding's
    const std::int64_t P = p.out_plane();
    std::vector<float> want(static_cast<std::size_t>(P * p.rows()));
    for (std::int64_t c = 0; c < p.in_c; ++c)
      for (std::int64_t ky = 0; ky < p.k; ++ky)
        for (std::int64_t kx = 0; kx < p.k; ++kx)
          for (std::int64_t oy = 0; oy < p.oh; ++oy)
            for (std::int64_t ox = 0; ox < p.ow; ++ox) {
              const std::int64_t ix = ox * p.stride - p.pad + kx, iy = oy * p.stride - p.pad + ky;
              want[static_cast<std::size_t>(ox + p.ow * oy + P * (kx + p.k * (ky + p.k * c)))] =
                  ix >= 0 && iy >= 0 && ix < p.w && iy < p.h ? x[static_cast<std::size_t>(ix + p.w * (iy + p.h * c))] : 0.0f;
            }
    auto check = [&](auto kernel) {  // -1: a tap left unwritten
      std::vector<float> col(want.size(), -1.0f);
      kernel(p, x.data(), col.data());
      CHECK(col == want);
    };
    check(nitro::cpu::detail::im2col<0, 0, float>);  // extents read at run time
    if (p.k == 3 && p.stride == 1) check(nitro::cpu::detail::im2col<3, 1, float>);  // the unrolled ones
    if (p.k == 5 && p.stride == 1) check(nitro::cpu::detail::im2col<5, 1, float>);
    if (p.k == 3 && p.stride == 2) check(nitro::cpu::detail::im2col<3, 2, float>);
  }
}

TEST_CASE("conv2d: shapes, the PyTorch initialisation and coded errors for the wrong input") {
  auto layer = nn::conv2d<1, 8, 5, 2, 2>(nn::relu);
  using L = decltype(layer);
  static_assert(std::is_same_v<L::param_spec, nitro::tree<nitro::entry<"weight", nn::param<5, 5, 1, 8>>, nitro::entry<"bias", nn::param<8>>>>);
  CHECK(layer.describe() == "conv2d<1, 8, 5, stride 2, pad 2, relu>");
  CHECK(nn::conv2d<3, 4, 3>().describe() == "conv2d<3, 4, 3>");
  nitro::param_store<L::param_spec> store;
  auto ps = store.view();
  nitro::tree<> st;
  nitro::rng g(1);
  layer.init(ps, st, g);
  double bound = 1.0 / std::sqrt(25.0), mx = 0;  // fan_in = K*K*InC
  for (std::int64_t i = 0; i < nitro::get<"weight">(ps).numel(); ++i) mx = std::max(mx, double(std::abs(nitro::get<"weight">(ps)[i])));
  CHECK(mx <= bound);
  CHECK(mx > 0.9 * bound);
  nitro::Tensor x = nitro::Tensor::owned({28, 28, 1, 3});
  CHECK(layer(x, ps, st).first.shape() == shape{14, 14, 8, 3});
  CHECK_THROWS_WITH_AS(layer(nitro::Tensor::owned({28, 28, 3, 3}), ps, st),
                       "E-LAYER-002: conv2d<1, 8, 5, stride 2, pad 2, relu> expects 1 input channels, got 3 (input shape [28, 28, 3, 3])\n"
                       "  fix: make the previous layer produce 1 channels, or change this layer's input channels",
                       nitro::error);
  CHECK_THROWS_WITH_AS(layer(nitro::Tensor::owned({784, 3}), ps, st), doctest::Contains("E-LAYER-001"), nitro::error);
  CHECK_THROWS_WITH_AS(layer(nitro::Tensor::owned({28, 28, 3}), ps, st), doctest::Contains("x.reshape({w, h, 1, batch})"), nitro::error);
  auto wide = nn::conv2d<1, 1, 5>();
  CHECK_THROWS_WITH_AS(wide(nitro::Tensor::owned({4, 9, 1, 1}), {}, {}), doctest::Contains("E-LAYER-003"), nitro::error);
}

// ---- pooling --------------------------------------------------------------------------------------

TEST_CASE("max_pool and avg_pool: values by hand, PyTorch's numbers, gradients against finite differences") {
  D x = D::owned({4, 4, 1, 1});
  for (int i = 0; i < 16; ++i) x[i] = i + 1;  // rows 1..4, 5..8, 9..12, 13..16
  CHECK(nn::max_pool<2>()(x, {}, {}).first.to_vector() == std::vector<double>{6, 8, 14, 16});
  CHECK(nn::avg_pool<2>()(x, {}, {}).first.to_vector() == std::vector<double>{3.5, 5.5, 11.5, 13.5});
  CHECK(nn::max_pool<3, 1>()(x, {}, {}).first.to_vector() == std::vector<double>{11, 12, 15, 16});
  CHECK(nn::max_pool<2>().describe() == "max_pool<2>");
  CHECK(nn::avg_pool<3, 2>().describe() == "avg_pool<3, 2>");

  for (char const* name : {"max_pool", "avg_pool"}) {
    reference ref(name);
    D xr = ref["x"], r = ref["r"];
    auto run = [&] {
      if (std::string(name) == "max_pool") return nn::max_pool<2>()(xr, {}, {}).first;
      return nn::avg_pool<3, 2>()(xr, {}, {}).first;
    };
    check_close(run(), ref["y"], 1e-12, name);
    auto grads = backprop([&] { return nitro::sum(run() * r); }, {&xr});
    check_close(grads[0], ref["dx"], 1e-12, name);
  }

  nitro::rng g(8);
  gradcheck_layer(nn::max_pool<2>(), random({6, 4, 2, 3}, g), g);
  gradcheck_layer(nn::max_pool<3, 2>(), random({7, 5, 2, 2}, g), g);  // overlapping windows
  gradcheck_layer(nn::avg_pool<2>(), random({4, 6, 2, 2}, g), g);
  gradcheck_layer(nn::avg_pool<3, 1>(), random({5, 4, 1, 2}, g), g);
  // the max's gradient goes to the window's (first) largest element only
  D y = D::from({1, 9, 3, 4}, {2, 2, 1, 1});
  auto grads = backprop([&] { return nitro::sum(nn::max_pool<2>()(y, {}, {}).first); }, {&y});
  CHECK(grads[0] == std::vector<double>{0, 1, 0, 0});
  D tie = D::from({1, 7, 7, 3}, {2, 2, 1, 1});  // a tie: the first of the window (row by row) wins
  CHECK(backprop([&] { return nitro::sum(nn::max_pool<2>()(tie, {}, {}).first); }, {&tie})[0] == std::vector<double>{0, 1, 0, 0});
  D big = D::owned({9, 9, 1, 1});  // 81 taps: more than a 64-bit mask holds
  for (int i = 0; i < 81; ++i) big[i] = (i * 37) % 81;  // every value once; 80 at i = 35
  auto gb = backprop([&] { return nitro::sum(nn::max_pool<9>()(big, {}, {}).first); }, {&big})[0];
  CHECK(gb[35] == 1.0);
  CHECK(std::accumulate(gb.begin(), gb.end(), 0.0) == 1.0);

  CHECK_THROWS_WITH_AS(nn::max_pool<2>()(D::owned({16, 4}), {}, {}), doctest::Contains("E-LAYER-001"), nitro::error);
  CHECK_THROWS_WITH_AS(nn::avg_pool<3>()(D::owned({2, 8, 1, 1}), {}, {}), doctest::Contains("E-LAYER-003: avg_pool<3>: the input's 2 x 8 pixels"), nitro::error);
}

// ---- flatten --------------------------------------------------------------------------------------

TEST_CASE("flatten: [w, h, c, B] -> [w*h*c, B], a view that carries the gradient") {
  nitro::rng g(4);
  D x = random({3, 2, 2, 5}, g);
  D y = nn::flatten(x, {}, {}).first;
  CHECK(y.shape() == shape{12, 5});
  CHECK(y.data() == x.data());
  CHECK(nn::flatten.describe() == "flatten");
  auto net = nn::chain(nn::conv2d<2, 3, 3, 1, 1>(nn::tanh), nn::flatten, nn::dense<18, 4>());
  fixture<decltype(net)> f(g);
  D xs = random({3, 2, 2, 2}, g);
  require_ok(nitro::nn::gradcheck([&] { return nitro::sum(nitro::square(net(xs, f.ps, f.st).first)); },
                                  {&xs, f.leaves[0], f.leaves[1], f.leaves[2], f.leaves[3]}));
}

// ---- dropout --------------------------------------------------------------------------------------

TEST_CASE("dropout: identity in evaluation; in training, the rate, the scale, and one mask per (seed, call)") {
  auto drop = nn::dropout(0.3);
  CHECK(drop.describe() == "dropout(0.3)");
  nitro::Tensor x = nitro::Tensor::full({1000, 100}, 1.0f);
  // no step, and an evaluation step: the input itself
  CHECK(drop(x, {}, {}).first.data() == x.data());
  auto in_step = [&](bool training, std::uint64_t seed, auto&& f) {
    nitro::arena mem;
    nitro::step_context ctx{&mem, nullptr, training, seed, 0};
    nitro::context_scope scope(ctx);
    return f();
  };
  CHECK(in_step(false, 1, [&] { return drop(x, {}, {}).first.data() == x.data(); }));

  auto mask = [&](std::uint64_t seed, int calls) {
    return in_step(true, seed, [&] {
      std::vector<float> m;
      for (int c = 0; c < calls; ++c) m = drop(x, {}, {}).first.to_vector();
      return m;
    });
  };
  std::vector<float> a = mask(7, 1);
  std::int64_t dropped = 0;
  bool scaled = true;
  for (float v : a) {
    if (v == 0.0f) ++dropped;
    else scaled = scaled && std::abs(v - 1.0f / 0.7f) < 1e-6f;
  }
  CHECK(scaled);
  CHECK(double(dropped) / double(a.size()) == doctest::Approx(0.3).epsilon(0.02));  // 100000 draws: sd 0.0015
  CHECK(mask(7, 1) == a);  // same seed, same call: the same mask
  CHECK(mask(8, 1) != a);  // another step
  CHECK(mask(7, 2) != a);  // the second call of a step draws its own mask
  // the mean is kept: E[y] = x
  double mean = 0;
  for (float v : a) mean += v;
  CHECK(mean / double(a.size()) == doctest::Approx(1.0).epsilon(0.01));

  CHECK(in_step(true, 1, [&] { return nn::dropout(0.0)(x, {}, {}).first.data() == x.data(); }));
  CHECK(in_step(true, 1, [&] { auto v = nn::dropout(1.0)(x, {}, {}).first.to_vector(); return std::all_of(v.begin(), v.end(), [](float e) { return e == 0.0f; }); }));
  CHECK_THROWS_WITH_AS(nn::dropout(1.5), doctest::Contains("E-LAYER-004"), nitro::error);
  CHECK_THROWS_WITH_AS(nn::dropout(-0.1), doctest::Contains("E-LAYER-004"), nitro::error);

  // gradients: the same mask in every forward of the check, so finite differences agree
  nitro::rng g(3);
  D xd = random({6, 5}, g);
  D r = random({6, 5}, g);
  require_ok(nitro::nn::gradcheck([&] { return nitro::sum(nn::dropout(0.5)(xd, {}, {}).first * r); }, {&xd}));
  // and the gradient is the mask times the scale
  auto grads = backprop([&] { return nitro::sum(nn::dropout(0.5)(xd, {}, {}).first); }, {&xd}, true, 42);
  std::vector<double> y = in_step(true, 42, [&] { return nn::dropout(0.5)(xd, {}, {}).first.to_vector(); });
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(grads[0][i] == (y[i] == 0 ? 0.0 : 2.0));
}

// ---- layer_norm -----------------------------------------------------------------------------------

TEST_CASE("layer_norm: each column normalised over its features; PyTorch's numbers; gradients") {
  auto ln = nn::layer_norm<3>();
  nn::layer_params<decltype(ln), double> ps;
  nitro::get<"weight">(ps) = D::from({1, 1, 1}, {3});
  nitro::get<"bias">(ps) = D::from({0, 0, 0}, {3});
  D x = D::from({1, 2, 3, 10, 10, 10}, {3, 2});
  D y = ln(x, ps, {}).first;
  double s = 1 / std::sqrt(2.0 / 3.0 + 1e-5);
  CHECK(y[0] == doctest::Approx(-s));
  CHECK(y[1] == doctest::Approx(0));
  CHECK(y[2] == doctest::Approx(s));
  CHECK(y[3] == doctest::Approx(0));  // a constant column: all zero, not NaN
  CHECK(ln.describe() == "layer_norm<3>");

  reference ref("layer_norm");
  auto ln5 = nn::layer_norm<5>();
  nn::layer_params<decltype(ln5), double> p5;
  nitro::get<"weight">(p5) = ref["weight"];
  nitro::get<"bias">(p5) = ref["bias"];
  D xr = ref["x"], r = ref["r"];
  check_close(ln5(xr, p5, {}).first, ref["y"], 1e-12, "y");
  auto grads = backprop([&] { return nitro::sum(ln5(xr, p5, {}).first * r); }, {&xr, &nitro::get<"weight">(p5), &nitro::get<"bias">(p5)});
  check_close(grads[0], ref["dx"], 1e-10, "dx");
  check_close(grads[1], ref["dweight"], 1e-10, "dweight");
  check_close(grads[2], ref["dbias"], 1e-10, "dbias");

  nitro::rng g(6);
  gradcheck_layer(nn::layer_norm<4>(), random({4, 3}, g), g);
  gradcheck_layer(nn::layer_norm<4>(), random({4, 2, 3}, g), g);  // [F, L, B]: every (l, b) column
  CHECK_THROWS_WITH_AS(ln(D::owned({4, 2}), ps, {}), doctest::Contains("E-SHAPE-012: layer_norm<3> expects 3 input features, got 4"),
                       nitro::error);
  // its features are static, so a chain checks them at compile time (see compile_fail/layer_norm_mismatch.cpp)
  using Net = decltype(nn::chain(nn::dense<8, 16>(nn::relu), nn::layer_norm<16>(), nn::dense<16, 2>()));
  static_assert(Net::in_features == 8 && Net::out_features == 2);
}

// ---- batch_norm -----------------------------------------------------------------------------------

TEST_CASE("batch_norm: training uses the batch's statistics and moves the running ones; evaluation uses the running ones") {
  auto bn = nn::batch_norm<2>();
  using L = decltype(bn);
  static_assert(std::is_same_v<L::state_spec, nitro::tree<nitro::entry<"running_mean", nn::buffer<2>>, nitro::entry<"running_var", nn::buffer<2>>>>);
  nitro::param_store<L::param_spec> pstore;
  nitro::param_store<L::state_spec> sstore(false);
  auto ps = pstore.view();
  auto st = sstore.view();
  nitro::rng g(1);
  bn.init(ps, st, g);
  CHECK(nitro::get<"weight">(ps).to_vector() == std::vector<float>{1, 1});
  CHECK(nitro::get<"running_var">(st).to_vector() == std::vector<float>{1, 1});
  CHECK(nitro::get<"running_mean">(st).to_vector() == std::vector<float>{0, 0});

  // [C = 2, B = 4]: channel 0 holds 1, 2, 3, 4 and channel 1 holds 10 four times
  nitro::Tensor x = nitro::Tensor::from({1, 10, 2, 10, 3, 10, 4, 10}, {2, 4});
  nitro::arena mem;
  nitro::step_context train{&mem, nullptr, true, 1, 0};
  {
    nitro::context_scope scope(train);
    auto [y, st_new] = bn(x, ps, st);
    double s = 1 / std::sqrt(1.25 + 1e-5);  // biased variance of 1..4 is 1.25
    CHECK(y(0, 0) == doctest::Approx(-1.5 * s));
    CHECK(y(0, 3) == doctest::Approx(1.5 * s));
    CHECK(y(1, 2) == doctest::Approx(0));
    // momentum 0.1 toward the mean and the UNBIASED variance (5/3 for 1..4), as PyTorch
    CHECK(nitro::get<"running_mean">(st_new)[0] == doctest::Approx(0.25));
    CHECK(nitro::get<"running_mean">(st_new)[1] == doctest::Approx(1.0));
    CHECK(nitro::get<"running_var">(st_new)[0] == doctest::Approx(0.9 + 0.1 * 5.0 / 3.0));
    CHECK(nitro::get<"running_var">(st_new)[1] == doctest::Approx(0.9));
    // the state passed in is not written: st_new is new
    CHECK(nitro::get<"running_mean">(st)[0] == 0.0f);
    sstore.assign(st_new);  // what the trainer does with st_new
  }
  CHECK(nitro::get<"running_mean">(st)[0] == doctest::Approx(0.25));
  nitro::step_context eval{&mem, nullptr, false, 1, 0};
  {
    nitro::context_scope scope(eval);
    auto [y, st_same] = bn(x, ps, st);
    CHECK(nitro::get<"running_mean">(st_same).data() == nitro::get<"running_mean">(st).data());  // st, unchanged
    CHECK(y(0, 0) == doctest::Approx((1 - 0.25) / std::sqrt(0.9 + 0.5 / 3.0 + 1e-5)));
    CHECK(y(1, 1) == doctest::Approx((10 - 1.0) / std::sqrt(0.9 + 1e-5)));
  }
  CHECK(bn.describe() == "batch_norm<2>");
  CHECK_THROWS_WITH_AS(bn(nitro::Tensor::owned({3, 4}), ps, st), doctest::Contains("E-LAYER-002: batch_norm<2> expects 2 channels"), nitro::error);
  CHECK_THROWS_WITH_AS(bn(nitro::Tensor::owned({2}), ps, st), doctest::Contains("E-LAYER-001"), nitro::error);
  {
    nitro::context_scope scope(train);
    CHECK_THROWS_WITH_AS(bn(nitro::Tensor::owned({2, 1}), ps, st), doctest::Contains("E-LAYER-006"), nitro::error);
  }
}

TEST_CASE("batch_norm: PyTorch's numbers per channel of WHCN images and per feature; gradients in both modes") {
  reference ref("batch_norm");
  auto bn = nn::batch_norm<3>();
  nn::layer_params<decltype(bn), double> ps;
  nn::layer_state<decltype(bn), double> st;
  nitro::get<"weight">(ps) = ref["weight"];
  nitro::get<"bias">(ps) = ref["bias"];
  nitro::get<"running_mean">(st) = D::from({0, 0, 0}, {3});
  nitro::get<"running_var">(st) = D::from({1, 1, 1}, {3});
  D x = ref["x"], r = ref["r"];
  nn::layer_state<decltype(bn), double> st_new;
  auto grads = backprop(
      [&] {
        auto [y, s] = bn(x, ps, st);
        check_close(y, ref["y"], 1e-12, "y (training)");
        st_new = s;
        nitro::get<"running_mean">(st_new) = nitro::get<"running_mean">(s).clone();
        nitro::get<"running_var">(st_new) = nitro::get<"running_var">(s).clone();
        return nitro::sum(y * r);
      },
      {&x, &nitro::get<"weight">(ps), &nitro::get<"bias">(ps)});
  check_close(grads[0], ref["dx"], 1e-10, "dx");
  check_close(grads[1], ref["dweight"], 1e-10, "dweight");
  check_close(grads[2], ref["dbias"], 1e-10, "dbias");
  check_close(nitro::get<"running_mean">(st_new), ref["running_mean"], 1e-12, "running_mean");
  check_close(nitro::get<"running_var">(st_new), ref["running_var"], 1e-12, "running_var");
  check_close(bn(ref["x_eval"], ps, st_new).first, ref["y_eval"], 1e-12, "y (evaluation)");  // no step: evaluation

  reference ref1("batch_norm_1d");
  auto bn5 = nn::batch_norm<5>();
  nn::layer_params<decltype(bn5), double> p5;
  nn::layer_state<decltype(bn5), double> s5;
  nitro::get<"weight">(p5) = D::full({5}, 1);
  nitro::get<"bias">(p5) = D::full({5}, 0);
  nitro::get<"running_mean">(s5) = D::full({5}, 0);
  nitro::get<"running_var">(s5) = D::full({5}, 1);
  nitro::arena mem;
  nitro::step_context train{&mem, nullptr, true, 1, 0};
  nitro::context_scope scope(train);
  auto [y5, s5_new] = bn5(ref1["x"], p5, s5);
  check_close(y5, ref1["y"], 1e-12, "y [F, B]");
  check_close(nitro::get<"running_mean">(s5_new), ref1["running_mean"], 1e-12, "running_mean [F, B]");
  check_close(nitro::get<"running_var">(s5_new), ref1["running_var"], 1e-12, "running_var [F, B]");

  nitro::rng g(12);
  for (bool training : {true, false}) {
    gradcheck_layer(nn::batch_norm<3>(), random({4, 3, 3, 2}, g), g, training);  // WHCN
    gradcheck_layer(nn::batch_norm<4>(), random({4, 5}, g), g, training);         // [F, B]
    gradcheck_layer(nn::batch_norm<2>(), random({3, 2, 4}, g), g, training);      // [L, C, B]
  }
}

// ---- embedding ------------------------------------------------------------------------------------

TEST_CASE("embedding: columns looked up by index, [B] -> [Dim, B] and [L, B] -> [Dim, L, B]; gradient to the rows used") {
  auto emb = nn::embedding<4, 3>();
  nn::layer_params<decltype(emb), double> ps;
  nitro::get<"weight">(ps) = D::from({0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, {3, 4});  // token t: (10t, 10t+1, 10t+2)
  D y = emb(D::from({2, 0}, {2}), ps, {}).first;
  CHECK(y.shape() == shape{3, 2});
  CHECK(y.to_vector() == std::vector<double>{20, 21, 22, 0, 1, 2});
  D ids = D::from({3, 1, 1, 3, 3, 0}, {3, 2});
  D ys = emb(ids, ps, {}).first;
  CHECK(ys.shape() == shape{3, 3, 2});
  CHECK(ys[3 * 5] == 0);
  CHECK(ys[3 * 3 + 1] == 31);
  CHECK(emb.describe() == "embedding<4, 3>");

  D& w = nitro::get<"weight">(ps);
  D r = D::owned({3, 3, 2});
  for (int i = 0; i < 18; ++i) r[i] = i;
  auto grads = backprop([&] { return nitro::sum(emb(ids, ps, {}).first * r); }, {&w});
  // token 3 is used at positions 0, 3, 4: its column of the gradient is the sum of those of r
  CHECK(grads[0][9] == 0 + 9 + 12);
  CHECK(grads[0][3] == 3 + 6);  // token 1 at positions 1, 2
  CHECK(grads[0][6] == 0);      // token 2 is unused
  nitro::rng g(2);
  gradcheck_layer(emb, ids, g, true, /*with_x=*/false);

  CHECK_THROWS_WITH_AS(emb(D::from({1, 4}, {2}), ps, {}),
                       "E-LAYER-005: embedding<4, 3>: index 4.000000 at position 1 of the input (shape [2]) is not a whole number in [0, 4)\n"
                       "  fix: map tokens to 0 .. 3, or enlarge the vocabulary",
                       nitro::error);
  CHECK_THROWS_WITH_AS(emb(D::from({1.5}, {1}), ps, {}), doctest::Contains("E-LAYER-005"), nitro::error);
  CHECK_THROWS_WITH_AS(emb(D::from({-1}, {1}), ps, {}), doctest::Contains("E-LAYER-005"), nitro::error);
  nitro::Tensor big = nitro::Tensor::owned({1000, 64});
  nitro::rng gi(1);
  nitro::init::normal(1.0)(big, 1, 1, gi);
  double sq = 0;
  for (std::int64_t i = 0; i < big.numel(); ++i) sq += double(big[i]) * big[i];
  CHECK(sq / double(big.numel()) == doctest::Approx(1.0).epsilon(0.03));  // N(0, 1), as torch.nn.Embedding
}

// ---- a small CNN on real data ---------------------------------------------------------------------

namespace layers_test {
struct FwdIn { BOOST_HANA_DEFINE_STRUCT(FwdIn, (nitro::Tensor, img)); };
struct LossIn { BOOST_HANA_DEFINE_STRUCT(LossIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };
struct SmallCNN {
  nitro::Device<float> smoothing{0.0f};
  float lr = 2e-3f;
  int max_epochs = 1;
  std::int64_t batch_size = 64;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 500, .train_limit = 4000, .test_limit = 1000}); }
  auto build_model() const {
    return nn::chain(nn::conv2d<1, 8, 3, 1, 1>(nn::relu), nn::max_pool<2>(), nn::batch_norm<8>(), nn::conv2d<8, 16, 3, 1, 1>(nn::relu),
                     nn::max_pool<2>(), nn::flatten, nn::dropout(0.25), nn::dense<784, 32>(nn::relu), nn::layer_norm<32>(),
                     nn::dense<32, 10>());
  }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label, smoothing); }
  auto metrics(nitro::Tensor const& logits, LossIn const& in) const {
    return Metrics{.acc = {nitro::nn::correct_count(logits, in.label), double(in.label.batch())}};
  }
};
NITRO_EXPERIMENT(SmallCNN, smoothing, lr, max_epochs, batch_size);
}  // namespace layers_test

TEST_CASE("a CNN of every image layer learns a slice of Fashion-MNIST; evaluation leaves batch_norm's statistics alone") {
  nitro::Nitro h(SmallCNN{});
  auto running = [&] { return nitro::get<"running_mean">(nitro::get<"layer_3">(h.state())).to_vector(); };
  CHECK(running() == std::vector<float>(8, 0.0f));
  auto before = h.evaluate("test");
  CHECK(running() == std::vector<float>(8, 0.0f));
  h.train(false);
  std::vector<float> trained = running();
  CHECK(trained != std::vector<float>(8, 0.0f));  // training moved the running statistics
  auto after = h.evaluate("test");
  CHECK(running() == trained);  // evaluation did not
  CHECK(before.at("acc") < 0.3);
  CHECK(after.at("acc") > 0.65);  // chance is 0.10
  CHECK(after.at("loss") < before.at("loss"));
}

// ---- composition: residual connections and repeated blocks ------------------------------------------

TEST_CASE("residual: y = x + f(x), the body's parameter names, both gradients of x, a coded error for a body that changes the shape") {
  namespace nn = nitro::nn;
  auto block = nn::residual(nn::chain(nn::layer_norm<3>(), nn::dense<3, 3>(nn::tanh)));
  using B = decltype(block);
  static_assert(B::in_features == 3 && B::out_features == 3);
  static_assert(std::is_same_v<B::param_spec, decltype(nn::chain(nn::layer_norm<3>(), nn::dense<3, 3>(nn::tanh)))::param_spec>);
  CHECK(block.describe() == "residual(chain(layer_norm<3>, dense<3, 3, tanh>))");
  nitro::rng g(3);
  layer_check::fixture<B> f(g);
  D x = layer_check::random({3, 4}, g);
  const D body = block.body(x, f.ps, f.st).first.clone();
  const D y = block(x, f.ps, f.st).first.clone();
  for (std::int64_t i = 0; i < y.numel(); ++i) CHECK(y[i] == doctest::Approx(x[i] + body[i]).epsilon(1e-15));
  // d(sum y)/dx = 1 + d(sum f)/dx: the skip's gradient and the body's add up
  auto skip = backprop([&] { return nitro::sum(block(x, f.ps, f.st).first); }, {&x});
  auto through = backprop([&] { return nitro::sum(block.body(x, f.ps, f.st).first); }, {&x});
  for (std::size_t i = 0; i < skip[0].size(); ++i) CHECK(skip[0][i] == doctest::Approx(1.0 + through[0][i]).epsilon(1e-12));

  // a convolution without padding shrinks the image: named before the sum would broadcast
  auto shrink = nn::residual(nn::conv2d<2, 2, 3>());
  layer_check::fixture<decltype(shrink)> fc(g);
  CHECK_THROWS_WITH_AS(shrink(layer_check::random({5, 5, 2, 1}, g), fc.ps, fc.st),
                       "E-LAYER-019: residual(conv2d<2, 2, 3>): the body turned an input of shape [5, 5, 2, 1] into [3, 3, 2, 1], so "
                       "x + f(x) has no meaning\n"
                       "  fix: make the body keep its input's shape (pad convolutions: conv2d<C, C, 3, 1, 1>; end in as many features as it "
                       "starts with)",
                       nitro::error);
}

TEST_CASE("repeat<N>: copies named 0..N-1, each initialised from its own stream, applied in sequence") {
  namespace nn = nitro::nn;
  auto stack = nn::repeat<3>(nn::dense<4, 4>(nn::relu));
  using R = decltype(stack);
  static_assert(R::size() == 3 && R::in_features == 4 && R::out_features == 4);
  CHECK(stack.describe() == "repeat<3>(dense<4, 4, relu>)");
  std::vector<std::string> paths;
  nitro::for_each_leaf_type<R::param_spec>([&](auto kp, auto) { paths.emplace_back(decltype(kp)::view()); });
  CHECK(paths == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"});

  nitro::nn::layer_params<R, double> ps;
  nitro::nn::layer_state<R, double> st;
  nitro::for_each_leaf_type<R::param_spec>([&](auto kp, auto spec) {
    *nitro::find_leaf<D>(ps, decltype(kp)::view()) = D::owned(decltype(spec)::type::shape());
  });
  nitro::rng g(11);
  stack.init(ps, st, g);
  auto w = [&](auto const& leaf) { return std::vector<double>(leaf.data(), leaf.data() + leaf.numel()); };
  CHECK(w(nitro::get<"weight">(nitro::get<"0">(ps))) != w(nitro::get<"weight">(nitro::get<"1">(ps))));  // the copies start different
  // one more copy leaves the first three as they were
  auto longer = nn::repeat<4>(nn::dense<4, 4>(nn::relu));
  nitro::nn::layer_params<decltype(longer), double> ps4;
  nitro::nn::layer_state<decltype(longer), double> st4;
  nitro::for_each_leaf_type<decltype(longer)::param_spec>([&](auto kp, auto spec) {
    *nitro::find_leaf<D>(ps4, decltype(kp)::view()) = D::owned(decltype(spec)::type::shape());
  });
  nitro::rng g4(11);
  longer.init(ps4, st4, g4);
  CHECK(w(nitro::get<"weight">(nitro::get<"2">(ps4))) == w(nitro::get<"weight">(nitro::get<"2">(ps))));

  // the same as the three dense layers applied by hand, copy by copy
  D x = layer_check::random({4, 2}, g);
  D h = x;
  h = stack.block(h, nitro::get<"0">(ps), {}).first.clone();
  h = stack.block(h, nitro::get<"1">(ps), {}).first.clone();
  h = stack.block(h, nitro::get<"2">(ps), {}).first.clone();
  const D y = stack(x, ps, st).first.clone();
  for (std::int64_t i = 0; i < y.numel(); ++i) CHECK(y[i] == h[i]);
}

namespace layers_test {
// A residual MLP as a model struct: an encoder, two pre-LN residual blocks repeated, a head; the
// second block trains at a tenth of the rate through its path, as a user groups the copies.
struct ResNet {
  nn::chain_layer<nn::flatten_t, nn::dense_layer<784, 64, nn::relu_t>> encoder;
  nn::repeat_layer<2, nn::residual_layer<nn::chain_layer<nn::layer_norm_layer<64>, nn::dense_layer<64, 64, nn::gelu_t>>>> blocks;
  nn::dense_layer<64, 10> head;
  template <class Net, class X> auto forward(Net& net, X const& img) const {
    return nn::call<"head">(net, nn::call<"blocks">(net, nn::call<"encoder">(net, img)));
  }
};
NITRO_MODEL(ResNet, encoder, blocks, head);
struct ResidualMLP {
  nitro::Device<float> smoothing{0.0f};
  float lr = 3e-3f;
  int max_epochs = 1;
  std::int64_t batch_size = 64;
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 500, .train_limit = 4000, .test_limit = 1000}); }
  auto build_model() const { return nn::model(ResNet{}); }
  auto param_group(auto kp) const {
    if constexpr (kp.view().starts_with("blocks.1.")) return nitro::group<"late">{};
    else return nitro::group<"default">{};
  }
  double learning_rate(nitro::group<"late">) const { return 0.1 * lr; }
  auto forward(auto const& model, auto const& ps, auto const& st, FwdIn const& in) const { return model(in.img, ps, st); }
  auto loss(nitro::Tensor const& logits, LossIn const& in) const { return nitro::nn::logitcrossentropy(logits, in.label, smoothing); }
  auto metrics(nitro::Tensor const& logits, LossIn const& in) const {
    return Metrics{.acc = {nitro::nn::correct_count(logits, in.label), double(in.label.batch())}};
  }
};
NITRO_EXPERIMENT(ResidualMLP, smoothing, lr, max_epochs, batch_size);
}  // namespace layers_test

TEST_CASE("a model struct of an encoder, repeated residual blocks and a head learns a slice of Fashion-MNIST through the handle") {
  nitro::Nitro h(layers_test::ResidualMLP{});
  std::vector<std::string> paths;
  nitro::for_each_leaf(h.params(), [&](auto kp, auto const&) { paths.emplace_back(decltype(kp)::view()); });
  CHECK(paths.front() == "encoder.layer_2.weight");
  CHECK(std::find(paths.begin(), paths.end(), "blocks.0.layer_1.weight") != paths.end());
  CHECK(std::find(paths.begin(), paths.end(), "blocks.1.layer_2.weight") != paths.end());
  CHECK(paths.back() == "head.bias");
  auto before = h.evaluate("test");
  h.train(false);
  auto after = h.evaluate("test");
  INFO("loss " << before.at("loss") << " -> " << after.at("loss") << ", acc " << before.at("acc") << " -> " << after.at("acc"));
  CHECK(before.at("acc") < 0.3);
  CHECK(after.at("acc") > 0.7);  // chance is 0.10
  CHECK(after.at("loss") < before.at("loss"));

  nitro::cli::table t;
  std::vector<std::string> kernels;
  nitro::cli::detail::describe_layers(t, layers_test::ResidualMLP{}.build_model(), "", false, kernels);
  const std::string rows = t.str();
  INFO(rows);
  CHECK(rows.find("encoder.layer_2  dense<784, 64, relu>") != std::string::npos);
  CHECK(rows.find("blocks.0         residual(chain(layer_norm<64>, dense<64, 64, gelu>))") != std::string::npos);
  CHECK(rows.find("blocks.1.layer_2.weight [64, 64]") != std::string::npos);
  CHECK(rows.find("head             dense<64, 10>") != std::string::npos);
}

namespace layers_test {
// An encoder feeding two heads whose outputs add up: forward is the struct's own code.
struct TwoHeads {
  nn::dense_layer<3, 4, nn::tanh_t> enc;
  nn::dense_layer<4, 2> a;
  nn::dense_layer<4, 2, nn::sigmoid_t> b;
  template <class Net, class X> auto forward(Net& net, X const& x) const {
    auto h = nn::call<"enc">(net, x);
    return nn::call<"a">(net, h) + nn::call<"b">(net, h);
  }
};
NITRO_MODEL(TwoHeads, enc, a, b);
}  // namespace layers_test

TEST_CASE("a chain named by its type, as a model struct's member is, starts from its layers' initialisers") {
  // std::tuple's default constructor value-initialises its elements, and g++ 12 then zeroed the
  // dense layer's initializer options (kind 0: zeros): the encoder of a model struct started at 0.
  const nn::chain_layer<nn::flatten_t, nn::dense_layer<784, 64, nn::relu_t>> encoder;
  CHECK(encoder.at<1>().options.weight.describe() == nn::dense_layer<784, 64, nn::relu_t>{}.options.weight.describe());
  CHECK(encoder.at<1>().options.weight.describe() != "zeros");
}

TEST_CASE("model struct: parameters keyed by member names, forward's own wiring, one stream per member") {
  auto m = nn::model(layers_test::TwoHeads{});
  using M = decltype(m);
  std::vector<std::string> paths;
  nitro::for_each_leaf_type<M::param_spec>([&](auto kp, auto) { paths.emplace_back(decltype(kp)::view()); });
  CHECK(paths == std::vector<std::string>{"enc.weight", "enc.bias", "a.weight", "a.bias", "b.weight", "b.bias"});
  CHECK(m.describe() == "TwoHeads(enc: dense<3, 4, tanh>, a: dense<4, 2>, b: dense<4, 2, sigmoid>)");
  nitro::rng g(5);
  layer_check::fixture<M> f(g);
  D x = layer_check::random({3, 4}, g);
  const D y = m(x, f.ps, f.st).first.clone();
  const D h = m.model.enc(x, nitro::get<"enc">(f.ps), {}).first.clone();
  const D ya = m.model.a(h, nitro::get<"a">(f.ps), {}).first.clone();
  const D yb = m.model.b(h, nitro::get<"b">(f.ps), {}).first.clone();
  for (std::int64_t i = 0; i < y.numel(); ++i) CHECK(y[i] == doctest::Approx(ya[i] + yb[i]).epsilon(1e-15));
  // init: a and b have one shape but start apart
  nitro::nn::layer_params<M, double> ps;
  nitro::nn::layer_state<M, double> st;
  nitro::for_each_leaf_type<M::param_spec>([&](auto kp, auto spec) {
    *nitro::find_leaf<D>(ps, decltype(kp)::view()) = D::owned(decltype(spec)::type::shape());
  });
  nitro::rng gi(9);
  m.init(ps, st, gi);
  D const& wa = nitro::get<"weight">(nitro::get<"a">(ps));
  D const& wb = nitro::get<"weight">(nitro::get<"b">(ps));
  CHECK(std::vector<double>(wa.data(), wa.data() + wa.numel()) != std::vector<double>(wb.data(), wb.data() + wb.numel()));
}

TEST_CASE("causal attention: the tiles equal the materialised softmax(q.k / sqrt(d)) v over 150 tokens, and token t sees 0..t only") {
  const std::int64_t H = 2, d = 3, T = 150, B = 2, W = H * d;
  nitro::rng g(21);
  D qkv = layer_check::random({3 * W, T, B}, g);
  const D out = nitro::causal_attention(qkv, H).clone();
  REQUIRE(out.shape() == shape{W, T, B});
  double worst = 0;
  auto at = [&](std::int64_t row, std::int64_t t, std::int64_t b) { return qkv[row + 3 * W * (t + T * b)]; };
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < T; ++i) {
        std::vector<double> s(static_cast<std::size_t>(i + 1));
        double m = -1e300, l = 0;
        for (std::int64_t j = 0; j <= i; ++j) {
          double z = 0;
          for (std::int64_t e = 0; e < d; ++e) z += at(h * d + e, i, b) * at(W + h * d + e, j, b);
          s[std::size_t(j)] = z / std::sqrt(double(d));
          m = std::max(m, s[std::size_t(j)]);
        }
        for (auto& z : s) l += (z = std::exp(z - m));
        for (std::int64_t e = 0; e < d; ++e) {
          double o = 0;
          for (std::int64_t j = 0; j <= i; ++j) o += s[std::size_t(j)] * at(2 * W + h * d + e, j, b);
          worst = std::max(worst, std::abs(o / l - out[h * d + e + W * (i + T * b)]));
        }
      }
  CHECK(worst < 1e-12);
  // a later token's key or value changes no earlier output
  qkv[W + 3 * W * 100] += 1.0;
  qkv[2 * W + 3 * W * 120] += 1.0;
  const D moved = nitro::causal_attention(qkv, H).clone();
  for (std::int64_t i = 0; i < W * 100; ++i) CHECK(moved[i] == out[i]);
  CHECK(moved[W * 100] != out[W * 100]);
  CHECK_THROWS_WITH_AS(nitro::causal_attention(layer_check::random({10, 4, 1}, g), 2), doctest::Contains("E-SHAPE-017"), nitro::error);
  const auto attention = nn::causal_self_attention<4, 2>();
  nitro::nn::layer_params<decltype(attention), double> aps;
  CHECK_THROWS_WITH_AS(attention(layer_check::random({4, 3}, g), aps, {}), doctest::Contains("E-LAYER-001"), nitro::error);
}

namespace layers_test {
// Two pre-LN blocks over token and position embeddings: what generation decodes.
struct SmallLM {
  nn::embedding_layer<11, 8> tok;
  nn::positional_embedding_layer<40, 8> pos;
  nn::repeat_layer<2, nn::chain_layer<nn::residual_layer<nn::chain_layer<nn::layer_norm_layer<8>, nn::causal_self_attention_layer<8, 2>>>,
                                      nn::residual_layer<nn::chain_layer<nn::layer_norm_layer<8>, nn::dense_layer<8, 16, nn::gelu_t>,
                                                                         nn::dense_layer<16, 8>>>>>
      blocks;
  nn::dense_layer<8, 11> head;
  template <class Net, class X> auto forward(Net& net, X const& tokens) const {
    return nn::call<"head">(net, nn::call<"blocks">(net, nn::call<"pos">(net, nn::call<"tok">(net, tokens))));
  }
};
NITRO_MODEL(SmallLM, tok, pos, blocks, head);
}  // namespace layers_test

namespace layers_test {
// A byte model whose head is its token embedding read backwards (weight tying, GPT-2's): no
// head weight of its own; the embedding starts small (N(0, 0.02)), as tied embeddings do.
struct TiedNet {
  nn::embedding_layer<256, 32> tok{{.weight = nitro::init::normal(0.02)}};
  nn::positional_embedding_layer<16, 32> pos;
  nn::residual_layer<nn::chain_layer<nn::layer_norm_layer<32>, nn::causal_self_attention_layer<32, 2>>> attn;
  nn::residual_layer<nn::chain_layer<nn::layer_norm_layer<32>, nn::dense_layer<32, 64, nn::gelu_t>, nn::dense_layer<64, 32>>> mlp;
  nn::layer_norm_layer<32> ln_f;
  template <class Net, class X> auto forward(Net& net, X const& tokens) const {
    auto h = nn::call<"mlp">(net, nn::call<"attn">(net, nn::call<"pos">(net, nn::call<"tok">(net, tokens))));
    return nn::unembed<"tok">(net, nn::call<"ln_f">(net, h));
  }
};
NITRO_MODEL(TiedNet, tok, pos, attn, mlp, ln_f);
struct TiedRun {
  float lr = 3e-3f;
  std::int64_t batch_size = 16;
  std::int64_t max_steps = 60;
  auto build_data() const { return nitro::data::text_windows({.seq = 16}); }  // Debian's fortunes
  auto build_model() const { return nn::model(TiedNet{}); }
  auto forward(auto const& model, auto const& ps, auto const& st, nitro::data::tokens_in const& in) const { return model(in.tokens, ps, st); }
  auto loss(nitro::Tensor const& logits, nitro::data::targets_in const& in) const { return nitro::nn::logitcrossentropy(logits, in.targets); }
};
NITRO_EXPERIMENT(TiedRun, lr, batch_size, max_steps);
}  // namespace layers_test

TEST_CASE("weight tying: a byte model whose head is its embedding read backwards holds one table and learns text through the handle") {
  nitro::Nitro h(layers_test::TiedRun{});
  std::vector<std::string> paths;
  nitro::for_each_leaf(h.params(), [&](auto kp, auto const&) { paths.emplace_back(decltype(kp)::view()); });
  CHECK(paths.front() == "tok.weight");
  CHECK(std::none_of(paths.begin(), paths.end(), [](std::string const& p) { return p.starts_with("head"); }));
  CHECK(paths.back() == "ln_f.bias");
  auto before = h.evaluate("valid");
  h.train(false);
  auto after = h.evaluate("valid");
  INFO("valid loss " << before.at("loss") << " -> " << after.at("loss"));
  CHECK(before.at("loss") > 5.0);  // about ln 256 = 5.55: the small table gives near-uniform logits
  CHECK(after.at("loss") < 3.6);   // 60 steps of 256 bytes: the byte frequencies and more
}

TEST_CASE("decoding with the KV cache gives the logits of the whole window, a token at a time; the positions run out as a coded error") {
  auto m = nn::model(layers_test::SmallLM{});
  using M = decltype(m);
  nitro::nn::layer_params<M, double> ps;
  nitro::nn::layer_state<M, double> st;
  nitro::for_each_leaf_type<M::param_spec>([&](auto kp, auto spec) {
    *nitro::find_leaf<D>(ps, decltype(kp)::view()) = D::owned(decltype(spec)::type::shape());
  });
  nitro::rng g(17);
  m.init(ps, st, g);
  const std::vector<double> ids = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7};
  const std::int64_t T = std::int64_t(ids.size());
  const D full = m(D::from(ids, {T, 1}), ps, st).first.clone();  // [11, T, 1]
  nitro::decode_cache cache;
  auto piece = [&](std::int64_t from, std::int64_t n) {
    std::vector<double> part(ids.begin() + from, ids.begin() + from + n);
    nitro::decode_scope scope(cache, n);
    return m(D::from(part, {n, 1}), ps, st).first.clone();
  };
  double worst = 0;
  const D prompt = piece(0, 5);  // the prompt at once, then one token at a time
  for (std::int64_t i = 0; i < 11 * 5; ++i) worst = std::max(worst, std::abs(prompt[i] - full[i]));
  for (std::int64_t t = 5; t < T; ++t) {
    const D one = piece(t, 1);
    for (std::int64_t v = 0; v < 11; ++v) worst = std::max(worst, std::abs(one[v] - full[v + 11 * t]));
  }
  CHECK(worst < 1e-12);
  CHECK(cache.length() == T);
  CHECK(cache.positions() == 40);
  // past the 40 positions the model holds: a coded error, not a read past the table
  CHECK_NOTHROW(piece(0, 10));
  CHECK_THROWS_WITH_AS(piece(0, 1), doctest::Contains("E-LAYER-001"), nitro::error);
}

TEST_CASE("ir's kernels per backend: a dense layer's products on the CPU's gemm, on a GPU cuBLASLt's, with relu in its epilogue and gelu after it") {
  auto model = nn::chain(nn::dense<3, 4>(nn::relu), nn::dense<4, 4>(nn::gelu), nn::dense<4, 2>());
  nitro::cli::table t;
  std::vector<std::string> cpu, gpu;
  nitro::cli::detail::describe_layers(t, model, "", false, cpu);
  nitro::cli::detail::describe_layers(t, model, "", false, gpu, true);
  const std::vector<std::string> want_gpu{
      "layer_1  forward   cuBLASLt gemm [4 x 3] . [3 x B] + bias + relu in cuBLASLt's epilogue (one launch)",
      "layer_1  backward  relu' [4 x B] (one kernel), bias gradient: row sums [4 x B] -> [4] (one kernel)",
      "layer_1  backward  cuBLASLt gemm dW [4 x B] . [B x 3]",  // the first layer's input needs no gradient
      "layer_2  forward   cuBLASLt gemm [4 x 4] . [4 x B], then bias + gelu (one kernel)",  // gelu keeps its input
      "layer_2  backward  gelu' [4 x B] (one kernel), bias gradient: row sums [4 x B] -> [4] (one kernel)",
      "layer_2  backward  cuBLASLt gemm dW [4 x B] . [B x 4]",
      "layer_2  backward  cuBLASLt gemm dx [4 x 4] . [4 x B]",
      "layer_3  forward   cuBLASLt gemm [2 x 4] . [4 x B] + bias in cuBLASLt's epilogue (one launch)",
      "layer_3  backward  bias gradient: row sums [2 x B] -> [2] (one kernel)",
      "layer_3  backward  cuBLASLt gemm dW [2 x B] . [B x 4]",
      "layer_3  backward  cuBLASLt gemm dx [4 x 2] . [2 x B]"};
  CHECK(gpu == want_gpu);
  REQUIRE(cpu.size() == 13);  // the CPU lists the activation's derivative and the bias gradient apart
  CHECK(cpu[0] == "layer_1  forward   gemm<float> [4 x 3] . [3 x B] + bias + relu (one pass)");
  CHECK(cpu[4] == "layer_2  forward   gemm<float> [4 x 4] . [4 x B] + bias + gelu (one pass)");
}
