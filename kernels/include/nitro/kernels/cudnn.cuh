// nitro/kernels/cudnn.cuh — convolution, pooling and batch normalisation through cuDNN (the legacy
// descriptor API of cuDNN 9, which fits layers whose shapes are known per call; there is no
// cudnn-frontend here). Available when the build found cuDNN (NITRO_HAVE_CUDNN).
//
//   nitro::cuda::conv2d_dnn conv({.in_c = 1, .out_c = 32, .k = 3, .stride = 1, .pad = 1, .act = relu});
//   conv.plan(dnn, batch, height, width);       // descriptors and algorithms, once per input shape
//   conv.forward(dnn, stream, x, w, b, z, y);   // y = act(conv(x, w) + b)
//   conv.backward(dnn, stream, x, w, saved, dy, scratch, dx, dw, db);   // dw, db accumulate
//   pool2d_dnn, batch_norm_dnn                  the same shape of interface
//
// nitro's images are [W, H, C, B] column-major, which is cuDNN's NCHW; a conv2d weight
// param<K, K, InC, OutC> ([kx, ky, cin, cout] column-major) is cuDNN's KCRS filter. The semantics
// are those of nitro::nn::conv2d, max_pool/avg_pool and batch_norm (cross-correlation, zero padding,
// floor-mode pooling without padding, running statistics with momentum and the unbiased variance).
#pragma once

#if !defined(NITRO_HAVE_CUDNN)
#if __has_include(<cudnn.h>)
#define NITRO_HAVE_CUDNN 1
#else
#define NITRO_HAVE_CUDNN 0
#endif
#endif

#if NITRO_HAVE_CUDNN

#include "nitro/core/error.hpp"
#include "nitro/kernels/pointwise.cuh"
#include "nitro/tensor/cuda/pointwise.hpp"
#include "nitro/tensor/cuda/runtime.cuh"

#include <cudnn.h>
#include <cuda_runtime.h>

#include <algorithm>  // max
#include <cstddef>    // size_t
#include <string>     // messages

namespace nitro::cuda {

inline void check_cudnn(cudnnStatus_t st, char const* call) {
  if (st == CUDNN_STATUS_SUCCESS) return;
  throw error("E-CUDA-005", std::string(call) + " failed: " + cudnnGetErrorString(st),
              "a cuDNN failure: check the layer's shapes and the device's free memory; report it with the call named here");
}
#define NITRO_CUDNN_CHECK(...) ::nitro::cuda::check_cudnn((__VA_ARGS__), #__VA_ARGS__)

class dnn_handle {
 public:
  dnn_handle() { NITRO_CUDNN_CHECK(cudnnCreate(&m_h)); }
  ~dnn_handle() { if (m_h) cudnnDestroy(m_h); }
  dnn_handle(dnn_handle const&) = delete;
  dnn_handle& operator=(dnn_handle const&) = delete;
  cudnnHandle_t get() const noexcept { return m_h; }

 private:
  cudnnHandle_t m_h = nullptr;
};

namespace detail {
struct tensor_desc {
  cudnnTensorDescriptor_t d = nullptr;
  tensor_desc() { NITRO_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d)); }
  ~tensor_desc() { if (d) cudnnDestroyTensorDescriptor(d); }
  tensor_desc(tensor_desc const&) = delete;
  tensor_desc& operator=(tensor_desc const&) = delete;
  void set(int n, int c, int h, int w) { NITRO_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w)); }
};
inline constexpr float one = 1.0f, zero = 0.0f;
}  // namespace detail

// ---- convolution -----------------------------------------------------------------------------------
struct conv2d_spec {
  int in_c = 1, out_c = 1, k = 3, stride = 1, pad = 0;
  activation_kind act = activation_kind::identity;
};

