// bench_fused_mlp — training throughput of the fully fused MLP against one cuBLASLt product per
// layer, on the same network and data, as samples/s and as a fraction of the chip's peak.
//
//   ./bench_fused_mlp                    widths 32, 64, 128; batches 2^14 .. 2^20
//   ./bench_fused_mlp --quick            batches 2^14 and 2^17 only
//
// The network is tiny-cuda-nn's benchmark shape: W inputs -> 4 hidden layers of W (relu) -> 16
// outputs, i.e. five W x W products and one 16 x W. One measured step is forward (saving what
// backward needs) plus backward (weight and bias gradients, no input gradient) — the part of a
// training step the paths differ in. FLOPs per sample: 2 x (forward + weight-gradient + input-
// gradient multiply-adds), the first layer's input gradient excluded. Peak: SMs x clock x FLOP per
// clock per SM for the path's arithmetic (FP32 FMA, or dense TF32 tensor cores), from a table by
// compute capability (printed with the results, so the basis is visible).
#include <nitro/cuda.cuh>

#include <nitro/nn/layers/chain.hpp>
#include <nitro/nn/layers/dense.hpp>
#include <nitro/optim/param_store.hpp>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

template <int W>
auto make_model() {
  using namespace nitro::nn;
  return chain(dense<W, W>(relu), dense<W, W>(relu), dense<W, W>(relu), dense<W, W>(relu), dense<W, W>(relu), dense<W, 16>());
}

struct peak_info {
  double fp32 = 0, tf32 = 0;  // FLOP/s
  int sms = 0;
  double ghz = 0;
  int major = 0, minor = 0;
};

peak_info peak_of(int dev) {
  peak_info p;
  int clock_khz = 0;
  NITRO_CUDA_CHECK(cudaDeviceGetAttribute(&p.sms, cudaDevAttrMultiProcessorCount, dev));
  NITRO_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  NITRO_CUDA_CHECK(cudaDeviceGetAttribute(&p.major, cudaDevAttrComputeCapabilityMajor, dev));
  NITRO_CUDA_CHECK(cudaDeviceGetAttribute(&p.minor, cudaDevAttrComputeCapabilityMinor, dev));
  p.ghz = clock_khz / 1e6;
  // FLOP per clock per SM: FP32 (2 x FMA lanes), dense TF32 tensor cores
  double fp32 = 256, tf32 = 512;
  if (p.major == 8 && p.minor == 0) { fp32 = 128; tf32 = 1024; }     // A100
  else if (p.major == 8) { fp32 = 256; tf32 = 256; }                 // GA10x, AD10x
  else if (p.major == 9) { fp32 = 256; tf32 = 2048; }                // H100, H200
  else if (p.major >= 10) { fp32 = 256; tf32 = 2048; }               // (assumed as Hopper)
  p.fp32 = p.sms * p.ghz * 1e9 * fp32;
  p.tf32 = p.sms * p.ghz * 1e9 * tf32;
  return p;
}

struct measurement {
  double samples_per_second = 0, flops = 0;
};

template <int W, nitro::cuda::dense_path Path>
measurement measure(nitro::cuda_backend& be, long long batch, float const* x, float const* dy, int reps,
                    nitro::cuda::weight_grads wg = nitro::cuda::weight_grads::atomics) {
  using Model = decltype(make_model<W>());
  using Store = nitro::param_store<typename Model::param_spec>;
  using Program = nitro::cuda::dense_program<Model, Store, Path>;
  Store host(false);
  {
    nitro::rng g(7);
    auto ps = host.view();
    nitro::nn::layer_state<Model> st;
    make_model<W>().init(ps, st, g);
  }
  Program prog(be);
  prog.upload(host.values());
  prog.set_weight_grads(wg);
  auto step = [&] {
    prog.zero_grads();
    prog.forward(x, batch, true);
    prog.backward(dy, nullptr);
  };
  step();  // plans, buffers, shared-memory limits
  step();
  nitro::cuda::event start(true), stop(true);
  start.record(be.compute());
  for (int r = 0; r < reps; ++r) step();
  stop.record(be.compute());
  stop.synchronize();
  const double seconds = stop.since(start) / 1e3 / reps;
  const double macs = 5.0 * W * W + 16.0 * W;             // forward multiply-adds per sample
  const double flop_per_sample = 2.0 * (3.0 * macs - double(W) * W);  // fwd + dW + dX, no dX for layer 1
  measurement m;
  m.samples_per_second = double(batch) / seconds;
  m.flops = m.samples_per_second * flop_per_sample;
  return m;
}

