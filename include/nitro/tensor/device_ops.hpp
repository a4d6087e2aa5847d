// nitro/tensor/device_ops.hpp — the kernels a backend gives the ops: the seam between what a layer
// computes and the machine that computes it.
//
//   nitro::detail::active_ops().gemm(false, false, m, n, k, 1.f, a, m, b, k, 0.f, c, m);   // tensor/backend.hpp
//
// Layers never name a backend: they ask the step context's device_ops (the CPU's when no step is
// running, e.g. a layer called from a test) for memory (the step arena's chunks), products (and
// matmul's), products with their bias and activation fused (the dense layer's forward and
// backward), element-wise maps and broadcast arithmetic, reductions and softmax (each forward and
// backward), the losses (forward and backward), the metrics' counts, copies between shapes
// (slices, concatenations, transposes), causal attention (forward and backward), the norms,
// dropout, the embedding lookup, pooling and convolution (each forward and backward), parallel
// regions. A backend (tensor/cpu/backend.hpp, the reference)
// implements this table once; the handle installs its backend's table in every step and
// evaluation context. A virtual call per product or parallel region: nothing next to the work.
#pragma once

#include "nitro/tensor/convolution.hpp"
#include "nitro/tensor/device.hpp"
#include "nitro/tensor/elementwise.hpp"
#include "nitro/tensor/epilogue.hpp"
#include "nitro/tensor/loss.hpp"
#include "nitro/tensor/memory.hpp"
#include "nitro/tensor/pooling.hpp"
#include "nitro/tensor/reduction.hpp"

#include <cstdint>      // int64_t
#include <type_traits>  // remove_reference
#include <utility>      // forward

namespace nitro {

// A callable borrowed for one call (never stored, never allocated): what parallel_for runs.
class index_task {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cv_t<F>, index_task>)
  index_task(F& f) noexcept  // NOLINT: a view of f, as std::function_ref will be
      : m_object(&f), m_call([](void* o, int i) { (*static_cast<F*>(o))(i); }) {}
  void operator()(int i) const { m_call(m_object, i); }

 private:
  void* m_object;
  void (*m_call)(void*, int);
};

// The same for a stretch [begin, end) of a count: what for_each_share runs.
class range_task {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cv_t<F>, range_task>)
  range_task(F& f) noexcept  // NOLINT: a view of f
      : m_object(&f), m_call([](void* o, std::int64_t b, std::int64_t e) { (*static_cast<F*>(o))(b, e); }) {}
  void operator()(std::int64_t begin, std::int64_t end) const { m_call(m_object, begin, end); }

 private:
  void* m_object;
  void (*m_call)(void*, std::int64_t, std::int64_t);
};

class device_ops {
 public:
  virtual ~device_ops() = default;
  virtual device_kind device() const noexcept = 0;
  virtual char const* name() const noexcept = 0;
  // The memory the kernels read and write: the step arena's chunks (intermediates, gradients,
  // layer scratch) come from it. The heap unless the backend says otherwise.
  virtual device_memory& memory() noexcept { return host_memory::instance(); }

