// nitro/kernels/ops.cuh — the kernels table on a GPU: device_ops (tensor/device_ops.hpp) with every
// entry a CUDA kernel or a cuBLASLt product, queued on one stream.
//
//   nitro::cuda_backend be;                        // owns one: be.ops()
//   nitro::arena data(be.memory()), closures;
//   nitro::tape t(data, closures);
//   nitro::step_context ctx{&data, &t, true, seed, 0, &be.ops()};
//   nitro::context_scope scope(ctx);               // the ops and layers of this thread now run on the GPU
//
// Products (gemm, and gemm_epilogue's) go through cuBLASLt in float (FP32, or TF32 when asked) and
// in double, plans cached by shape; a bias with identity or relu rides cuBLASLt's epilogue, other
// activations (and a kept pre-activation) follow as one bias_activation kernel. Everything else is
// the kernels of kernels/{elementwise,reduction,loss,copy,epilogue,attention,norm,dropout,
// embedding,pooling,conv}.cuh; a convolution is the batch's im2col, one product per sample and
// a bias-and-activation kernel) (the metrics' counts in loss.cuh), whose sums run in a fixed order: the same bits
// on every run. Nothing here waits for the device: a value reaches the host only through
// memory().copy_to_host (Tensor::item, to_vector).
//
// A kernel cannot throw: cross-entropy flags a class index outside [0, C), and the embedding an
// index outside its vocabulary, in a word on the device; check_flags() (one read-back, where the
// caller syncs anyway) raises the CPU's E-LOSS-003 or E-LAYER-005.
// parallel_for runs its tasks in order on the calling thread: each queues kernels on the stream,
// which the GPU runs in parallel by itself.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/kernels/attention.cuh"
#include "nitro/kernels/conv.cuh"
#include "nitro/kernels/copy.cuh"
#include "nitro/kernels/dense_lt.cuh"
#include "nitro/kernels/dropout.cuh"
#include "nitro/kernels/elementwise.cuh"
#include "nitro/kernels/embedding.cuh"
#include "nitro/kernels/epilogue.cuh"
#include "nitro/kernels/loss.cuh"
#include "nitro/kernels/memory.cuh"
#include "nitro/kernels/norm.cuh"
#include "nitro/kernels/pooling.cuh"
#include "nitro/kernels/reduction.cuh"
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/device_ops.hpp"

#include <cuda_runtime.h>

#include <climits>  // INT_MAX
#include <cstdint>  // int64_t
#include <memory>   // the lazily made cuBLASLt handle
#include <string>   // messages

namespace nitro::cuda {

class ops final : public device_ops {
 public:
  // The kernels of GPU `device`, queued on `stream`, with `memory` (on the same stream) as the step's.
  ops(int device, cudaStream_t stream, stream_memory& memory) : m_device(device), m_stream(stream), m_memory(memory) {
    device_scope on(m_device);
    m_flags.reserve(1);
    NITRO_CUDA_CHECK(cudaMemsetAsync(m_flags.data(), 0, sizeof(unsigned), m_stream));
  }
  ops(ops const&) = delete;
  ops& operator=(ops const&) = delete;

  device_kind device() const noexcept override { return device_kind::cuda; }
  char const* name() const noexcept override { return "cuda"; }
  device_memory& memory() noexcept override { return m_memory; }
  int device_id() const noexcept { return m_device; }
  cudaStream_t stream() const noexcept { return m_stream; }

  // TF32 tensor-core products for float (off: FP32, the CPU's arithmetic to rounding).
  void set_tf32(bool on) noexcept { m_tf32 = on; }
  bool tf32() const noexcept { return m_tf32; }
  // The cuBLASLt handle (made at the first product) and plan cache the products use.
  cublasLtHandle_t lt() {
    if (!m_lt) {
      device_scope on(m_device);
      m_lt = std::make_unique<lt_handle>();
    }
    return m_lt->get();
  }
  lt_gemm& products() noexcept { return m_gemm; }

