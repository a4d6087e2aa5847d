// nitro/tensor/convolution.hpp — what a 2-D convolution is, for every backend: its extents.
//
//   nitro::conv_window p{.k = 3, .stride = 1, .pad = 1, .w = 28, .h = 28, .in_c = 1, .ow = 28, .oh = 28, .out_c = 32, .batch = B};
//   ops.conv2d(p, x, w, bias, nitro::epilogue_act::relu, z, y, scratch);     // device_ops
//
// Images are WHCN ([w, h, in_c, batch], w fastest); the weight is [kx, ky, in_c, out_c] column-major
// (PyTorch's [out_c, in_c, kh, kw] bytes), seen as a [k k in_c, out_c] matrix; the output is
// [ow, oh, out_c, batch] with ow = (w + 2 pad - k) / stride + 1. A cross-correlation with zero
// padding, as PyTorch's. The im2col matrix of one image is [ow oh, k k in_c]: output positions
// fastest, then kx, ky, the input channel — the weight's row order.
#pragma once

#include "nitro/tensor/cuda/hd.hpp"

#include <cstdint>  // int64_t

namespace nitro {

struct conv_window {
  std::int64_t k = 1, stride = 1, pad = 0;  // the kernel's side, its step, zero padding on every side
  std::int64_t w = 0, h = 0, in_c = 0;      // an input image
  std::int64_t ow = 0, oh = 0, out_c = 0;   // an output image
  std::int64_t batch = 0;
  NITRO_HD std::int64_t in_plane() const noexcept { return w * h; }
  NITRO_HD std::int64_t out_plane() const noexcept { return ow * oh; }
  NITRO_HD std::int64_t rows() const noexcept { return k * k * in_c; }  // of the weight seen as a matrix
  // A 1 x 1 kernel with stride 1 and no padding: each image already is its im2col matrix.
  NITRO_HD bool direct() const noexcept { return k == 1 && stride == 1 && pad == 0; }
};

}  // namespace nitro
