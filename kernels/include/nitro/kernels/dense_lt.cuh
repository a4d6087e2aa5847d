// nitro/kernels/dense_lt.cuh — general dense layers through cuBLASLt: any width, one product per
// layer, the bias (and relu) fused into the product's epilogue.
//
//   nitro::cuda::lt_gemm gemm;                 // plans cached by shape: no allocation after the first step
//   gemm.matmul(handle, stream, /*ta=*/false, /*tb=*/false, m, n, k, 1.f, A, lda, B, ldb, 0.f, C, ldc,
//               /*tf32=*/false, bias, epilogue::relu_bias);
//   nitro::cuda::dense_forward(...), dense_backward(...)   one nitro::nn::dense layer
//
// Column-major like nitro's tensors. The cache reports its hits and misses (cache_stats's runtime
// caches: plans). TF32 (CUBLAS_COMPUTE_32F_FAST_TF32) is a per-call choice.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/kernels/pointwise.cuh"
#include "nitro/tensor/cuda/pointwise.hpp"
#include "nitro/tensor/cuda/runtime.cuh"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>  // size_t
#include <cstdint>  // int64_t, uintptr_t
#include <string>   // messages
#include <type_traits>  // is_same
#include <vector>   // the plan cache

namespace nitro::cuda {

inline void check_cublas(cublasStatus_t st, char const* call) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  throw error("E-CUDA-004", std::string(call) + " failed: " + cublasLtGetStatusName(st) + " (" + cublasLtGetStatusString(st) + ")",
              "a cuBLASLt failure: check the shapes passed and the device's free memory; report it with the call named here");
}
#define NITRO_CUBLAS_CHECK(...) ::nitro::cuda::check_cublas((__VA_ARGS__), #__VA_ARGS__)

class lt_handle {
 public:
  lt_handle() { NITRO_CUBLAS_CHECK(cublasLtCreate(&m_h)); }
  ~lt_handle() { if (m_h) cublasLtDestroy(m_h); }
  lt_handle(lt_handle const&) = delete;
  lt_handle& operator=(lt_handle const&) = delete;
  cublasLtHandle_t get() const noexcept { return m_h; }

 private:
  cublasLtHandle_t m_h = nullptr;
};

enum class lt_epilogue : int { none = 0, bias = 1, relu_bias = 2, relu = 3 };

class lt_gemm {
 public:
  explicit lt_gemm(std::size_t workspace_bytes = std::size_t(32) << 20) : m_workspace_bytes(workspace_bytes) {}
  lt_gemm(lt_gemm const&) = delete;
  lt_gemm& operator=(lt_gemm const&) = delete;
  ~lt_gemm() {
    for (auto& p : m_plans) p.destroy();
  }

