// GPU tests of the handle: the same experiment, through nitro::Nitro, on nitro::cuda_device{} and on
// the CPU. Built wherever nvcc is (tests/gpu/CMakeLists.txt); without a CUDA device the program
// prints a SKIPPED line and exits 77, which CTest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <nitro/cuda.cuh>
#include <nitro/nitro.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace {

struct Batch { BOOST_HANA_DEFINE_STRUCT(Batch, (nitro::Tensor, x), (nitro::Tensor, label)); };
struct In { BOOST_HANA_DEFINE_STRUCT(In, (nitro::Tensor, x)); };
struct LabelIn { BOOST_HANA_DEFINE_STRUCT(LabelIn, (nitro::Tensor, label)); };
struct Metrics { BOOST_HANA_DEFINE_STRUCT(Metrics, (nitro::mean_of, acc)); };

// Four classes of points in 16 dimensions; a dense layer, batch norm (a model state), dropout-free,
// AdamW or SAM(AdamW), label smoothing from a Device field.
template <bool Sam>
struct Blobs {
  std::int64_t batch_size = 32;
  nitro::Device<float> smoothing{0.1f};
  auto build_data() const {
    auto make = [](int n, int shift) {
      nitro::Tensor x = nitro::Tensor::owned({16, n}), label = nitro::Tensor::owned({n});
      for (int i = 0; i < n; ++i) {
        const int c = (i * 7 + shift) % 4;
        for (int f = 0; f < 16; ++f) x(f, i) = (f % 4 == c ? 1.0f : 0.0f) + 0.25f * float(((i + 3) * (f + 5)) % 7 - 3) / 3.0f;
        label[i] = float(c);
      }
      return Batch{x, label};
    };
    return nitro::data::dataset<Batch>{"blobs", {{"train", make(256, 0)}, {"valid", make(96, 1)}}, "blobs"};
  }
  auto build_model() const {
    return nitro::nn::chain(nitro::nn::dense<16, 32>(nitro::nn::relu), nitro::nn::batch_norm<32>(), nitro::nn::dense<32, 4>());
  }
  auto forward(auto const& m, auto const& ps, auto const& st, In const& in) const { return m(in.x, ps, st); }
  auto loss(nitro::Tensor const& y, LabelIn const& t) const { return nitro::nn::logitcrossentropy(y, t.label, smoothing); }
  auto metrics(nitro::Tensor const& y, LabelIn const& t) const { return Metrics{{nitro::nn::correct(y, t.label), double(t.label.numel())}}; }
  auto optimizer() const {
    if constexpr (Sam) return nitro::optim::sam(nitro::optim::adamw());
    else return nitro::optim::adamw();
  }
};
NITRO_EXPERIMENT(Blobs<false>, batch_size, smoothing);
NITRO_EXPERIMENT(Blobs<true>, batch_size, smoothing);

// fashion_cnn's layers on real data: 1280 Fashion-MNIST training images (256 held out as valid),
// two convolutions with relu, max pooling, batch norm, two dense layers; no dropout, so both
// backends train the same function.
struct ImgIn { BOOST_HANA_DEFINE_STRUCT(ImgIn, (nitro::Tensor, img)); };
struct Convs {
  std::int64_t batch_size = 128;
  nitro::Device<float> smoothing{0.05f};
  auto build_data() const { return nitro::data::fashion_mnist({.valid = 256, .train_limit = 1280, .test_limit = 256}); }
  auto build_model() const {
    namespace nn = nitro::nn;
    return nn::chain(nn::conv2d<1, 8, 3, 1, 1>(nn::relu), nn::max_pool<2>(), nn::batch_norm<8>(),  // [14, 14, 8, B]
                     nn::conv2d<8, 16, 3, 1, 1>(nn::relu), nn::max_pool<2>(),                     // [7, 7, 16, B]
                     nn::flatten, nn::dense<784, 32>(nn::relu), nn::dense<32, 10>());
  }
  auto forward(auto const& m, auto const& ps, auto const& st, ImgIn const& in) const { return m(in.img, ps, st); }
  auto loss(nitro::Tensor const& y, LabelIn const& t) const { return nitro::nn::logitcrossentropy(y, t.label, smoothing); }
  auto metrics(nitro::Tensor const& y, LabelIn const& t) const { return Metrics{{nitro::nn::correct(y, t.label), double(t.label.batch())}}; }
};
NITRO_EXPERIMENT(Convs, batch_size, smoothing);

// ||a - b|| / ||b||: Adam divides by sqrt(v), so one weight whose gradient is ~0 on one backend and
// tiny on the other moves a whole step either way; the whole array's error is the measure.
double norm_rel_error(float const* a, float const* b, std::int64_t n) {
  double d = 0, r = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    d += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    r += double(b[i]) * double(b[i]);
  }
  return std::sqrt(d / (r > 0 ? r : 1.0));
}

