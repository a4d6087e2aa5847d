// nitro/cuda.cuh — the CUDA backend in one include, for translation units nvcc compiles.
//
//   nitro::cuda_backend                 transfers, device scalars, streams, cuBLASLt / cuDNN handles
//   nitro::cuda::stream_memory          device memory for a step arena (be.memory())
//   nitro::cuda::ops                    the kernels table on the GPU (be.ops()): every device_ops
//                                       entry, queued on the compute stream
//   nitro::cuda::bias_activation, epilogue_backward   a product's bias and activation, and its backward
//   nitro::cuda::causal_attention       causal multi-head attention, forward and backward
//   nitro::cuda::map, binary            element-wise maps and broadcast arithmetic, forward and backward
//   nitro::cuda::reduce, softmax        reductions and softmax, forward and backward
//   nitro::cuda::copy, transpose        copies between shapes (and their accumulating backward)
//   nitro::cuda::layer_norm, batch_norm, dropout, embedding, pool2d   the layers' kernels, each way
//   nitro::cuda::im2col, col2im, channel_bias_activation   a convolution's pieces (ops runs conv2d)
//   nitro::cuda::dense_program<Model>   a training step on the device for dense models (fused MLP
//                                       kernels instantiated from the GraphConst widths, or cuBLASLt)
//   nitro::cuda::dense_optimizer        one fused optimizer update per parameter group
//   nitro::cuda::conv2d_dnn, pool2d_dnn, batch_norm_dnn   cuDNN layers (NITRO_HAVE_CUDNN)
//   nitro::cuda::data_parallel          n_devs over NCCL (NITRO_HAVE_NCCL)
// docs/cuda.md says how to build and use it; docs/cuda-integration.md how the handle adopts it.
#pragma once

#if !defined(__CUDACC__)
#error "nitro/cuda.cuh is for translation units compiled by nvcc (.cu files); the CPU-side pieces are in nitro/tensor/cuda/*.hpp"
#endif

#include "nitro/kernels/attention.cuh"
#include "nitro/kernels/conv.cuh"
#include "nitro/kernels/copy.cuh"
#include "nitro/kernels/cudnn.cuh"
#include "nitro/kernels/dense_lt.cuh"
#include "nitro/kernels/dropout.cuh"
#include "nitro/kernels/elementwise.cuh"
#include "nitro/kernels/embedding.cuh"
#include "nitro/kernels/epilogue.cuh"
#include "nitro/kernels/fused_mlp.cuh"
#include "nitro/kernels/loss.cuh"
#include "nitro/kernels/memory.cuh"
#include "nitro/kernels/norm.cuh"
#include "nitro/kernels/ops.cuh"
#include "nitro/kernels/optimizer.cuh"
#include "nitro/kernels/pointwise.cuh"
#include "nitro/kernels/pooling.cuh"
#include "nitro/kernels/reduction.cuh"
#include "nitro/kernels/backend.cuh"
#include "nitro/dist/cuda/data_parallel.cuh"
#include "nitro/nn/cuda/mlp_traits.hpp"
#include "nitro/train/cuda/program.cuh"
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/cuda/scalars.hpp"