class conv2d_dnn {
 public:
  explicit conv2d_dnn(conv2d_spec s) : m_s(s) {
    NITRO_CUDNN_CHECK(cudnnCreateFilterDescriptor(&m_w));
    NITRO_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&m_conv));
    NITRO_CUDNN_CHECK(cudnnSetFilter4dDescriptor(m_w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.out_c, s.in_c, s.k, s.k));
    NITRO_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(m_conv, s.pad, s.pad, s.stride, s.stride, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    NITRO_CUDNN_CHECK(cudnnSetConvolutionMathType(m_conv, CUDNN_FMA_MATH));  // FP32 FMAs, as the CPU backend (DEFAULT_MATH allows TF32)
    m_bias.set(1, s.out_c, 1, 1);
  }
  ~conv2d_dnn() {
    if (m_w) cudnnDestroyFilterDescriptor(m_w);
    if (m_conv) cudnnDestroyConvolutionDescriptor(m_conv);
  }
  conv2d_dnn(conv2d_dnn const&) = delete;
  conv2d_dnn& operator=(conv2d_dnn const&) = delete;

  // Descriptors, output size and algorithms for an input of `n` images of height x width; nothing
  // happens when the shape is the one planned last.
  void plan(cudnnHandle_t h, int n, int height, int width) {
    if (n == m_n && height == m_h && width == m_wd) return;
    m_x.set(n, m_s.in_c, height, width);
    int on = 0, oc = 0;
    NITRO_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(m_conv, m_x.d, m_w, &on, &oc, &m_oh, &m_ow));
    m_y.set(on, oc, m_oh, m_ow);
    int found = 0;
    cudnnConvolutionFwdAlgoPerf_t f[8];
    NITRO_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, m_x.d, m_w, m_conv, m_y.d, 8, &found, f));
    m_fwd = pick(f, found, "forward").algo;
    cudnnConvolutionBwdDataAlgoPerf_t bd[8];
    NITRO_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, m_w, m_y.d, m_conv, m_x.d, 8, &found, bd));
    m_bwd_data = pick(bd, found, "backward data").algo;
    cudnnConvolutionBwdFilterAlgoPerf_t bf[8];
    NITRO_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, m_x.d, m_y.d, m_conv, m_w, 8, &found, bf));
    m_bwd_filter = pick(bf, found, "backward filter").algo;
    std::size_t a = 0, b = 0, c = 0;
    NITRO_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, m_x.d, m_w, m_conv, m_y.d, m_fwd, &a));
    NITRO_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, m_w, m_y.d, m_conv, m_x.d, m_bwd_data, &b));
    NITRO_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, m_x.d, m_y.d, m_conv, m_w, m_bwd_filter, &c));
    m_ws_bytes = std::max(a, std::max(b, c));
    m_ws.reserve(m_ws_bytes ? m_ws_bytes : 1);
    m_n = n;
    m_h = height;
    m_wd = width;
  }
  int out_height() const noexcept { return m_oh; }
  int out_width() const noexcept { return m_ow; }
  long long out_numel() const noexcept { return static_cast<long long>(m_n) * m_s.out_c * m_oh * m_ow; }

  // y = act(conv(x, w) + b); z receives the pre-activation when the activation needs it (gelu),
  // else it may be null or equal y.
  void forward(cudnnHandle_t h, cudaStream_t s, float const* x, float const* w, float const* b, float* z, float* y) {
    NITRO_CUDNN_CHECK(cudnnSetStream(h, s));
    float* dst = act_math_needs_pre() ? z : y;
    NITRO_CUDNN_CHECK(cudnnConvolutionForward(h, &detail::one, m_x.d, x, m_w, w, m_conv, m_fwd, m_ws.data(), m_ws_bytes, &detail::zero, m_y.d, dst));
    if (b) NITRO_CUDNN_CHECK(cudnnAddTensor(h, &detail::one, m_bias.d, b, &detail::one, m_y.d, dst));
    if (m_s.act != activation_kind::identity) activation_forward(m_s.act, dst, y, out_numel(), s);
  }
  // g = dy * act'(saved) in `scratch` (saved: y, or z for gelu); dw += ..., db += ...,
  // dx = (or += with dx_beta 1) the input gradient; any of dx, dw, db may be null.
  void backward(cudnnHandle_t h, cudaStream_t s, float const* x, float const* w, float const* saved, float const* dy, float* scratch, float* dx,
                float dx_beta, float* dw, float* db) {
    NITRO_CUDNN_CHECK(cudnnSetStream(h, s));
    float const* g = dy;
    if (m_s.act != activation_kind::identity) {
      activation_backward(m_s.act, dy, saved, scratch, out_numel(), s);
      g = scratch;
    }
    if (db) NITRO_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &detail::one, m_y.d, g, &detail::one, m_bias.d, db));
    if (dw)
      NITRO_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &detail::one, m_x.d, x, m_y.d, g, m_conv, m_bwd_filter, m_ws.data(), m_ws_bytes,
                                                       &detail::one, m_w, dw));
    if (dx)
      NITRO_CUDNN_CHECK(cudnnConvolutionBackwardData(h, &detail::one, m_w, w, m_y.d, g, m_conv, m_bwd_data, m_ws.data(), m_ws_bytes, &dx_beta,
                                                     m_x.d, dx));
  }

 private:
  bool act_math_needs_pre() const noexcept { return m_s.act == activation_kind::gelu; }
  template <class Perf>
  static Perf const& pick(Perf const* p, int n, char const* what) {
    for (int i = 0; i < n; ++i)  // the fastest that works and computes in FP32 (no tensor-op math)
      if (p[i].status == CUDNN_STATUS_SUCCESS && p[i].mathType != CUDNN_TENSOR_OP_MATH && p[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
        return p[i];
    throw error("E-CUDA-005", std::string("cuDNN offers no ") + what + " convolution algorithm for this shape",
                "report the layer and input shape");
  }

  conv2d_spec m_s;
  cudnnFilterDescriptor_t m_w = nullptr;
  cudnnConvolutionDescriptor_t m_conv = nullptr;
  detail::tensor_desc m_x, m_y, m_bias;
  cudnnConvolutionFwdAlgo_t m_fwd{};
  cudnnConvolutionBwdDataAlgo_t m_bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t m_bwd_filter{};
  device_buffer<unsigned char> m_ws;
  std::size_t m_ws_bytes = 0;
  int m_n = -1, m_h = -1, m_wd = -1, m_oh = 0, m_ow = 0;
};

// ---- pooling -------------------------------------------------------------------------------------------
class pool2d_dnn {
 public:
  pool2d_dnn(bool max, int k, int stride) {
    NITRO_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&m_p));
    NITRO_CUDNN_CHECK(cudnnSetPooling2dDescriptor(m_p, max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                                                  CUDNN_NOT_PROPAGATE_NAN, k, k, 0, 0, stride, stride));
  }
  ~pool2d_dnn() { if (m_p) cudnnDestroyPoolingDescriptor(m_p); }
  pool2d_dnn(pool2d_dnn const&) = delete;
  pool2d_dnn& operator=(pool2d_dnn const&) = delete;

  void plan(int n, int c, int height, int width) {
    m_x.set(n, c, height, width);
    int on = 0, oc = 0;
    NITRO_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(m_p, m_x.d, &on, &oc, &m_oh, &m_ow));
    m_y.set(on, oc, m_oh, m_ow);
  }
  int out_height() const noexcept { return m_oh; }
  int out_width() const noexcept { return m_ow; }
  void forward(cudnnHandle_t h, cudaStream_t s, float const* x, float* y) {
    NITRO_CUDNN_CHECK(cudnnSetStream(h, s));
    NITRO_CUDNN_CHECK(cudnnPoolingForward(h, m_p, &detail::one, m_x.d, x, &detail::zero, m_y.d, y));
  }
  // dx (+)= the input gradient (dx_beta 0 writes, 1 accumulates)
  void backward(cudnnHandle_t h, cudaStream_t s, float const* y, float const* dy, float const* x, float* dx, float dx_beta) {
    NITRO_CUDNN_CHECK(cudnnSetStream(h, s));
    NITRO_CUDNN_CHECK(cudnnPoolingBackward(h, m_p, &detail::one, m_y.d, y, m_y.d, dy, m_x.d, x, &dx_beta, m_x.d, dx));
  }

 private:
  cudnnPoolingDescriptor_t m_p = nullptr;
  detail::tensor_desc m_x, m_y;
  int m_oh = 0, m_ow = 0;
};

