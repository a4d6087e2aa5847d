// nitro/tensor/device_ops.hpp — the kernels a backend gives the ops: the seam between what a layer
// computes and the machine that computes it.
//
//   nitro::detail::active_ops().gemm(false, false, m, n, k, 1.f, a, m, b, k, 0.f, c, m);   // tensor/backend.hpp
//
// Layers never name a backend: their products and parallel regions ask the step context's
// device_ops (the CPU's when no step is running, e.g. a layer called from a test): products, products
// with their bias and activation fused (the dense layer's forward and backward), causal attention
// (forward and backward), parallel regions.
// The other ops (elementwise, reductions, softmax, losses, norms, convolution's chunks) compute on
// host memory with Eigen inside the CPU's own regions. A backend (tensor/cpu/backend.hpp, the
// reference) implements this table once; the handle installs its backend's table in every step and
// evaluation context. A virtual call per product or parallel region: nothing next to the work.
#pragma once

#include "nitro/tensor/device.hpp"
#include "nitro/tensor/epilogue.hpp"

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