  // Reads the kernels' flags back (a host sync) and clears them: E-LOSS-003 when cross-entropy met a
  // class index outside [0, C), E-LAYER-005 when an embedding met an index outside its vocabulary,
  // since the last check.
  void check_flags() {
    device_scope on(m_device);
    unsigned f = 0;
    NITRO_CUDA_CHECK(cudaMemcpyAsync(&f, m_flags.data(), sizeof f, cudaMemcpyDeviceToHost, m_stream));
    NITRO_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    if (f == 0) return;
    NITRO_CUDA_CHECK(cudaMemsetAsync(m_flags.data(), 0, sizeof(unsigned), m_stream));
    if (f & embedding_bad_index)
      throw error("E-LAYER-005", "an embedding on the device met an index that is not a whole number in [0, vocabulary)",
                  "map tokens to 0 .. vocabulary - 1, or enlarge the vocabulary");
    metric_sums sums;
    sums.flags = f;
    sums.check();
  }

  // ---- products ---------------------------------------------------------------------------------------
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, float const* a, std::int64_t lda, float const* b,
            std::int64_t ldb, float beta, float* c, std::int64_t ldc) override {
    product(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, double const* a, std::int64_t lda, double const* b,
            std::int64_t ldb, double beta, double* c, std::int64_t ldc) override {
    product(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void gemm_epilogue(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float const* a, std::int64_t lda, float const* b,
                     std::int64_t ldb, float const* bias, epilogue_act act, float* z, float* c, std::int64_t ldc) override {
    product_epilogue(ta, tb, m, n, k, a, lda, b, ldb, bias, act, z, c, ldc);
  }
  void gemm_epilogue(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double const* a, std::int64_t lda, double const* b,
                     std::int64_t ldb, double const* bias, epilogue_act act, double* z, double* c, std::int64_t ldc) override {
    product_epilogue(ta, tb, m, n, k, a, lda, b, ldb, bias, act, z, c, ldc);
  }
  void epilogue_backward(epilogue_act act, std::int64_t m, std::int64_t n, float const* gy, float const* yz, float* g, float* bias_grad) override {
    cuda::epilogue_backward<float>(m_stream, act, m, n, gy, yz, g, bias_grad);
  }
  void epilogue_backward(epilogue_act act, std::int64_t m, std::int64_t n, double const* gy, double const* yz, double* g,
                         double* bias_grad) override {
    cuda::epilogue_backward<double>(m_stream, act, m, n, gy, yz, g, bias_grad);
  }

  // ---- element-wise, reductions, softmax ----------------------------------------------------------------
  void map(map_op op, std::int64_t n, float a, float b, float const* x, float* y) override { cuda::map<float>(m_stream, op, n, a, b, x, y); }
  void map(map_op op, std::int64_t n, double a, double b, double const* x, double* y) override {
    cuda::map<double>(m_stream, op, n, a, b, x, y);
  }
  void map_backward(map_op op, std::int64_t n, float a, float b, float const* x, float const* y, float const* gy, float* gx) override {
    cuda::map_backward<float>(m_stream, op, n, a, b, x, y, gy, gx);
  }
  void map_backward(map_op op, std::int64_t n, double a, double b, double const* x, double const* y, double const* gy, double* gx) override {
    cuda::map_backward<double>(m_stream, op, n, a, b, x, y, gy, gx);
  }
  void binary(binop op, broadcast_plan const& p, float const* a, float const* b, float* y) override { cuda::binary<float>(m_stream, op, p, a, b, y); }
  void binary(binop op, broadcast_plan const& p, double const* a, double const* b, double* y) override {
    cuda::binary<double>(m_stream, op, p, a, b, y);
  }
  void binary_backward(binop op, broadcast_plan const& p, float const* a, float const* b, float const* gy, float* ga, float* gb) override {
    cuda::binary_backward<float>(m_stream, op, p, a, b, gy, ga, gb);
  }
  void binary_backward(binop op, broadcast_plan const& p, double const* a, double const* b, double const* gy, double* ga, double* gb) override {
    cuda::binary_backward<double>(m_stream, op, p, a, b, gy, ga, gb);
  }
  void reduce(reduce_op op, reduction r, float const* x, float* y) override { cuda::reduce<float>(m_stream, op, r, x, y); }
  void reduce(reduce_op op, reduction r, double const* x, double* y) override { cuda::reduce<double>(m_stream, op, r, x, y); }
  void reduce_backward(reduce_op op, reduction r, float const* x, float const* y, float const* gy, float* gx) override {
    cuda::reduce_backward<float>(m_stream, op, r, x, y, gy, gx);
  }
  void reduce_backward(reduce_op op, reduction r, double const* x, double const* y, double const* gy, double* gx) override {
    cuda::reduce_backward<double>(m_stream, op, r, x, y, gy, gx);
  }
  void softmax(bool log, std::int64_t rows, std::int64_t cols, float const* x, float* y) override {
    cuda::softmax<float>(m_stream, log, rows, cols, x, y);
  }
  void softmax(bool log, std::int64_t rows, std::int64_t cols, double const* x, double* y) override {
    cuda::softmax<double>(m_stream, log, rows, cols, x, y);
  }
  void softmax_backward(bool log, std::int64_t rows, std::int64_t cols, float const* y, float const* gy, float* gx) override {
    cuda::softmax_backward<float>(m_stream, log, rows, cols, y, gy, gx);
  }
  void softmax_backward(bool log, std::int64_t rows, std::int64_t cols, double const* y, double const* gy, double* gx) override {
    cuda::softmax_backward<double>(m_stream, log, rows, cols, y, gy, gx);
  }

  // ---- losses ---------------------------------------------------------------------------------------------
  void cross_entropy(std::int64_t C, std::int64_t B, float const* logits, float const* target, bool indices, float smoothing, float* p,
                     float* loss) override {
    cuda::cross_entropy<float>(m_stream, C, B, logits, target, indices, smoothing, p, loss, m_flags.data());
  }
  void cross_entropy(std::int64_t C, std::int64_t B, double const* logits, double const* target, bool indices, double smoothing, double* p,
                     double* loss) override {
    cuda::cross_entropy<double>(m_stream, C, B, logits, target, indices, smoothing, p, loss, m_flags.data());
  }
  void cross_entropy_backward(std::int64_t C, std::int64_t B, float const* p, float const* target, bool indices, float smoothing,
                              float const* gloss, float* glogits) override {
    cuda::cross_entropy_backward<float>(m_stream, C, B, p, target, indices, smoothing, gloss, glogits);
  }
  void cross_entropy_backward(std::int64_t C, std::int64_t B, double const* p, double const* target, bool indices, double smoothing,
                              double const* gloss, double* glogits) override {
    cuda::cross_entropy_backward<double>(m_stream, C, B, p, target, indices, smoothing, gloss, glogits);
  }
  void squared_error(std::int64_t n, float const* a, float const* b, float* loss) override { cuda::squared_error<float>(m_stream, n, a, b, loss); }
  void squared_error(std::int64_t n, double const* a, double const* b, double* loss) override {
    cuda::squared_error<double>(m_stream, n, a, b, loss);
  }
  void squared_error_backward(std::int64_t n, float const* a, float const* b, float const* gloss, float* ga, float* gb) override {
    cuda::squared_error_backward<float>(m_stream, n, a, b, gloss, ga, gb);
  }
  void squared_error_backward(std::int64_t n, double const* a, double const* b, double const* gloss, double* ga, double* gb) override {
    cuda::squared_error_backward<double>(m_stream, n, a, b, gloss, ga, gb);
  }
  void binary_cross_entropy(std::int64_t n, float const* x, float const* t, float* loss) override {
    cuda::binary_cross_entropy<float>(m_stream, n, x, t, loss);
  }
  void binary_cross_entropy(std::int64_t n, double const* x, double const* t, double* loss) override {
    cuda::binary_cross_entropy<double>(m_stream, n, x, t, loss);
  }
  void binary_cross_entropy_backward(std::int64_t n, float const* x, float const* t, float const* gloss, float* gx, float* gt) override {
    cuda::binary_cross_entropy_backward<float>(m_stream, n, x, t, gloss, gx, gt);
  }
  void binary_cross_entropy_backward(std::int64_t n, double const* x, double const* t, double const* gloss, double* gx, double* gt) override {
    cuda::binary_cross_entropy_backward<double>(m_stream, n, x, t, gloss, gx, gt);
  }

  void classification_counts(std::int64_t C, std::int64_t B, float const* logits, float const* target, bool indices, float* correct,
                             float* confusion) override {
    cuda::classification_counts<float>(m_stream, C, B, logits, target, indices, correct, confusion);
  }
  void classification_counts(std::int64_t C, std::int64_t B, double const* logits, double const* target, bool indices, double* correct,
                             double* confusion) override {
    cuda::classification_counts<double>(m_stream, C, B, logits, target, indices, correct, confusion);
  }

  // ---- copies, attention, regions --------------------------------------------------------------------------
  void copy(std::int64_t rows, std::int64_t cols, float const* src, std::int64_t ld_src, float* dst, std::int64_t ld_dst, bool accumulate) override {
    cuda::copy<float>(m_stream, rows, cols, src, ld_src, dst, ld_dst, accumulate);
  }
  void copy(std::int64_t rows, std::int64_t cols, double const* src, std::int64_t ld_src, double* dst, std::int64_t ld_dst,
            bool accumulate) override {
    cuda::copy<double>(m_stream, rows, cols, src, ld_src, dst, ld_dst, accumulate);
  }
  void transpose(std::int64_t m, std::int64_t n, float const* src, float* dst, bool accumulate) override {
    cuda::transpose<float>(m_stream, m, n, src, dst, accumulate);
  }
  void transpose(std::int64_t m, std::int64_t n, double const* src, double* dst, bool accumulate) override {
    cuda::transpose<double>(m_stream, m, n, src, dst, accumulate);
  }
  void causal_attention(std::int64_t heads, std::int64_t head_dim, std::int64_t seq, std::int64_t batch, float const* qkv, float* out,
                        float* lse) override {
    cuda::causal_attention<float>(m_stream, heads, head_dim, seq, batch, qkv, out, lse);
  }
  void causal_attention(std::int64_t heads, std::int64_t head_dim, std::int64_t seq, std::int64_t batch, double const* qkv, double* out,
                        double* lse) override {
    cuda::causal_attention<double>(m_stream, heads, head_dim, seq, batch, qkv, out, lse);
  }
  void causal_attention_backward(std::int64_t heads, std::int64_t head_dim, std::int64_t seq, std::int64_t batch, float const* qkv,
                                 float const* out, float const* lse, float const* gout, float* gqkv) override {
    cuda::causal_attention_backward<float>(m_stream, heads, head_dim, seq, batch, qkv, out, lse, gout, gqkv);
  }
  void causal_attention_backward(std::int64_t heads, std::int64_t head_dim, std::int64_t seq, std::int64_t batch, double const* qkv,
                                 double const* out, double const* lse, double const* gout, double* gqkv) override {
    cuda::causal_attention_backward<double>(m_stream, heads, head_dim, seq, batch, qkv, out, lse, gout, gqkv);
  }

  // ---- norms, dropout, embedding, pooling ------------------------------------------------------------------
  void layer_norm(std::int64_t F, std::int64_t cols, double eps, float const* x, float const* w, float const* b, float* y,
                  float* stats) override {
    cuda::layer_norm<float>(m_stream, F, cols, eps, x, w, b, y, stats);
  }
  void layer_norm(std::int64_t F, std::int64_t cols, double eps, double const* x, double const* w, double const* b, double* y,
                  double* stats) override {
    cuda::layer_norm<double>(m_stream, F, cols, eps, x, w, b, y, stats);
  }
  void layer_norm_backward(std::int64_t F, std::int64_t cols, float const* x, float const* w, float const* stats, float const* gy, float* gx,
                           float* gw, float* gb) override {
    cuda::layer_norm_backward<float>(m_stream, F, cols, x, w, stats, gy, gx, gw, gb);
  }
  void layer_norm_backward(std::int64_t F, std::int64_t cols, double const* x, double const* w, double const* stats, double const* gy,
                           double* gx, double* gw, double* gb) override {
    cuda::layer_norm_backward<double>(m_stream, F, cols, x, w, stats, gy, gx, gw, gb);
  }
  void batch_norm(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, double eps, double momentum, float const* x,
                  float const* w, float const* b, float const* rm, float const* rv, float* stats, float* nm, float* nv, float* y) override {
    cuda::batch_norm<float>(m_stream, training, inner, C, B, eps, momentum, x, w, b, rm, rv, stats, nm, nv, y);
  }
  void batch_norm(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, double eps, double momentum, double const* x,
                  double const* w, double const* b, double const* rm, double const* rv, double* stats, double* nm, double* nv,
                  double* y) override {
    cuda::batch_norm<double>(m_stream, training, inner, C, B, eps, momentum, x, w, b, rm, rv, stats, nm, nv, y);
  }
  void batch_norm_backward(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, float const* x, float const* w,
                           float const* stats, float const* gy, float* gx, float* gw, float* gb) override {
    cuda::batch_norm_backward<float>(m_stream, training, inner, C, B, x, w, stats, gy, gx, gw, gb);
  }
  void batch_norm_backward(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, double const* x, double const* w,
                           double const* stats, double const* gy, double* gx, double* gw, double* gb) override {
    cuda::batch_norm_backward<double>(m_stream, training, inner, C, B, x, w, stats, gy, gx, gw, gb);
  }
  void dropout(std::uint64_t seed, std::uint64_t below, std::int64_t n, float scale, float const* x, float* y) override {
    cuda::dropout<float>(m_stream, seed, below, n, scale, x, y);
  }
  void dropout(std::uint64_t seed, std::uint64_t below, std::int64_t n, double scale, double const* x, double* y) override {
    cuda::dropout<double>(m_stream, seed, below, n, scale, x, y);
  }
  void dropout_backward(std::uint64_t seed, std::uint64_t below, std::int64_t n, float scale, float const* gy, float* gx) override {
    cuda::dropout_backward<float>(m_stream, seed, below, n, scale, gy, gx);
  }
  void dropout_backward(std::uint64_t seed, std::uint64_t below, std::int64_t n, double scale, double const* gy, double* gx) override {
    cuda::dropout_backward<double>(m_stream, seed, below, n, scale, gy, gx);
  }
  std::int64_t embedding(std::int64_t vocab, std::int64_t dim, std::int64_t count, float const* idx, float const* w, float* y) override {
    cuda::embedding<float>(m_stream, vocab, dim, count, idx, w, y, m_flags.data());
    return -1;  // a bad index is flagged on the device: check_flags()
  }
  std::int64_t embedding(std::int64_t vocab, std::int64_t dim, std::int64_t count, double const* idx, double const* w, double* y) override {
    cuda::embedding<double>(m_stream, vocab, dim, count, idx, w, y, m_flags.data());
    return -1;
  }
  void embedding_backward(std::int64_t vocab, std::int64_t dim, std::int64_t count, float const* idx, float const* gy, float* gw) override {
    cuda::embedding_backward<float>(m_stream, vocab, dim, count, idx, gy, gw);
  }
  void embedding_backward(std::int64_t vocab, std::int64_t dim, std::int64_t count, double const* idx, double const* gy, double* gw) override {
    cuda::embedding_backward<double>(m_stream, vocab, dim, count, idx, gy, gw);
  }
  std::int64_t conv2d_scratch(conv_window const& p, bool backward) const override { return cuda::conv2d_scratch(p, backward); }
  void conv2d(conv_window const& p, float const* x, float const* w, float const* bias, epilogue_act act, float* z, float* y,
              float* scratch) override {
    conv_forward<float>(p, x, w, bias, act, z, y, scratch);
  }
  void conv2d(conv_window const& p, double const* x, double const* w, double const* bias, epilogue_act act, double* z, double* y,
              double* scratch) override {
    conv_forward<double>(p, x, w, bias, act, z, y, scratch);
  }
  void conv2d_backward(conv_window const& p, epilogue_act act, float const* x, float const* w, float const* yz, float const* gy, float* gx,
                       float* gw, float* gb, float* scratch) override {
    conv_backward<float>(p, act, x, w, yz, gy, gx, gw, gb, scratch);
  }
  void conv2d_backward(conv_window const& p, epilogue_act act, double const* x, double const* w, double const* yz, double const* gy,
                       double* gx, double* gw, double* gb, double* scratch) override {
    conv_backward<double>(p, act, x, w, yz, gy, gx, gw, gb, scratch);
  }
  void pool2d(pool_kind kind, pool_window const& p, float const* x, float* y, std::uint32_t* arg) override {
    cuda::pool2d<float>(m_stream, kind, p, x, y, arg);
  }
  void pool2d(pool_kind kind, pool_window const& p, double const* x, double* y, std::uint32_t* arg) override {
    cuda::pool2d<double>(m_stream, kind, p, x, y, arg);
  }
  void pool2d_backward(pool_kind kind, pool_window const& p, float const* gy, std::uint32_t const* arg, float* gx) override {
    cuda::pool2d_backward<float>(m_stream, kind, p, gy, arg, gx);
  }
  void pool2d_backward(pool_kind kind, pool_window const& p, double const* gy, std::uint32_t const* arg, double* gx) override {
    cuda::pool2d_backward<double>(m_stream, kind, p, gy, arg, gx);
  }

  void parallel_for(int n, index_task task) override {
    for (int i = 0; i < n; ++i) task(i);
  }

 private:
  static int extent(std::int64_t v, char const* what) {
    if (v > INT_MAX)
      throw error("E-CUDA-004", std::string("a product's ") + what + " of " + std::to_string(v) + " is beyond cuBLASLt's 32-bit extents",
                  "split the product (a smaller batch or width)");
    return static_cast<int>(v);
  }
  template <class T>
  void product(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, T const* a, std::int64_t lda, T const* b,
               std::int64_t ldb, T beta, T* c, std::int64_t ldc, T const* bias = nullptr, lt_epilogue epi = lt_epilogue::none) {
    if (m <= 0 || n <= 0) return;
    device_scope on(m_device);
    if (k <= 0 && beta != T(0) && beta != T(1)) {  // C = beta C, a column at a time
      for (std::int64_t j = 0; j < n; ++j) cuda::map<T>(m_stream, map_op::affine, m, beta, T(0), c + j * ldc, c + j * ldc);
      return;
    }
    m_gemm.matmul<T>(lt(), m_stream, ta, tb, extent(m, "row count"), extent(n, "column count"), extent(k, "inner extent"), alpha, a,
                     extent(lda, "leading dimension"), b, extent(ldb, "leading dimension"), beta, c, extent(ldc, "leading dimension"),
                     m_tf32, bias, epi);
  }
  template <class T>
  void product_epilogue(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T const* a, std::int64_t lda, T const* b,
                        std::int64_t ldb, T const* bias, epilogue_act act, T* z, T* c, std::int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    const bool keep_z = z != nullptr && z != c;
    // float with identity or relu and no pre-activation to keep: cuBLASLt's own epilogue
    if constexpr (std::is_same_v<T, float>)
      if (!keep_z && k > 0 && (act == epilogue_act::identity || act == epilogue_act::relu)) {
        const lt_epilogue e = act == epilogue_act::relu ? (bias ? lt_epilogue::relu_bias : lt_epilogue::relu)
                                                        : (bias ? lt_epilogue::bias : lt_epilogue::none);
        product<T>(ta, tb, m, n, k, T(1), a, lda, b, ldb, T(0), c, ldc, bias, e);
        return;
      }
    T* pre = keep_z ? z : c;
    product<T>(ta, tb, m, n, k, T(1), a, lda, b, ldb, T(0), pre, ldc);
    if (!bias && !keep_z && act == epilogue_act::identity) return;
    cuda::bias_activation<T>(m_stream, act, m, n, ldc, bias, pre, keep_z ? z : nullptr, c);
  }

  // The batch's im2col (none for a direct 1x1 kernel), a product per sample into the pre-activation,
  // then the bias and activation in one pass.
  template <class T>
  void conv_forward(conv_window const& p, T const* x, T const* w, T const* bias, epilogue_act act, T* z, T* y, T* scratch) {
    if (p.batch <= 0 || p.out_plane() <= 0) return;
    device_scope on(m_device);
    const std::int64_t P = p.out_plane(), kkc = p.rows(), in_image = p.in_plane() * p.in_c;
    T const* col = p.direct() ? x : scratch;
    if (!p.direct()) cuda::im2col<T>(m_stream, p, x, scratch);
    T* pre = z ? z : y;
    for (std::int64_t b = 0; b < p.batch; ++b)
      product<T>(false, false, P, p.out_c, kkc, T(1), col + b * (p.direct() ? in_image : P * kkc), P, w, kkc, T(0), pre + b * P * p.out_c, P);
    if (bias || act != epilogue_act::identity || pre != y) cuda::channel_bias_activation<T>(m_stream, p, act, bias, pre, z, y);
  }
  // g = gy act'(yz), the bias's gradient from g, then per sample dW += col^T g (samples in order)
  // and dcol = g W^T, and the batch's col2im into dx.
  template <class T>
  void conv_backward(conv_window const& p, epilogue_act act, T const* x, T const* w, T const* yz, T const* gy, T* gx, T* gw, T* gb,
                     T* scratch) {
    if (p.batch <= 0 || p.out_plane() <= 0) return;
    device_scope on(m_device);
    const std::int64_t P = p.out_plane(), kkc = p.rows(), in_image = p.in_plane() * p.in_c, n_out = p.batch * P * p.out_c;
    T* col = scratch;
    T* gbuf = scratch + (p.direct() ? 0 : p.batch * P * kkc);
    T const* g = gy;
    if (act != epilogue_act::identity) {
      cuda::activation_grad<T>(m_stream, n_out, act, gy, yz, gbuf);
      g = gbuf;
    }
    if (gb) cuda::channel_sum<T>(m_stream, p, g, gb);
    if (gw) {
      T const* cb = x;
      if (!p.direct()) {
        cuda::im2col<T>(m_stream, p, x, col);
        cb = col;
      }
      for (std::int64_t b = 0; b < p.batch; ++b)
        product<T>(true, false, kkc, p.out_c, P, T(1), cb + b * (p.direct() ? in_image : P * kkc), P, g + b * P * p.out_c, P, T(1), gw, kkc);
    }
    if (!gx) return;
    for (std::int64_t b = 0; b < p.batch; ++b) {
      if (p.direct())  // col2im is the identity: accumulate straight into dx
        product<T>(false, true, P, kkc, p.out_c, T(1), g + b * P * p.out_c, P, w, kkc, T(1), gx + b * in_image, P);
      else
        product<T>(false, true, P, kkc, p.out_c, T(1), g + b * P * p.out_c, P, w, kkc, T(0), col + b * P * kkc, P);
    }
    if (!p.direct()) cuda::col2im<T>(m_stream, p, col, gx);
  }

  int m_device;
  cudaStream_t m_stream;
  stream_memory& m_memory;
  bool m_tf32 = false;
  std::unique_ptr<lt_handle> m_lt;
  lt_gemm m_gemm;
  device_buffer<unsigned> m_flags;  // cross-entropy's and the embedding's bad-index word
};

}  // namespace nitro::cuda