  // C = alpha op(A) op(B) + beta C (+ bias per row, relu), C m x n, inner k; column-major. float
  // or double (FP64 products, where tf32 is ignored). With k == 0 and beta == 0, C is zeroed; with
  // k == 0 and beta != 0 the caller scales C (the kernels table does).
  template <class T>
  void matmul(cublasLtHandle_t h, cudaStream_t s, bool ta, bool tb, int m, int n, int k, T alpha, T const* A, int lda, T const* B, int ldb,
              T beta, T* C, int ldc, bool tf32, T const* bias = nullptr, lt_epilogue epi = lt_epilogue::none) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "nitro invariant: lt_gemm multiplies float or double (the kernels table's two types)");
    constexpr bool f64 = std::is_same_v<T, double>;
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {  // an empty inner product: C = beta C
      if (beta == T(0)) NITRO_CUDA_CHECK(cudaMemset2DAsync(C, sizeof(T) * static_cast<std::size_t>(ldc), 0, sizeof(T) * static_cast<std::size_t>(m), static_cast<std::size_t>(n), s));
      return;
    }
    if (m_workspace.capacity() < m_workspace_bytes) m_workspace.reserve(m_workspace_bytes);
    // cuBLASLt assumes 256-byte aligned matrices unless told: say how aligned these are (a
    // parameter leaf is 64-byte aligned), so the plan's algorithm accepts them
    plan& p = find(h, key{m, n, k, lda, ldb, ldc, ta, tb, tf32 && !f64, f64, static_cast<int>(epi), alignment(A), alignment(B), alignment(C)});
    if (epi == lt_epilogue::bias || epi == lt_epilogue::relu_bias)
      NITRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    NITRO_CUBLAS_CHECK(cublasLtMatmul(h, p.op, &alpha, A, p.a, B, p.b, &beta, C, p.c, C, p.c, &p.algo, m_workspace.data(), m_workspace_bytes, s));
  }

  std::size_t hits() const noexcept { return m_hits; }
  std::size_t misses() const noexcept { return m_misses; }

 private:
  struct key {
    int m, n, k, lda, ldb, ldc;
    bool ta, tb, tf32, f64;
    int epi;
    std::uint32_t align_a, align_b, align_c;
    bool operator==(key const&) const = default;
  };
  // the largest power of two (at most 256) dividing the address
  static std::uint32_t alignment(void const* p) noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    std::uint32_t r = 256;
    while (r > 4 && (a % r) != 0) r >>= 1;
    return r;
  }
  struct plan {
    key k;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    void destroy() {
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (c) cublasLtMatrixLayoutDestroy(c);
      if (op) cublasLtMatmulDescDestroy(op);
      a = b = c = nullptr;
      op = nullptr;
    }
  };

  plan& find(cublasLtHandle_t h, key const& k) {
    for (auto& p : m_plans)
      if (p.k == k) {
        ++m_hits;
        return p;
      }
    ++m_misses;
    plan p;
    p.k = k;
    try {
      const cudaDataType_t type = k.f64 ? CUDA_R_64F : CUDA_R_32F;
      NITRO_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, k.f64 ? CUBLAS_COMPUTE_64F : k.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, type));
      const cublasOperation_t opa = k.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = k.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
      NITRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
      NITRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
      const cublasLtEpilogue_t e = k.epi == 1   ? CUBLASLT_EPILOGUE_BIAS
                                   : k.epi == 2 ? CUBLASLT_EPILOGUE_RELU_BIAS
                                   : k.epi == 3 ? CUBLASLT_EPILOGUE_RELU
                                                : CUBLASLT_EPILOGUE_DEFAULT;
      NITRO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)));
      NITRO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, type, k.ta ? k.k : k.m, k.ta ? k.m : k.k, k.lda));
      NITRO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, type, k.tb ? k.n : k.k, k.tb ? k.k : k.n, k.ldb));
      NITRO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, type, k.m, k.n, k.ldc));
      cublasLtMatmulPreference_t pref = nullptr;
      NITRO_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
      const std::size_t ws = m_workspace_bytes;
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &k.align_a, sizeof(k.align_a));
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &k.align_b, sizeof(k.align_b));
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &k.align_c, sizeof(k.align_c));
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &k.align_c, sizeof(k.align_c));
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
      cublasLtMatmulPreferenceDestroy(pref);
      NITRO_CUBLAS_CHECK(st);
      if (found == 0)
        throw error("E-CUDA-004",
                    "cuBLASLt has no algorithm for a " + std::to_string(k.m) + " x " + std::to_string(k.n) + " x " + std::to_string(k.k) +
                        " product" + (k.f64 ? " in double" : "") + (k.epi ? " with an epilogue" : ""),
                    "report the layer's shape; as a workaround use another batch size");
      p.algo = result.algo;
    } catch (...) {
      p.destroy();
      throw;
    }
    m_plans.push_back(p);
    return m_plans.back();
  }

  std::vector<plan> m_plans;
  device_buffer<unsigned char> m_workspace;
  std::size_t m_workspace_bytes;
  std::size_t m_hits = 0, m_misses = 0;
};

// ---- one dense layer, layer by layer ------------------------------------------------------------
// Forward: z = W x + b (the bias in the epilogue), h = act(z). relu fuses into the epilogue too
// (then z is not kept: relu differentiates from h). `z` may equal `h` unless the activation needs
// its input for the backward pass (gelu).
struct dense_shape {
  int in = 0, out = 0;
  activation_kind act = activation_kind::identity;
};

inline void dense_forward(lt_gemm& gemm, cublasLtHandle_t h, cudaStream_t s, dense_shape d, long long batch, float const* W, float const* bias,
                          float const* x, float* z, float* hout, bool tf32) {
  const bool fuse_relu = d.act == activation_kind::relu && bias != nullptr;
  const lt_epilogue epi = bias == nullptr ? lt_epilogue::none : fuse_relu ? lt_epilogue::relu_bias : lt_epilogue::bias;
  float* dst = (d.act == activation_kind::identity || fuse_relu) ? hout : z;
  gemm.matmul(h, s, false, false, d.out, static_cast<int>(batch), d.in, 1.0f, W, d.out, x, d.in, 0.0f, dst, d.out, tf32, bias, epi);
  if (!fuse_relu && d.act != activation_kind::identity) activation_forward(d.act, z, hout, static_cast<long long>(d.out) * batch, s);
}

// Backward: g = dh * act'(saved) (in `scratch`, which may alias dh), db += rowsum(g), dW += g x^T,
// and dx (+)= W^T g when dx is not null (dx_beta 0 writes, 1 accumulates).
inline void dense_backward(lt_gemm& gemm, cublasLtHandle_t h, cudaStream_t s, dense_shape d, long long batch, float const* W, float const* x,
                           float const* saved, float const* dh, float* scratch, float* dW, float* db, float* dx, float dx_beta, bool tf32) {
  const long long n = static_cast<long long>(d.out) * batch;
  float const* g = dh;
  if (d.act != activation_kind::identity) {
    activation_backward(d.act, dh, saved, scratch, n, s);
    g = scratch;
  }
  if (db) bias_grad(g, d.out, batch, db, s);
  if (dW) gemm.matmul(h, s, false, true, d.out, d.in, static_cast<int>(batch), 1.0f, g, d.out, x, d.in, 1.0f, dW, d.out, tf32);
  if (dx) gemm.matmul(h, s, true, false, d.in, static_cast<int>(batch), d.out, 1.0f, W, d.out, g, d.out, dx_beta, dx, d.in, tf32);
}

}  // namespace nitro::cuda
