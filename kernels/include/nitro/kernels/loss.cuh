// nitro/kernels/loss.cuh — the losses on the GPU.
//
// The kernels table's losses (device_ops::cross_entropy, squared_error, binary_cross_entropy and
// their backward; tensor/loss.hpp says what each computes and holds the arithmetic of one column or
// element, which these kernels run):
//
//   nitro::cuda::cross_entropy<float>(stream, C, B, logits, target, indices, s, p, loss, flags);
//   nitro::cuda::cross_entropy_backward<float>(stream, C, B, p, target, indices, s, gloss, glogits);
//   nitro::cuda::squared_error<float>(stream, n, a, b, loss);  ... binary_cross_entropy ...
//   nitro::cuda::classification_counts<float>(stream, C, B, logits, target, indices, correct, confusion);   // the metrics' counts
//
// A mean is one block's: its threads sum their share in order and combine in a fixed tree, so a
// loss has the same bits on every run; the backward reads the loss's gradient through a pointer
// (no host sync). A class index outside [0, C) cannot throw from a kernel: it makes the loss NaN
// (a non-finite loss, where a run's divergence check stops it) and, given `flags`, ors metric_sums::bad_index into
// it, which metric_sums::check() turns into the CPU's E-LOSS-003.
//
// The fused program's loss: softmax cross-entropy with label smoothing read from the device-scalar
// block, its gradient, and the metric sums, in one pass over the logits.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/kernels/reduction.cuh"  // block_combine
#include "nitro/tensor/loss.hpp"
#include "nitro/tensor/cuda/pointwise.hpp"
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/cuda/scalars.hpp"

#include <cuda_runtime.h>

#include <cstdint>  // int64_t
#include <limits>   // quiet_NaN

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

// ---- the kernels table's losses ---------------------------------------------------------------------
namespace detail {

template <class T>
__global__ void cross_entropy_columns(std::int64_t C, std::int64_t B, T const* x, T const* t, bool indices, T on, T off, T* p, T* loss,
                                      unsigned* flags) {
  __shared__ T shared[reduce_threads];
  T part = T(0);
  for (std::int64_t c = threadIdx.x; c < B; c += reduce_threads) {
    const std::int64_t k = indices ? static_cast<std::int64_t>(t[c]) : -1;
    T const* tc = indices ? nullptr : t + c * C;
    const T l = ::nitro::loss::cross_entropy_column(x + c * C, C, tc, k, on, off, p + c * C);
    if (indices && (k < 0 || k >= C)) {
      part += std::numeric_limits<T>::quiet_NaN();
      if (flags) atomicOr(flags, metric_sums::bad_index);
    } else {
      part += l;
    }
  }
  const T total = block_combine(part, false, shared);
  if (threadIdx.x == 0) loss[0] = B ? total / static_cast<T>(B) : T(0);
}

template <class T>
__global__ void cross_entropy_columns_backward(std::int64_t C, std::int64_t B, T const* p, T const* t, bool indices, T on, T off,
                                               T const* gloss, T* g) {
  const T scale = gloss[0] / static_cast<T>(B);
  for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; c < B;
       c += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    ::nitro::loss::cross_entropy_column_backward(p + c * C, C, indices ? nullptr : t + c * C,
                                                 indices ? static_cast<std::int64_t>(t[c]) : std::int64_t(-1), on, off, scale, g + c * C);
}

// The mean over n elements of squared_error (bce: false) or binary_cross_entropy (bce: true).
template <class T>
__global__ void elementwise_mean_loss(bool bce, std::int64_t n, T const* a, T const* b, T* loss) {
  __shared__ T shared[reduce_threads];
  T part = T(0);
  for (std::int64_t i = threadIdx.x; i < n; i += reduce_threads)
    part += bce ? ::nitro::loss::binary_cross_entropy(a[i], b[i]) : ::nitro::loss::squared_error(a[i], b[i]);
  const T total = block_combine(part, false, shared);
  if (threadIdx.x == 0) loss[0] = n ? total / static_cast<T>(n) : T(0);
}

template <class T>
__global__ void elementwise_mean_loss_backward(bool bce, std::int64_t n, T const* a, T const* b, T const* gloss, T* ga, T* gb) {
  const T k = (bce ? T(1) : T(2)) * gloss[0] / static_cast<T>(n);
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (bce) {
      if (ga) ga[i] += (::nitro::elementwise::sigmoid(a[i]) - b[i]) * k;
      if (gb) gb[i] -= a[i] * k;
    } else {
      const T d = (a[i] - b[i]) * k;
      if (ga) ga[i] += d;
      if (gb) gb[i] -= d;
    }
  }
}

}  // namespace detail

