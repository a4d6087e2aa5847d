// nitro/tensor/cpu/backend.hpp — the CPU backend: the reference every other backend is tested against.
//
// Its device memory is host memory, so to_device hands back the same view (and counts what passed
// through the door, by field name and bytes, so tests and show() can see that a field no hook
// declares never moved). Products are nitro's own GEMM (cpu/gemm.hpp: AVX-512 or AVX2+FMA,
// whichever this CPU has, found at run time; Eigen's otherwise), their epilogues one Eigen pass
// (tensor/ops/epilogue.hpp), element-wise maps and broadcast arithmetic Eigen's arrays
// (cpu/elementwise.hpp), reductions and softmax loops (cpu/reduction.hpp), the losses column
// loops and Eigen sums (cpu/loss.hpp), copies Eigen's, attention in tiles (cpu/attention.hpp), the
// norms, dropout and the embedding column loops (cpu/norm.hpp, dropout.hpp, embedding.hpp),
// pooling plane by plane (cpu/pooling.hpp), convolution as im2col and one product per sample
// (cpu/conv.hpp), parallel regions the process's thread pool (cpu/thread_pool.hpp).
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/tensor/cpu/attention.hpp"
#include "nitro/tensor/cpu/conv.hpp"
#include "nitro/tensor/cpu/dropout.hpp"
#include "nitro/tensor/cpu/elementwise.hpp"
#include "nitro/tensor/cpu/embedding.hpp"
#include "nitro/tensor/cpu/norm.hpp"
#include "nitro/tensor/cpu/pooling.hpp"
#include "nitro/tensor/cpu/reduction.hpp"
#include "nitro/tensor/cpu/gemm.hpp"
#include "nitro/tensor/cpu/loss.hpp"
#include "nitro/tensor/cpu/thread_pool.hpp"
#include "nitro/tensor/device_ops.hpp"
#include "nitro/tensor/ops/epilogue.hpp"
#include "nitro/tensor/tensor.hpp"

#include <Eigen/Core>

#include <algorithm>    // min, max: the epilogues' pieces
#include <cstdint>      // int64_t
#include <functional>   // less<>: lookups by string_view
#include <map>          // transfer counts
#include <string>       // field names
#include <string_view>  // field names