template <bool Sam>
void handle_on_gpu_follows_the_cpu(int accum) {
  CAPTURE(Sam);
  CAPTURE(accum);
  using E = Blobs<Sam>;
  nitro::Nitro g(E{}, nitro::max_epochs = 8, nitro::accum = accum, nitro::logger = nitro::no_loggers, nitro::device = nitro::cuda_device{});
  static_assert(std::is_same_v<typename decltype(g)::backend_type, nitro::cuda_backend>);
  g.train(false);
  nitro::Nitro c(E{}, nitro::max_epochs = 8, nitro::accum = accum, nitro::logger = nitro::no_loggers);
  c.train(false);
  const auto n = std::remove_cvref_t<decltype(g.param_buffer())>::size;
  const auto ns = std::remove_cvref_t<decltype(g.state_buffer())>::size;
  const double ep = norm_rel_error(g.param_buffer().values(), c.param_buffer().values(), n);
  const double es = norm_rel_error(g.state_buffer().values(), c.state_buffer().values(), ns);
  std::printf("  handle, SAM %d, accum %d, 8 epochs: parameters relative error %.3e, state %.3e (of the whole array)\n", int(Sam), accum, ep, es);
  CHECK(ep < 1e-3);
  CHECK(es < 1e-3);
  CHECK(g.step_memory().device() == nitro::device_kind::cuda);
  CHECK(g.device_crossings().uploads > 0);
  CHECK(g.device_crossings().downloads > 0);
  const auto vg = g.evaluate("valid"), vc = c.evaluate("valid");
  std::printf("  valid: acc %.4f (GPU) %.4f (CPU), loss %.6f / %.6f\n", vg.at("acc"), vc.at("acc"), vg.at("loss"), vc.at("loss"));
  CHECK(std::fabs(vg.at("acc") - vc.at("acc")) <= 2.0 / 96 + 1e-9);  // a sample or two on a class boundary
  CHECK(vg.at("loss") == doctest::Approx(vc.at("loss")).epsilon(1e-3));
  CHECK(vg.at("acc") > 0.95);  // it learned (the same runs on the CPU: 1.0 in each configuration)
  const std::string shown = nitro::show_text(g.description());
  CHECK(shown.find("cuda:0") != std::string::npos);
  CHECK(shown.find("copies: the parameters and the model's state to cuda") != std::string::npos);
}

}  // namespace

TEST_CASE("the handle on the GPU: nitro::device = nitro::cuda_device{} trains the CPU's experiment to the CPU's weights, state and metrics") {
  handle_on_gpu_follows_the_cpu<false>(1);
  handle_on_gpu_follows_the_cpu<false>(2);
  handle_on_gpu_follows_the_cpu<true>(1);
}

TEST_CASE("the handle on the GPU: fashion_cnn's layers (convolution, pooling, batch norm, dense) on Fashion-MNIST follow the CPU") {
  nitro::Nitro g(Convs{}, nitro::max_epochs = 3, nitro::logger = nitro::no_loggers, nitro::device = nitro::cuda_device{});
  g.train(false);
  nitro::Nitro c(Convs{}, nitro::max_epochs = 3, nitro::logger = nitro::no_loggers);
  c.train(false);
  const auto n = std::remove_cvref_t<decltype(g.param_buffer())>::size;
  const auto ns = std::remove_cvref_t<decltype(g.state_buffer())>::size;
  const double ep = norm_rel_error(g.param_buffer().values(), c.param_buffer().values(), n);
  const double es = norm_rel_error(g.state_buffer().values(), c.state_buffer().values(), ns);
  const auto vg = g.evaluate("valid"), vc = c.evaluate("valid");
  CHECK(g.step() == 30);  // 3 epochs of 1280 training images, batches of 128
  CHECK(c.step() == 30);
  std::printf("  convolutions, 3 epochs of 10 steps: parameters relative error %.3e, state %.3e; valid acc %.4f (GPU) %.4f (CPU), loss %.6f / %.6f\n",
              ep, es, vg.at("acc"), vc.at("acc"), vg.at("loss"), vc.at("loss"));
  // the products and convolutions sum in another order on the GPU; 30 Adam steps keep that small
  CHECK(ep < 1e-2);
  CHECK(es < 1e-2);
  CHECK(std::fabs(vg.at("acc") - vc.at("acc")) <= 3.0 / 256 + 1e-9);  // a few of 256 images on a boundary
  CHECK(vg.at("loss") == doctest::Approx(vc.at("loss")).epsilon(1e-2));
  CHECK(vg.at("acc") > 0.6);  // it learned: chance is 0.1 (the CPU run alone reaches 0.707)
}

TEST_CASE("the handle on the GPU: a Device field set between steps is what the next evaluation's loss reads, with no rebuild") {
  nitro::Nitro g(Blobs<false>{}, nitro::max_epochs = 1, nitro::logger = nitro::no_loggers, nitro::device = nitro::cuda_device{});
  g.train(false);
  const double before = g.evaluate("valid").at("loss");
  g.set_device("smoothing", 0.0f);
  const double after = g.evaluate("valid").at("loss");
  CHECK(after != doctest::Approx(before));  // the loss reads the new smoothing
  CHECK(after < before);                    // unsmoothed targets: a confident model's loss drops
}

int main(int argc, char** argv) {
  if (nitro::cuda::device_count() == 0) {
    std::printf("test_gpu_handle: SKIPPED: no CUDA device on this machine (cudaGetDeviceCount reports none); the GPU tests need one\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