// logits [C, B]; target [C, B] or B class indices (`indices`); p [C, B] receives the softmax and
// loss[0] the mean over the columns; flags (device, may be null) learns of a bad class index.
template <class T>
void cross_entropy(cudaStream_t s, std::int64_t C, std::int64_t B, T const* logits, T const* target, bool indices, T smoothing, T* p, T* loss,
                   unsigned* flags = nullptr) {
  const T off = smoothing / static_cast<T>(C), on = T(1) - smoothing;
  detail::cross_entropy_columns<T><<<1, detail::reduce_threads, 0, s>>>(C, B, logits, target, indices, on, off, p, loss, flags);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
template <class T>
void cross_entropy_backward(cudaStream_t s, std::int64_t C, std::int64_t B, T const* p, T const* target, bool indices, T smoothing,
                            T const* gloss, T* glogits) {
  if (B <= 0) return;
  const T off = smoothing / static_cast<T>(C), on = T(1) - smoothing;
  detail::cross_entropy_columns_backward<T><<<detail::blocks_of(B, 256, 4096), 256, 0, s>>>(C, B, p, target, indices, on, off, gloss, glogits);
  NITRO_CUDA_CHECK(cudaGetLastError());
}

namespace detail {
// The squared error's (bce: false) or the binary cross-entropy's mean, and its backward.
template <class T>
void mean_loss(cudaStream_t s, bool bce, std::int64_t n, T const* a, T const* b, T* loss) {
  elementwise_mean_loss<T><<<1, reduce_threads, 0, s>>>(bce, n, a, b, loss);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
template <class T>
void mean_loss_backward(cudaStream_t s, bool bce, std::int64_t n, T const* a, T const* b, T const* gloss, T* ga, T* gb) {
  if (n <= 0) return;
  elementwise_mean_loss_backward<T><<<blocks_of(n, 256, 4096), 256, 0, s>>>(bce, n, a, b, gloss, ga, gb);
  NITRO_CUDA_CHECK(cudaGetLastError());
}
}  // namespace detail

template <class T>
void squared_error(cudaStream_t s, std::int64_t n, T const* a, T const* b, T* loss) { detail::mean_loss(s, false, n, a, b, loss); }
template <class T>
void squared_error_backward(cudaStream_t s, std::int64_t n, T const* a, T const* b, T const* gloss, T* ga, T* gb) {
  detail::mean_loss_backward(s, false, n, a, b, gloss, ga, gb);
}
template <class T>
void binary_cross_entropy(cudaStream_t s, std::int64_t n, T const* x, T const* t, T* loss) { detail::mean_loss(s, true, n, x, t, loss); }
template <class T>
void binary_cross_entropy_backward(cudaStream_t s, std::int64_t n, T const* x, T const* t, T const* gloss, T* gx, T* gt) {
  detail::mean_loss_backward(s, true, n, x, t, gloss, gx, gt);
}

namespace detail {
// A thread per column; each warp's right answers are one ballot, added by its first lane. Counts
// are integers, so the atomic adds are exact in any order: the same result on every run.
template <class T>
__global__ void classification_counts_kernel(std::int64_t C, std::int64_t B, T const* logits, T const* target, bool indices, T* correct,
                                             T* confusion) {
  for (std::int64_t base = std::int64_t(blockIdx.x) * blockDim.x; base < B; base += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t c = base + threadIdx.x;  // `base` is the block's: its warps loop together
    bool right = false;
    if (c < B) {
      const std::int64_t predicted = loss::argmax_column(logits + c * C, C), truth = loss::target_class(target, indices, c, C);
      right = predicted == truth;
      if (confusion && truth >= 0 && truth < C) atomicAdd(confusion + truth + predicted * C, T(1));
    }
    const unsigned votes = __ballot_sync(0xffffffffu, right);
    if (correct && (threadIdx.x & 31u) == 0 && votes) atomicAdd(correct, static_cast<T>(__popc(votes)));
  }
}
}  // namespace detail

// The metrics' counts (device_ops::classification_counts): correct[0] (when not null) += the
// columns whose first largest logit is at their true class; confusion [C, C] (when not null) += 1
// at (true, predicted) of each column whose true class is in [0, C).
template <class T>
void classification_counts(cudaStream_t s, std::int64_t C, std::int64_t B, T const* logits, T const* target, bool indices, T* correct,
                           T* confusion) {
  if (B <= 0 || C <= 0 || (!correct && !confusion)) return;
  detail::classification_counts_kernel<T><<<detail::blocks_of(B, 256, 4096), 256, 0, s>>>(C, B, logits, target, indices, correct, confusion);
  NITRO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace nitro::cuda