  // C = alpha op(A) op(B) + beta C, column-major; op(X) = X^T when trans_x. With beta == 0, C is
  // written without being read.
  virtual void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, float const* a,
                    std::int64_t lda, float const* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) = 0;
  virtual void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, double const* a,
                    std::int64_t lda, double const* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) = 0;

  // C = act(op(A) op(B) + bias): column-major, bias one value per row of C (null: none). z, when not
  // null and not c, receives the pre-activation op(A) op(B) + bias (ld ldc), what a gelu's derivative
  // reads; c is written without being read. (cuBLASLt's bias and activation epilogues.)
  virtual void gemm_epilogue(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float const* a, std::int64_t lda,
                             float const* b, std::int64_t ldb, float const* bias, epilogue_act act, float* z, float* c, std::int64_t ldc) = 0;
  virtual void gemm_epilogue(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double const* a, std::int64_t lda,
                             double const* b, std::int64_t ldb, double const* bias, epilogue_act act, double* z, double* c,
                             std::int64_t ldc) = 0;
  // The epilogue's backward over an m x n contiguous block: g = gy act'(yz) (yz: the output y, or the
  // pre-activation z where needs_preactivation(act)); g may be gy. Then, with bias_grad (m values)
  // not null, bias_grad += the row sums of g.
  virtual void epilogue_backward(epilogue_act act, std::int64_t m, std::int64_t n, float const* gy, float const* yz, float* g,
                                 float* bias_grad) = 0;
  virtual void epilogue_backward(epilogue_act act, std::int64_t m, std::int64_t n, double const* gy, double const* yz, double* g,
                                 double* bias_grad) = 0;

  // Element-wise (tensor/elementwise.hpp names them and defines each element): y = op(x) over n
  // elements, with the op's constant parameters a, b; its backward gx += gy op'(x) (y: the
  // forward's output, which some derivatives read).
  virtual void map(map_op op, std::int64_t n, float a, float b, float const* x, float* y) = 0;
  virtual void map(map_op op, std::int64_t n, double a, double b, double const* x, double* y) = 0;
  virtual void map_backward(map_op op, std::int64_t n, float a, float b, float const* x, float const* y, float const* gy, float* gx) = 0;
  virtual void map_backward(map_op op, std::int64_t n, double a, double b, double const* x, double const* y, double const* gy,
                            double* gx) = 0;
  // y = a op b over the plan's output, each input read at its strides (0 where broadcast); its
  // backward adds gy d(op)/da into ga and gy d(op)/db into gb (either may be null), summing over
  // the positions a broadcast input was read at.
  virtual void binary(binop op, broadcast_plan const& p, float const* a, float const* b, float* y) = 0;
  virtual void binary(binop op, broadcast_plan const& p, double const* a, double const* b, double* y) = 0;
  virtual void binary_backward(binop op, broadcast_plan const& p, float const* a, float const* b, float const* gy, float* ga, float* gb) = 0;
  virtual void binary_backward(binop op, broadcast_plan const& p, double const* a, double const* b, double const* gy, double* ga,
                               double* gb) = 0;

  // Reductions (tensor/reduction.hpp): y[o, i] = op over k of x[o, k, i], for the reduction's
  // inner x extent x outer; the backward adds the gradient of x into gx (from x, y and gy; argmax
  // has none).
  virtual void reduce(reduce_op op, reduction r, float const* x, float* y) = 0;
  virtual void reduce(reduce_op op, reduction r, double const* x, double* y) = 0;
  virtual void reduce_backward(reduce_op op, reduction r, float const* x, float const* y, float const* gy, float* gx) = 0;
  virtual void reduce_backward(reduce_op op, reduction r, double const* x, double const* y, double const* gy, double* gx) = 0;
  // Softmax (log: log-softmax) of each of `cols` columns of `rows` values; the backward adds the
  // gradient of x into gx, from the forward's y and gy.
  virtual void softmax(bool log, std::int64_t rows, std::int64_t cols, float const* x, float* y) = 0;
  virtual void softmax(bool log, std::int64_t rows, std::int64_t cols, double const* x, double* y) = 0;
  virtual void softmax_backward(bool log, std::int64_t rows, std::int64_t cols, float const* y, float const* gy, float* gx) = 0;
  virtual void softmax_backward(bool log, std::int64_t rows, std::int64_t cols, double const* y, double const* gy, double* gx) = 0;

  // Losses (tensor/loss.hpp), each a mean written to loss[0]; the backward reads the loss's
  // gradient through a pointer (gloss[0], in the backend's memory) and adds into the inputs'
  // gradients (a null one is skipped). Cross-entropy: logits [C, B], target [C, B] or B class
  // indices (`indices`), label smoothing s; p [C, B] receives the softmax the backward reads.
  virtual void cross_entropy(std::int64_t C, std::int64_t B, float const* logits, float const* target, bool indices, float smoothing,
                             float* p, float* loss) = 0;
  virtual void cross_entropy(std::int64_t C, std::int64_t B, double const* logits, double const* target, bool indices, double smoothing,
                             double* p, double* loss) = 0;
  virtual void cross_entropy_backward(std::int64_t C, std::int64_t B, float const* p, float const* target, bool indices, float smoothing,
                                      float const* gloss, float* glogits) = 0;
  virtual void cross_entropy_backward(std::int64_t C, std::int64_t B, double const* p, double const* target, bool indices,
                                      double smoothing, double const* gloss, double* glogits) = 0;
  // Squared error of a against b over n elements; sigmoid + binary cross-entropy of logits x
  // against targets t.
  virtual void squared_error(std::int64_t n, float const* a, float const* b, float* loss) = 0;
  virtual void squared_error(std::int64_t n, double const* a, double const* b, double* loss) = 0;
  virtual void squared_error_backward(std::int64_t n, float const* a, float const* b, float const* gloss, float* ga, float* gb) = 0;
  virtual void squared_error_backward(std::int64_t n, double const* a, double const* b, double const* gloss, double* ga, double* gb) = 0;
  virtual void binary_cross_entropy(std::int64_t n, float const* x, float const* t, float* loss) = 0;
  virtual void binary_cross_entropy(std::int64_t n, double const* x, double const* t, double* loss) = 0;
  virtual void binary_cross_entropy_backward(std::int64_t n, float const* x, float const* t, float const* gloss, float* gx, float* gt) = 0;
  virtual void binary_cross_entropy_backward(std::int64_t n, double const* x, double const* t, double const* gloss, double* gx,
                                             double* gt) = 0;

  // The metrics' counts (tensor/loss.hpp: argmax_column, target_class): over B columns of C
  // logits, with targets as cross_entropy takes them, correct[0] (when not null) += the columns
  // whose first largest logit is at their true class; confusion ([C, C] column-major, when not
  // null) += 1 at (true class, predicted class) of each column whose true class is in [0, C).
  // Both in the backend's memory, summed exactly (counts below 2^24 in float).
  virtual void classification_counts(std::int64_t C, std::int64_t B, float const* logits, float const* target, bool indices, float* correct,
                                     float* confusion) = 0;
  virtual void classification_counts(std::int64_t C, std::int64_t B, double const* logits, double const* target, bool indices,
                                     double* correct, double* confusion) = 0;

  // Copies between shapes, column-major: dst[i + j ld_dst] = src[i + j ld_src] for i < rows, j <
  // cols (accumulate: +=), the slices and concatenations and their backward; and dst (n x m) =
  // src (m x n) transposed (accumulate: +=).
  virtual void copy(std::int64_t rows, std::int64_t cols, float const* src, std::int64_t ld_src, float* dst, std::int64_t ld_dst,
                    bool accumulate) = 0;
  virtual void copy(std::int64_t rows, std::int64_t cols, double const* src, std::int64_t ld_src, double* dst, std::int64_t ld_dst,
                    bool accumulate) = 0;
  virtual void transpose(std::int64_t m, std::int64_t n, float const* src, float* dst, bool accumulate) = 0;
  virtual void transpose(std::int64_t m, std::int64_t n, double const* src, double* dst, bool accumulate) = 0;

  // Causal multi-head self-attention (tensor/cpu/attention.hpp has the layout): qkv [3 W, seq, batch]
  // with W = heads * head_dim, queries, keys and values stacked; out [W, seq, batch] is written;
  // lse [heads, seq, batch], when not null, receives each query's log-sum-exp of its scaled scores.
  virtual void causal_attention(std::int64_t heads, std::int64_t head_dim, std::int64_t seq, std::int64_t batch, float const* qkv,
                                float* out, float* lse) = 0;
  virtual void causal_attention(std::int64_t heads, std::int64_t head_dim, std::int64_t seq, std::int64_t batch, double const* qkv,
                                double* out, double* lse) = 0;
  // Its backward, from the forward's qkv, out and lse and the gradient of out: adds the gradient of
  // qkv into gqkv.
  virtual void causal_attention_backward(std::int64_t heads, std::int64_t head_dim, std::int64_t seq, std::int64_t batch,
                                         float const* qkv, float const* out, float const* lse, float const* gout, float* gqkv) = 0;
  virtual void causal_attention_backward(std::int64_t heads, std::int64_t head_dim, std::int64_t seq, std::int64_t batch,
                                         double const* qkv, double const* out, double const* lse, double const* gout, double* gqkv) = 0;

  // Layer normalisation of `cols` columns of F features: y = (x - mean) rstd w + b per column (w, b:
  // F values), rstd = 1 / sqrt(var + eps) with the biased variance; stats (2 per column: mean,
  // rstd), when not null, keeps what the backward reads. The backward adds into gx, gw, gb (a null
  // one is skipped), from x, w, the stats and gy.
  virtual void layer_norm(std::int64_t F, std::int64_t cols, double eps, float const* x, float const* w, float const* b, float* y,
                          float* stats) = 0;
  virtual void layer_norm(std::int64_t F, std::int64_t cols, double eps, double const* x, double const* w, double const* b, double* y,
                          double* stats) = 0;
  virtual void layer_norm_backward(std::int64_t F, std::int64_t cols, float const* x, float const* w, float const* stats, float const* gy,
                                   float* gx, float* gw, float* gb) = 0;
  virtual void layer_norm_backward(std::int64_t F, std::int64_t cols, double const* x, double const* w, double const* stats,
                                   double const* gy, double* gx, double* gw, double* gb) = 0;
  // Batch normalisation of x [inner, C, B] per channel (inner * B values each), y = (x - mean) rstd
  // w + b. Training: the batch's mean and biased variance, and new_mean / new_var = (1 - momentum)
  // running + momentum (the batch's mean, its unbiased variance); evaluation: the running
  // statistics (new_* untouched). stats (2 per channel: mean, rstd) receives what was used. The
  // backward adds into gx, gw, gb (a null one is skipped); in training the statistics' own
  // dependence on x is part of gx.
  virtual void batch_norm(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, double eps, double momentum, float const* x,
                          float const* w, float const* b, float const* running_mean, float const* running_var, float* stats,
                          float* new_mean, float* new_var, float* y) = 0;
  virtual void batch_norm(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, double eps, double momentum, double const* x,
                          double const* w, double const* b, double const* running_mean, double const* running_var, double* stats,
                          double* new_mean, double* new_var, double* y) = 0;
  virtual void batch_norm_backward(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, float const* x, float const* w,
                                   float const* stats, float const* gy, float* gx, float* gw, float* gb) = 0;
  virtual void batch_norm_backward(bool training, std::int64_t inner, std::int64_t C, std::int64_t B, double const* x, double const* w,
                                   double const* stats, double const* gy, double* gx, double* gw, double* gb) = 0;

  // Inverted dropout of n elements (tensor/dropout_mask.hpp decides each element from seed and
  // its position): y = x scale where kept, 0 where dropped (below: the drop threshold, p 2^32).
  // The backward adds gy scale into gx where kept.
  virtual void dropout(std::uint64_t seed, std::uint64_t below, std::int64_t n, float scale, float const* x, float* y) = 0;
  virtual void dropout(std::uint64_t seed, std::uint64_t below, std::int64_t n, double scale, double const* x, double* y) = 0;
  virtual void dropout_backward(std::uint64_t seed, std::uint64_t below, std::int64_t n, float scale, float const* gy, float* gx) = 0;
  virtual void dropout_backward(std::uint64_t seed, std::uint64_t below, std::int64_t n, double scale, double const* gy, double* gx) = 0;

  // The embedding lookup: column n of y (dim values) = column idx[n] of the table w [dim, vocab],
  // for n < count, the indices whole numbers held as values. Returns the first n whose index is
  // not a whole number in [0, vocab) (nothing written then), or -1. A backend that cannot tell
  // without waiting for its device returns -1, writes zeros for that column and raises E-LAYER-005
  // at its next check. The backward adds column n of gy into column idx[n] of gw.
  virtual std::int64_t embedding(std::int64_t vocab, std::int64_t dim, std::int64_t count, float const* idx, float const* w, float* y) = 0;
  virtual std::int64_t embedding(std::int64_t vocab, std::int64_t dim, std::int64_t count, double const* idx, double const* w,
                                 double* y) = 0;
  virtual void embedding_backward(std::int64_t vocab, std::int64_t dim, std::int64_t count, float const* idx, float const* gy, float* gw) = 0;
  virtual void embedding_backward(std::int64_t vocab, std::int64_t dim, std::int64_t count, double const* idx, double const* gy,
                                  double* gw) = 0;

  // Max or average pooling of p.planes planes (tensor/pooling.hpp: the window, its arithmetic);
  // for max, arg (when not null, one per output) receives the place of each window's first
  // largest value. The backward adds into gx: max routes each output's gradient to its arg's
  // place, average spreads it evenly over the window.
  virtual void pool2d(pool_kind kind, pool_window const& p, float const* x, float* y, std::uint32_t* arg) = 0;
  virtual void pool2d(pool_kind kind, pool_window const& p, double const* x, double* y, std::uint32_t* arg) = 0;
  virtual void pool2d_backward(pool_kind kind, pool_window const& p, float const* gy, std::uint32_t const* arg, float* gx) = 0;
  virtual void pool2d_backward(pool_kind kind, pool_window const& p, double const* gy, std::uint32_t const* arg, double* gx) = 0;

  // 2-D convolution (tensor/convolution.hpp: the extents and layouts): y = act(conv(x, w) + bias)
  // (bias: out_c values, or null); z, when not null, receives the pre-activation (what the
  // derivative of an activation with needs_preactivation reads); scratch holds
  // conv2d_scratch(p, false) values in the backend's memory. The backward adds the gradients of x,
  // w and the bias into gx, gw, gb (a null one is skipped), from the output y, or the
  // pre-activation where the derivative reads it (yz), with conv2d_scratch(p, true) values of
  // scratch.
  virtual std::int64_t conv2d_scratch(conv_window const& p, bool backward) const = 0;
  virtual void conv2d(conv_window const& p, float const* x, float const* w, float const* bias, epilogue_act act, float* z, float* y,
                      float* scratch) = 0;
  virtual void conv2d(conv_window const& p, double const* x, double const* w, double const* bias, epilogue_act act, double* z, double* y,
                      double* scratch) = 0;
  virtual void conv2d_backward(conv_window const& p, epilogue_act act, float const* x, float const* w, float const* yz, float const* gy,
                               float* gx, float* gw, float* gb, float* scratch) = 0;
  virtual void conv2d_backward(conv_window const& p, epilogue_act act, double const* x, double const* w, double const* yz, double const* gy,
                               double* gx, double* gw, double* gb, double* scratch) = 0;

  // task(0 .. n-1), each exactly once, on the backend's workers; returns when all are done. A task
  // that itself calls parallel_for runs that inner loop inline.
  virtual void parallel_for(int n, index_task task) = 0;

  // Convenience for a lambda: ops.parallel_for(n, [&](int i) { ... }).
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, index_task>)
  void parallel_for(int n, F&& f) {
    parallel_for(n, index_task(f));
  }

  // [0, count) cut into one contiguous share per worker, task(begin, end) once for each, every call
  // cutting the same count the same way and giving each share to the same worker whenever it can:
  // for memory-bound passes over the same buffers step after step (the optimizer's update), which
  // then find their share in the cache of the core that touched it last. Callers cut their work
  // into pieces that do not depend on the shares, so no result depends on them. By default one
  // share, on the calling thread.
  virtual void for_each_share(std::int64_t count, range_task task) {
    if (count > 0) task(0, count);
  }
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, range_task>)
  void for_each_share(std::int64_t count, F&& f) {
    for_each_share(count, range_task(f));
  }
};

}  // namespace nitro