namespace nitro {

struct transfer_count {
  std::int64_t transfers = 0;
  std::int64_t bytes = 0;
};

namespace cpu {

namespace detail {
// The epilogues run in fixed pieces, shared out over the pool's threads (for_each_share: the same
// share to the same thread each step), once a matrix has `epilogue_piece`
// elements: whole columns forward (each column's bias and activation are its own), whole blocks
// of 64 rows backward (the bias gradient sums a row over the columns). The pieces depend on the
// shape alone, and each element is computed as a single pass would, so the bits do not depend on
// the thread count.
inline constexpr std::int64_t epilogue_piece = 16384;
template <class F>
void in_pieces(std::int64_t count, std::int64_t per_piece, F&& f) {
  const std::int64_t pieces = (count + per_piece - 1) / per_piece;
  if (pieces <= 1) return f(std::int64_t{0}, count);
  thread_pool::instance().for_each_share(pieces, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) f(p * per_piece, std::min(count, (p + 1) * per_piece));
  });
}

template <class T>
void copy(std::int64_t rows, std::int64_t cols, T const* src, std::int64_t ld_src, T* dst, std::int64_t ld_dst, bool accumulate) {
  using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  Eigen::Map<const matrix, 0, Eigen::OuterStride<>> S(src, rows, cols, Eigen::OuterStride<>(ld_src));
  Eigen::Map<matrix, 0, Eigen::OuterStride<>> D(dst, rows, cols, Eigen::OuterStride<>(ld_dst));
  if (accumulate) D += S;
  else D = S;
}
template <class T>
void transpose(std::int64_t m, std::int64_t n, T const* src, T* dst, bool accumulate) {
  using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  Eigen::Map<const matrix> S(src, m, n);
  Eigen::Map<matrix> D(dst, n, m);
  if (accumulate) D += S.transpose();
  else D = S.transpose();
}

template <class T>
void gemm_epilogue(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T const* a, std::int64_t lda, T const* b,
                   std::int64_t ldb, T const* bias, epilogue_act act, T* z, T* c, std::int64_t ldc) {
  using matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  using strided = Eigen::Map<matrix, 0, Eigen::OuterStride<>>;
  T* pre = z ? z : c;
  cpu::gemm<T>(ta, tb, m, n, k, T(1), a, lda, b, ldb, T(0), pre, ldc);
  if (!bias && pre == c && act == epilogue_act::identity) return;
  in_pieces(n, std::max<std::int64_t>(1, epilogue_piece / std::max<std::int64_t>(m, 1)), [&](std::int64_t j0, std::int64_t j1) {
    strided P(pre + j0 * ldc, m, j1 - j0, Eigen::OuterStride<>(ldc));
    if (bias) P.colwise() += Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(bias, m);
    strided C(c + j0 * ldc, m, j1 - j0, Eigen::OuterStride<>(ldc));
    if (pre != c) C = P;
    nitro::detail::with_epilogue(act, [&](auto A) { nitro::detail::epilogue_forward<A.value>(C.array()); });
  });
}
template <class T>
void epilogue_backward(epilogue_act act, std::int64_t m, std::int64_t n, T const* gy, T const* yz, T* g, T* bias_grad) {
  using array = Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic>;
  using strided = Eigen::Map<array, 0, Eigen::OuterStride<>>;
  using const_strided = Eigen::Map<const array, 0, Eigen::OuterStride<>>;
  const std::int64_t rows = n > 0 && m * n >= epilogue_piece ? 64 : std::max<std::int64_t>(m, 1);
  in_pieces(m, rows, [&](std::int64_t i0, std::int64_t i1) {
    strided G(g + i0, i1 - i0, n, Eigen::OuterStride<>(m));
    if (g != gy) G = const_strided(gy + i0, i1 - i0, n, Eigen::OuterStride<>(m));
    nitro::detail::with_epilogue(act, [&](auto A) { nitro::detail::epilogue_backward<A.value>(G, const_strided(yz + i0, i1 - i0, n, Eigen::OuterStride<>(m))); });
    if (bias_grad) Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(bias_grad + i0, i1 - i0) += G.rowwise().sum();
  });
}
#if NITRO_RUNTIME_EXTERN
// Compiled once, in nitro::runtime (src/runtime.cpp): every activation's epilogue for both types is
// reached through the kernels table's virtuals, so each translation unit would compile all of them.
extern template void gemm_epilogue<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float const*, std::int64_t, float const*,
                                          std::int64_t, float const*, epilogue_act, float*, float*, std::int64_t);
extern template void gemm_epilogue<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double const*, std::int64_t,
                                           double const*, std::int64_t, double const*, epilogue_act, double*, double*, std::int64_t);
extern template void epilogue_backward<float>(epilogue_act, std::int64_t, std::int64_t, float const*, float const*, float*, float*);
extern template void epilogue_backward<double>(epilogue_act, std::int64_t, std::int64_t, double const*, double const*, double*, double*);
extern template void copy<float>(std::int64_t, std::int64_t, float const*, std::int64_t, float*, std::int64_t, bool);
extern template void copy<double>(std::int64_t, std::int64_t, double const*, std::int64_t, double*, std::int64_t, bool);
extern template void transpose<float>(std::int64_t, std::int64_t, float const*, float*, bool);
extern template void transpose<double>(std::int64_t, std::int64_t, double const*, double*, bool);
#endif
}  // namespace detail

