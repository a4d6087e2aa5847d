// nitro/tensor/cuda/hd.hpp — one spelling for code that runs on the host and on the device.
//
// The CUDA backend keeps the arithmetic of its kernels (tile layouts, activations, the loss of one
// sample, the optimizer's update of one element) in functions marked NITRO_HD. nvcc compiles them
// for both sides; g++ and clang++ see plain inline functions, so the CPU tests run the very code the
// kernels run. Nothing here needs the CUDA toolkit.
#pragma once

#if defined(__CUDACC__)
#define NITRO_HD __host__ __device__
#define NITRO_HD_INLINE __host__ __device__ __forceinline__
#define NITRO_UNROLL _Pragma("unroll")
#else
#define NITRO_HD
#define NITRO_HD_INLINE inline
#define NITRO_UNROLL
#endif

// True while nvcc compiles device code (the pass where inline PTX is legal).
#if defined(__CUDA_ARCH__)
#define NITRO_DEVICE_PASS 1
#else
#define NITRO_DEVICE_PASS 0
#endif