// ---- batch normalisation (per channel: the extent before the batch) -------------------------------------
class batch_norm_dnn {
 public:
  batch_norm_dnn(double eps = 1e-5, double momentum = 0.1) : m_eps(eps < CUDNN_BN_MIN_EPSILON ? CUDNN_BN_MIN_EPSILON : eps), m_momentum(momentum) {}

  // an input [inner..., C, B]: n = B, c = C, inner = the product of the extents before C
  void plan(int n, int c, long long inner) {
    m_x.set(n, c, 1, static_cast<int>(inner));
    NITRO_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(m_bn.d, m_x.d, CUDNN_BATCHNORM_SPATIAL));
  }
  // y = gamma (x - mean) / sqrt(var + eps) + beta with the batch's statistics; the running ones
  // move by momentum; save_mean / save_inv_std (C each) keep what backward needs.
  void forward_training(cudnnHandle_t h, cudaStream_t s, float const* x, float const* gamma, float const* beta, float* y, float* running_mean,
                        float* running_var, float* save_mean, float* save_inv_std) {
    NITRO_CUDNN_CHECK(cudnnSetStream(h, s));
    NITRO_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &detail::one, &detail::zero, m_x.d, x, m_x.d, y, m_bn.d,
                                                             gamma, beta, m_momentum, running_mean, running_var, m_eps, save_mean, save_inv_std));
  }
  void forward_inference(cudnnHandle_t h, cudaStream_t s, float const* x, float const* gamma, float const* beta, float const* running_mean,
                         float const* running_var, float* y) {
    NITRO_CUDNN_CHECK(cudnnSetStream(h, s));
    NITRO_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, &detail::one, &detail::zero, m_x.d, x, m_x.d, y, m_bn.d,
                                                              gamma, beta, running_mean, running_var, m_eps));
  }
  // dx (+)= (dx_beta), dgamma += , dbeta += ; from the statistics forward_training saved
  void backward(cudnnHandle_t h, cudaStream_t s, float const* x, float const* dy, float const* gamma, float const* save_mean,
                float const* save_inv_std, float* dx, float dx_beta, float* dgamma, float* dbeta) {
    NITRO_CUDNN_CHECK(cudnnSetStream(h, s));
    NITRO_CUDNN_CHECK(cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &detail::one, &dx_beta, &detail::one, &detail::one, m_x.d, x,
                                                      m_x.d, dy, m_x.d, dx, m_bn.d, gamma, dgamma, dbeta, m_eps, save_mean, save_inv_std));
  }

 private:
  double m_eps, m_momentum;
  detail::tensor_desc m_x, m_bn;
};

}  // namespace nitro::cuda

#endif  // NITRO_HAVE_CUDNN