template <int W>
void bench_width(nitro::cuda_backend& be, peak_info const& pk, std::vector<int> const& logs, float const* x, float const* dy) {
  using P = nitro::cuda::dense_path;
  for (int lg : logs) {
    const long long b = 1LL << lg;
    const int reps = lg >= 19 ? 3 : 5;
    const auto ft = measure<W, P::fused_tf32>(be, b, x, dy, reps);
    const auto fs = measure<W, P::fused_tf32>(be, b, x, dy, reps, nitro::cuda::weight_grads::gemm);
    const auto ff = measure<W, P::fused_fp32>(be, b, x, dy, reps);
    const auto lt = measure<W, P::cublaslt_tf32>(be, b, x, dy, reps);
    const auto lf = measure<W, P::cublaslt_fp32>(be, b, x, dy, reps);
    const double best_fused = ft.samples_per_second > fs.samples_per_second ? ft.samples_per_second : fs.samples_per_second;
    std::printf("%5d  2^%-2d | %9.3e %5.1f%% | %9.3e %5.1f%% | %9.3e %5.1f%% | %9.3e %5.1f%% | %9.3e %5.1f%% | %5.2fx %5.2fx\n", W, lg,
                ft.samples_per_second, 100 * ft.flops / pk.tf32, fs.samples_per_second, 100 * fs.flops / pk.tf32, ff.samples_per_second,
                100 * ff.flops / pk.fp32, lt.samples_per_second, 100 * lt.flops / pk.tf32, lf.samples_per_second, 100 * lf.flops / pk.fp32,
                best_fused / lt.samples_per_second, ff.samples_per_second / lf.samples_per_second);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  try {
    if (nitro::cuda::device_count() == 0) {
      std::printf("bench_fused_mlp: SKIPPED: no CUDA device on this machine\n");
      return 77;
    }
    nitro::cuda_backend be(0);
    cudaDeviceProp prop{};
    NITRO_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const peak_info pk = peak_of(0);
    std::printf("device: %s, sm_%d%d, %d SMs at %.2f GHz; peak FP32 %.1f TFLOP/s, dense TF32 %.1f TFLOP/s\n", prop.name, pk.major, pk.minor,
                pk.sms, pk.ghz, pk.fp32 / 1e12, pk.tf32 / 1e12);
    std::printf("network: W -> 4 x W (relu) -> 16; one step = forward + backward (weight and bias gradients)\n");
    std::printf("samples/s and fraction of the path's peak (TF32 paths against the TF32 peak, FP32 against FP32)\n");
    std::printf("fused TF32 a: weight gradients by atomics in the kernel; s: by one cuBLASLt GEMM per layer (split)\n");
    std::printf("width batch| fused TF32 a        | fused TF32 s        | fused FP32          | cuBLASLt TF32       | cuBLASLt FP32       | fused/cuBLASLt TF32 (best), FP32\n");
    std::vector<int> logs = quick ? std::vector<int>{14, 17} : std::vector<int>{14, 15, 16, 17, 18, 19, 20};
    const long long max_b = 1LL << logs.back();
    // inputs and output gradients for the largest batch, random (W <= 128 inputs, 16 outputs)
    nitro::cuda::device_buffer<float> x(static_cast<std::size_t>(128 * max_b)), dy(static_cast<std::size_t>(16 * max_b));
    {
      std::vector<float> h(static_cast<std::size_t>(128 * max_b));
      std::mt19937 g(1);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (auto& v : h) v = u(g);
      NITRO_CUDA_CHECK(cudaMemcpy(x.data(), h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
      for (std::size_t i = 0; i < static_cast<std::size_t>(16 * max_b); ++i) h[i] = u(g) * 1e-3f;
      NITRO_CUDA_CHECK(cudaMemcpy(dy.data(), h.data(), static_cast<std::size_t>(16 * max_b) * sizeof(float), cudaMemcpyHostToDevice));
    }
    bench_width<32>(be, pk, logs, x.data(), dy.data());
    bench_width<64>(be, pk, logs, x.data(), dy.data());
    bench_width<128>(be, pk, logs, x.data(), dy.data());
    return 0;
  } catch (nitro::error const& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
