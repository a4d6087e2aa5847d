// nitro/kernels/loss.cuh — the fused loss: softmax cross-entropy with label smoothing read from the
// device-scalar block, its gradient, and the metric sums, in one pass over the logits.
//
//   nitro::cuda::softmax_xent(logits, C, B, target, target_is_index, smoothing_ref, scalars,
//                             dlogits /*or null*/, sums /*device metric_sums*/, stream);
//
// One thread per sample (C is small: the classes). The gradient is of the batch mean, as
// nitro::nn::logitcrossentropy's. The sums (loss, correct, samples) accumulate on the device across
// batches and are read once per epoch, so a training step never waits for the host. A smoothing
// outside [0, 1] or a class index outside [0, C) sets a flag in the sums instead of computing
// garbage; metric_sums::check() turns the flag into the CPU backend's error (E-LOSS-002/-003).
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/tensor/cuda/pointwise.hpp"
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/cuda/scalars.hpp"

#include <cuda_runtime.h>

namespace nitro::cuda {

// Accumulated on the device; copy to the host to read.
struct metric_sums {
  double loss = 0;     // sum over samples of the per-sample loss
  double correct = 0;  // samples whose arg-max is the target's
  double samples = 0;
  unsigned flags = 0;  // 1: smoothing outside [0, 1]; 2: a class index outside [0, C)

  static constexpr unsigned bad_smoothing = 1u, bad_index = 2u;
  double mean_loss() const noexcept { return samples > 0 ? loss / samples : 0.0; }
  double accuracy() const noexcept { return samples > 0 ? correct / samples : 0.0; }
  void check() const {
    if (flags & bad_smoothing)
      throw error("E-LOSS-002", "logitcrossentropy on the device read a label smoothing outside [0, 1] from the device scalars",
                  "schedule or set a smoothing between 0 and 1 (0.05 or 0.1 are common)");
    if (flags & bad_index)
      throw error("E-LOSS-003", "logitcrossentropy on the device met a class index outside [0, classes)",
                  "class indices count from 0 to classes - 1");
  }
};

namespace kernels {

template <bool Index>
__global__ void softmax_xent_batch(float const* logits, int C, long long B, float const* target, scalar_ref smoothing, void const* scalars,
                             float* dlogits, metric_sums* sums) {
  const long long s = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const float sm = static_cast<float>(smoothing.read(scalars));
  float loss = 0.0f, correct = 0.0f, count = 0.0f;
  unsigned flags = 0;
  if (!(sm >= 0.0f && sm <= 1.0f)) flags |= metric_sums::bad_smoothing;
  if (s < B && flags == 0) {
    float const* x = logits + s * C;
    float* g = dlogits ? dlogits + s * C : nullptr;
    int index = -1;
    float const* t = nullptr;
    if constexpr (Index) {
      index = static_cast<int>(target[s]);
      if (index < 0 || index >= C || static_cast<float>(index) != target[s]) flags |= metric_sums::bad_index;
    } else {
      t = target + s * C;
    }
    if (flags == 0) {
      const xent_result r = ::nitro::cuda::softmax_xent(x, C, t, index, sm, 1.0f / static_cast<float>(B), g);
      loss = r.loss;
      correct = r.correct ? 1.0f : 0.0f;
      count = 1.0f;
    }
  }
  if (s < B && flags != 0 && dlogits)  // a flagged sample moves nothing
    for (int i = 0; i < C; ++i) dlogits[s * C + i] = 0.0f;
  // block sums: warp shuffles, then one atomic per block
  for (int o = 16; o > 0; o >>= 1) {
    loss += __shfl_down_sync(0xffffffffu, loss, o);
    correct += __shfl_down_sync(0xffffffffu, correct, o);
    count += __shfl_down_sync(0xffffffffu, count, o);
    flags |= __shfl_down_sync(0xffffffffu, flags, o);
  }
  __shared__ float part[3][32];
  __shared__ unsigned part_flags[32];
  const int w = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) {
    part[0][w] = loss;
    part[1][w] = correct;
    part[2][w] = count;
    part_flags[w] = flags;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double l = 0, c = 0, n = 0;
    unsigned f = 0;
    for (unsigned i = 0; i < (blockDim.x + 31) / 32; ++i) {
      l += part[0][i];
      c += part[1][i];
      n += part[2][i];
      f |= part_flags[i];
    }
    if (sums) {
      atomicAdd(&sums->loss, l);
      atomicAdd(&sums->correct, c);
      atomicAdd(&sums->samples, n);
      if (f) atomicOr(&sums->flags, f);
    }
  }
}

}  // namespace kernels

// logits [C, B]; target one-hot/soft [C, B] (target_is_index false) or class indices [B] stored as
// floats (true); dlogits [C, B] receives d(mean loss)/d(logits) when not null; sums accumulate.
inline void softmax_xent(float const* logits, int C, long long B, float const* target, bool target_is_index, scalar_ref smoothing,
                         void const* scalars, float* dlogits, metric_sums* sums, cudaStream_t s) {
  if (B <= 0) return;
  const unsigned blocks = static_cast<unsigned>((B + 255) / 256);
  if (target_is_index) kernels::softmax_xent_batch<true><<<blocks, 256, 0, s>>>(logits, C, B, target, smoothing, scalars, dlogits, sums);
  else kernels::softmax_xent_batch<false><<<blocks, 256, 0, s>>>(logits, C, B, target, smoothing, scalars, dlogits, sums);
  check_launch("nitro::cuda::kernels::softmax_xent_batch");
}

}  // namespace nitro::cuda