// Not final: a wrapper may replace one entry and keep the rest (tests/unit/test_optim.cpp runs the
// optimizer's pieces in an order of its own).
class ops : public device_ops {
 public:
  static ops& instance() noexcept {
    static ops o;
    return o;
  }
  device_kind device() const noexcept override { return device_kind::cpu; }
  char const* name() const noexcept override { return "cpu (Eigen)"; }
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, float const* a, std::int64_t lda,
            float const* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) override {
    cpu::gemm<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, double const* a, std::int64_t lda,
            double const* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) override {
    cpu::gemm<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void gemm_epilogue(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float const* a, std::int64_t lda, float const* b,
                     std::int64_t ldb, float const* bias, epilogue_act act, float* z, float* c, std::int64_t ldc) override {
    detail::gemm_epilogue<float>(ta, tb, m, n, k, a, lda, b, ldb, bias, act, z, c, ldc);
  }
  void gemm_epilogue(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double const* a, std::int64_t lda, double const* b,
                     std::int64_t ldb, double const* bias, epilogue_act act, double* z, double* c, std::int64_t ldc) override {
    detail::gemm_epilogue<double>(ta, tb, m, n, k, a, lda, b, ldb, bias, act, z, c, ldc);
  }
  void map(map_op op, std::int64_t n, float a, float b, float const* x, float* y) override { cpu::map(op, n, a, b, x, y); }
  void map(map_op op, std::int64_t n, double a, double b, double const* x, double* y) override { cpu::map(op, n, a, b, x, y); }
  void map_backward(map_op op, std::int64_t n, float a, float b, float const* x, float const* y, float const* gy, float* gx) override {
    cpu::map_backward(op, n, a, b, x, y, gy, gx);
  }
  void map_backward(map_op op, std::int64_t n, double a, double b, double const* x, double const* y, double const* gy, double* gx) override {
    cpu::map_backward(op, n, a, b, x, y, gy, gx);
  }
  void binary(binop op, broadcast_plan const& p, float const* a, float const* b, float* y) override { cpu::binary(op, p, a, b, y); }
  void binary(binop op, broadcast_plan const& p, double const* a, double const* b, double* y) override { cpu::binary(op, p, a, b, y); }
  void binary_backward(binop op, broadcast_plan const& p, float const* a, float const* b, float const* gy, float* ga, float* gb) override {
    cpu::binary_backward(op, p, a, b, gy, ga, gb);
  }
  void binary_backward(binop op, broadcast_plan const& p, double const* a, double const* b, double const* gy, double* ga, double* gb) override {
    cpu::binary_backward(op, p, a, b, gy, ga, gb);
  }
  void reduce(reduce_op op, reduction r, float const* x, float* y) override { cpu::reduce(op, r, x, y); }
  void reduce(reduce_op op, reduction r, double const* x, double* y) override { cpu::reduce(op, r, x, y); }
  void reduce_backward(reduce_op op, reduction r, float const* x, float const* y, float const* gy, float* gx) override {
    cpu::reduce_backward(op, r, x, y, gy, gx);
  }
  void reduce_backward(reduce_op op, reduction r, double const* x, double const* y, double const* gy, double* gx) override {
    cpu::reduce_backward(op, r, x, y, gy, gx);
  }
  void softmax(bool log, std::int64_t rows, std::int64_t cols, float const* x, float* y) override { cpu::softmax(log, rows, cols, x, y); }
  void softmax(bool log, std::int64_t rows, std::int64_t cols, double const* x, double* y) override { cpu::softmax(log, rows, cols, x, y); }
  void softmax_backward(bool log, std::int64_t rows, std::int64_t cols, float const* y, float const* gy, float* gx) override {
    cpu::softmax_backward(log, rows, cols, y, gy, gx);
  }
  void softmax_backward(bool log, std::int64_t rows, std::int64_t cols, double const* y, double const* gy, double* gx) override {
    cpu::softmax_backward(log, rows, cols, y, gy, gx);
  }
  void cross_entropy(std::int64_t C, std::int64_t B, float const* x, float const* t, bool indices, float s, float* p, float* loss) override {
    cpu::cross_entropy(C, B, x, t, indices, s, p, loss);
  }
  void cross_entropy(std::int64_t C, std::int64_t B, double const* x, double const* t, bool indices, double s, double* p,
                     double* loss) override {
    cpu::cross_entropy(C, B, x, t, indices, s, p, loss);
  }
  void cross_entropy_backward(std::int64_t C, std::int64_t B, float const* p, float const* t, bool indices, float s, float const* gl,
                              float* g) override {
    cpu::cross_entropy_backward(C, B, p, t, indices, s, gl, g);
  }
  void cross_entropy_backward(std::int64_t C, std::int64_t B, double const* p, double const* t, bool indices, double s, double const* gl,
                              double* g) override {
    cpu::cross_entropy_backward(C, B, p, t, indices, s, gl, g);
  }
  void squared_error(std::int64_t n, float const* a, float const* b, float* loss) override { cpu::squared_error(n, a, b, loss); }
  void squared_error(std::int64_t n, double const* a, double const* b, double* loss) override { cpu::squared_error(n, a, b, loss); }
  void squared_error_backward(std::int64_t n, float const* a, float const* b, float const* gl, float* ga, float* gb) override {
    cpu::squared_error_backward(n, a, b, gl, ga, gb);
  }
  void squared_error_backward(std::int64_t n, double const* a, double const* b, double const* gl, double* ga, double* gb) override {
    cpu::squared_error_backward(n, a, b, gl, ga, gb);
  }
  void binary_cross_entropy(std::int64_t n, float const* x, float const* t, float* loss) override { cpu::binary_cross_entropy(n, x, t, loss); }
  void binary_cross_entropy(std::int64_t n, double const* x, double const* t, double* loss) override {
    cpu::binary_cross_entropy(n, x, t, loss);
  }
  void binary_cross_entropy_backward(std::int64_t n, float const* x, float const* t, float const* gl, float* gx, float* gt) override {
    cpu::binary_cross_entropy_backward(n, x, t, gl, gx, gt);
  }
  void binary_cross_entropy_backward(std::int64_t n, double const* x, double const* t, double const* gl, double* gx, double* gt) override {
    cpu::binary_cross_entropy_backward(n, x, t, gl, gx, gt);
  }
  void classification_counts(std::int64_t C, std::int64_t B, float const* logits, float const* target, bool indices, float* correct,
                             float* confusion) override {
    cpu::classification_counts(C, B, logits, target, indices, correct, confusion);
  }
  void classification_counts(std::int64_t C, std::int64_t B, double const* logits, double const* target, bool indices, double* correct,
                             double* confusion) override {
    cpu::classification_counts(C, B, logits, target, indices, correct, confusion);
  }
  void copy(std::int64_t rows, std::int64_t cols, float const* src, std::int64_t ld_src, float* dst, std::int64_t ld_dst, bool accumulate) override {
    detail::copy(rows, cols, src, ld_src, dst, ld_dst, accumulate);
  }
  void copy(std::int64_t rows, std::int64_t cols, double const* src, std::int64_t ld_src, double* dst, std::int64_t ld_dst, bool accumulate) override {
    detail::copy(rows, cols, src, ld_src, dst, ld_dst, accumulate);
  }
  void transpose(std::int64_t m, std::int64_t n, float const* src, float* dst, bool accumulate) override { detail::transpose(m, n, src, dst, accumulate); }
  void transpose(std::int64_t m, std::int64_t n, double const* src, double* dst, bool accumulate) override {
    detail::transpose(m, n, src, dst, accumulate);
  }
  void epilogue_backward(epilogue_act act, std::int64_t m, std::int64_t n, float const* gy, float const* yz, float* g, float* bias_grad) override {
    detail::epilogue_backward<float>(act, m, n, gy, yz, g, bias_grad);
  }
  void epilogue_backward(epilogue_act act, std::int64_t m, std::int64_t n, double const* gy, double const* yz, double* g,
                         double* bias_grad) override {
    detail::epilogue_backward<double>(act, m, n, gy, yz, g, bias_grad);
  }
  void causal_attention(std::int64_t heads, std::int64_t d, std::int64_t seq, std::int64_t batch, float const* qkv, float* out,
                        float* lse) override {
    cpu::causal_attention<float>(heads, d, seq, batch, qkv, out, lse);
  }
  void causal_attention(std::int64_t heads, std::int64_t d, std::int64_t seq, std::int64_t batch, double const* qkv, double* out,
                        double* lse) override {
    cpu::causal_attention<double>(heads, d, seq, batch, qkv, out, lse);
  }
  void causal_attention_backward(std::int64_t heads, std::int64_t d, std::int64_t seq, std::int64_t batch, float const* qkv,
                                 float const* out, float const* lse, float const* gout, float* gqkv) override {
    cpu::causal_attention_backward<float>(heads, d, seq, batch, qkv, out, lse, gout, gqkv);
  }
  void causal_attention_backward(std::int64_t heads, std::int64_t d, std::int64_t seq, std::int64_t batch, double const* qkv,
                                 double const* out, double const* lse, double const* gout, double* gqkv) override {
    cpu::causal_attention_backward<double>(heads, d, seq, batch, qkv, out, lse, gout, gqkv);
  }
  void layer_norm(std::int64_t F, std::int64_t cols, double eps, float const* x, float const* w, float const* b, float* y,
                  float* stats) override {
    cpu::layer_norm<float>(F, cols, eps, x, w, b, y, stats);
  }
  void layer_norm(std::int64_t F, std::int64_t cols, double eps, double const* x, double const* w, double const* b, double* y,
                  double* stats) override {
    cpu::layer_norm<double>(F, cols, eps, x, w, b, y, stats);
  }
  void layer_norm_backward(std::int64_t F, std::int64_t cols, float const* x, float const* w, float const* stats, float const* gy, float* gx,
                           float* gw, float* gb) override {
    cpu::layer_norm_backward<float>(F, cols, x, w, stats, gy, gx, gw, gb);
  }
  void layer_norm_backward(std::int64_t F, std::int64_t cols, double const* x, double const* w, double const* stats, double const* gy,
                           double* gx, double* gw, double* gb) override {
    cpu::layer_norm_backward<double>(F, cols, x, w, stats, gy, gx, gw, gb);
  }
  void batch_norm(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, double eps, double momentum, float const* x,
                  float const* w, float const* b, float const* rm, float const* rv, float* stats, float* nm, float* nv, float* y) override {
    cpu::batch_norm<float>(training, inner, C, B, eps, momentum, x, w, b, rm, rv, stats, nm, nv, y);
  }
  void batch_norm(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, double eps, double momentum, double const* x,
                  double const* w, double const* b, double const* rm, double const* rv, double* stats, double* nm, double* nv,
                  double* y) override {
    cpu::batch_norm<double>(training, inner, C, B, eps, momentum, x, w, b, rm, rv, stats, nm, nv, y);
  }
  void batch_norm_backward(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, float const* x, float const* w,
                           float const* stats, float const* gy, float* gx, float* gw, float* gb) override {
    cpu::batch_norm_backward<float>(training, inner, C, B, x, w, stats, gy, gx, gw, gb);
  }
  void batch_norm_backward(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, double const* x, double const* w,
                           double const* stats, double const* gy, double* gx, double* gw, double* gb) override {
    cpu::batch_norm_backward<double>(training, inner, C, B, x, w, stats, gy, gx, gw, gb);
  }
  void dropout(std::uint64_t seed, std::uint64_t below, std::int64_t n, float scale, float const* x, float* y) override {
    cpu::dropout<float>(seed, below, n, scale, x, y);
  }
  void dropout(std::uint64_t seed, std::uint64_t below, std::int64_t n, double scale, double const* x, double* y) override {
    cpu::dropout<double>(seed, below, n, scale, x, y);
  }
  void dropout_backward(std::uint64_t seed, std::uint64_t below, std::int64_t n, float scale, float const* gy, float* gx) override {
    cpu::dropout_backward<float>(seed, below, n, scale, gy, gx);
  }
  void dropout_backward(std::uint64_t seed, std::uint64_t below, std::int64_t n, double scale, double const* gy, double* gx) override {
    cpu::dropout_backward<double>(seed, below, n, scale, gy, gx);
  }
  std::int64_t embedding(std::int64_t vocab, std::int64_t dim, std::int64_t count, float const* idx, float const* w, float* y) override {
    return cpu::embedding<float>(vocab, dim, count, idx, w, y);
  }
  std::int64_t embedding(std::int64_t vocab, std::int64_t dim, std::int64_t count, double const* idx, double const* w, double* y) override {
    return cpu::embedding<double>(vocab, dim, count, idx, w, y);
  }
  void embedding_backward(std::int64_t vocab, std::int64_t dim, std::int64_t count, float const* idx, float const* gy, float* gw) override {
    cpu::embedding_backward<float>(vocab, dim, count, idx, gy, gw);
  }
  void embedding_backward(std::int64_t vocab, std::int64_t dim, std::int64_t count, double const* idx, double const* gy, double* gw) override {
    cpu::embedding_backward<double>(vocab, dim, count, idx, gy, gw);
  }
  void pool2d(pool_kind kind, pool_window const& p, float const* x, float* y, std::uint32_t* arg) override {
    cpu::pool2d<float>(kind, p, x, y, arg);
  }
  void pool2d(pool_kind kind, pool_window const& p, double const* x, double* y, std::uint32_t* arg) override {
    cpu::pool2d<double>(kind, p, x, y, arg);
  }
  void pool2d_backward(pool_kind kind, pool_window const& p, float const* gy, std::uint32_t const* arg, float* gx) override {
    cpu::pool2d_backward<float>(kind, p, gy, arg, gx);
  }
  void pool2d_backward(pool_kind kind, pool_window const& p, double const* gy, std::uint32_t const* arg, double* gx) override {
    cpu::pool2d_backward<double>(kind, p, gy, arg, gx);
  }
  std::int64_t conv2d_scratch(conv_window const& p, bool backward) const override { return cpu::conv2d_scratch(p, backward); }
  void conv2d(conv_window const& p, float const* x, float const* w, float const* bias, epilogue_act act, float* z, float* y,
              float* scratch) override {
    cpu::conv2d<float>(p, x, w, bias, act, z, y, scratch);
  }
  void conv2d(conv_window const& p, double const* x, double const* w, double const* bias, epilogue_act act, double* z, double* y,
              double* scratch) override {
    cpu::conv2d<double>(p, x, w, bias, act, z, y, scratch);
  }
  void conv2d_backward(conv_window const& p, epilogue_act act, float const* x, float const* w, float const* yz, float const* gy, float* gx,
                       float* gw, float* gb, float* scratch) override {
    cpu::conv2d_backward<float>(p, act, x, w, yz, gy, gx, gw, gb, scratch);
  }
  void conv2d_backward(conv_window const& p, epilogue_act act, double const* x, double const* w, double const* yz, double const* gy,
                       double* gx, double* gw, double* gb, double* scratch) override {
    cpu::conv2d_backward<double>(p, act, x, w, yz, gy, gx, gw, gb, scratch);
  }
  using device_ops::parallel_for;
  void parallel_for(int n, index_task task) override { thread_pool::instance().parallel_for(n, [&](int i) { task(i); }); }
  using device_ops::for_each_share;
  void for_each_share(std::int64_t count, range_task task) override {
    thread_pool::instance().for_each_share(count, [&](std::int64_t b, std::int64_t e) { task(b, e); });
  }
};

}  // namespace cpu

