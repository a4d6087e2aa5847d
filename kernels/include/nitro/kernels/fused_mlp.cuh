// nitro/kernels/fused_mlp.cuh — the fully fused MLP kernels: every layer of a batch tile in one
// kernel, forward and backward, instantiated for one mlp_config (the experiment's GraphConst widths).
//
//   using Cfg = nitro::cuda::fused_mlp_config_t<decltype(e.build_model()), nitro::cuda::tile::math::tf32>;
//   nitro::cuda::fused_mlp_kernels<Cfg>::forward(args, /*training=*/true, stream);
//   nitro::cuda::fused_mlp_kernels<Cfg>::backward(args, stream);
//
// One block per tile of Cfg::bt samples, Cfg::threads threads, the programs of
// nitro/tensor/cuda/mlp_tile.hpp (the same ones the CPU tests emulate). The weight and bias
// gradients accumulate (+=) with atomics: zero them before the first backward of a step.
#pragma once

#include "nitro/tensor/cuda/mlp_tile.hpp"
#include "nitro/tensor/cuda/runtime.cuh"

#include <cuda_runtime.h>

#include <atomic>   // which devices have the shared-memory limit raised
#include <cstdint>  // uint64_t
#include <string>   // messages

namespace nitro::cuda {

namespace kernels {

template <class Cfg>
__global__ void __launch_bounds__(Cfg::threads) mlp_forward(mlp_args a, bool training) {
  extern __shared__ float4 nitro_mlp_smem[];
  const tile::device_block blk{static_cast<int>(threadIdx.x), Cfg::threads};
  mlp_forward_tile<Cfg>(blk, a, reinterpret_cast<float*>(nitro_mlp_smem), static_cast<long long>(blockIdx.x) * Cfg::bt, training);
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::threads) mlp_backward(mlp_args a) {
  extern __shared__ float4 nitro_mlp_smem[];
  const tile::device_block blk{static_cast<int>(threadIdx.x), Cfg::threads};
  mlp_backward_tile<Cfg>(blk, a, reinterpret_cast<float*>(nitro_mlp_smem), static_cast<long long>(blockIdx.x) * Cfg::bt);
}

}  // namespace kernels

template <class Cfg>
struct fused_mlp_kernels {
  using config = Cfg;

  static long long blocks(long long batch) { return (batch + Cfg::bt - 1) / Cfg::bt; }

  // Raises the kernels' dynamic shared-memory limit on the current device (once per device), after
  // checking the device has that much: E-CUDA-009 otherwise.
  static void prepare() {
    int dev = 0;
    NITRO_CUDA_CHECK(cudaGetDevice(&dev));
    static std::atomic<std::uint64_t> done{0};
    const std::uint64_t bit = std::uint64_t(1) << (dev & 63);
    if (done.load() & bit) return;
    int optin = 0;
    NITRO_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (optin < Cfg::backward_smem_bytes)
      throw error("E-CUDA-009",
                  "the fused MLP of width " + std::to_string(Cfg::width) + " needs " + std::to_string(Cfg::backward_smem_bytes) +
                      " bytes of shared memory per block; device " + std::to_string(dev) + " offers " + std::to_string(optin),
                  "use a narrower width, or nitro::cuda::dense_path::cublaslt for this model");
    NITRO_CUDA_CHECK(cudaFuncSetAttribute(kernels::mlp_forward<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::forward_smem_bytes));
    NITRO_CUDA_CHECK(cudaFuncSetAttribute(kernels::mlp_backward<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::backward_smem_bytes));
    done.fetch_or(bit);
  }

  static void forward(mlp_args const& a, bool training, cudaStream_t s) {
    if (a.batch <= 0) return;
    prepare();
    kernels::mlp_forward<Cfg><<<static_cast<unsigned>(blocks(a.batch)), Cfg::threads, Cfg::forward_smem_bytes, s>>>(a, training);
    check_launch("nitro::cuda::kernels::mlp_forward");
  }
  static void backward(mlp_args const& a, cudaStream_t s) {
    if (a.batch <= 0) return;
    prepare();
    kernels::mlp_backward<Cfg><<<static_cast<unsigned>(blocks(a.batch)), Cfg::threads, Cfg::backward_smem_bytes, s>>>(a);
    check_launch("nitro::cuda::kernels::mlp_backward");
  }
};

}  // namespace nitro::cuda