class cpu_backend {
 public:
  static constexpr device_kind device = device_kind::cpu;
  static constexpr char const* name() noexcept { return "cpu (Eigen)"; }
  std::string describe() const { return name(); }  // the `device` fact's value in the records
  // The kernels this process picks for this CPU (show() and the manifest print them). The first
  // call reads NITRO_CPU_ISA: E-CPU-002 when it names kernels this CPU cannot run.
  static std::string kernels() { return std::string("gemm ") + cpu::gemm_kernel_name(); }

  template <class T>
  basic_tensor<T> to_device(std::string_view field, basic_tensor<T> const& host) {
    auto it = m_counts.find(field);
    if (it == m_counts.end()) it = m_counts.emplace(std::string(field), transfer_count{}).first;
    it->second.transfers += 1;
    it->second.bytes += host.numel() * static_cast<std::int64_t>(sizeof(T));
    return host;
  }

  // The kernels the step's ops call (installed in every step and evaluation context).
  device_ops& ops() const noexcept { return cpu::ops::instance(); }

  std::map<std::string, transfer_count, std::less<>> const& transfers() const noexcept { return m_counts; }
  transfer_count transfers_of(std::string_view field) const {
    auto it = m_counts.find(field);
    return it == m_counts.end() ? transfer_count{} : it->second;
  }
  void reset_counts() { m_counts.clear(); }

 private:
  std::map<std::string, transfer_count, std::less<>> m_counts;
};

}  // namespace nitro
