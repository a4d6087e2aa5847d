// nitro/train/cuda/program.cuh — a training step on the device for models made of dense layers.
//
//   using Model = decltype(e.build_model());                       // chain(dense<784, W>(relu), ...)
//   nitro::cuda_backend be;
//   nitro::cuda::dense_program<Model> prog(be);                    // fused MLP when the widths allow
//   prog.upload(params.values());                                  // the host flat buffer, same layout
//   prog.zero_grads();
//   prog.loss_and_grads({x.data(), label.data(), false, B}, smoothing, &sums);   // forward, fused loss, backward
//   nitro::cuda::dense_optimizer opt(prog, e.optimizer());            // the experiment's rule: the CPU's own
//   std::vector refs{nitro::cuda::constant_refs(e.optimizer(), lr, lambda)};
//   opt.step(prog, refs, step);                                    // one fused update per group
//
// The program owns the parameters and gradients on the device in the flat layout of the host's
// param_store (same offsets), so a checkpoint or the handle's host copy moves with one memcpy.
// Its path is a template argument: the fully fused MLP (kernels/.../fused_mlp.cuh, FP32 or TF32)
// when dense_chain<Model>::fusable — the widths are the experiment's GraphConst values — else one
// cuBLASLt product per layer. Buffers grow at the first batch and are reused: no allocation per
// step. Nothing here synchronises with the host except upload/download and read_sums.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/kernels/dense_lt.cuh"
#include "nitro/kernels/fused_mlp.cuh"
#include "nitro/kernels/loss.cuh"
#include "nitro/kernels/optimizer.cuh"
#include "nitro/optim/param_store.hpp"
#include "nitro/kernels/backend.cuh"
#include "nitro/nn/cuda/mlp_traits.hpp"
#include "nitro/tensor/cuda/runtime.cuh"
#include "nitro/tensor/cuda/scalars.hpp"

#include <cuda_runtime.h>

#include <array>        // offsets
#include <cstdint>      // int64_t, uint32_t
#include <string>       // keypaths
#include <string_view>  // keypaths
#include <vector>       // masks

namespace nitro::cuda {

enum class dense_path : int { fused_tf32, fused_fp32, cublaslt_tf32, cublaslt_fp32 };

constexpr char const* to_string(dense_path p) noexcept {
  switch (p) {
    case dense_path::fused_tf32: return "fused MLP (TF32 tensor cores)";
    case dense_path::fused_fp32: return "fused MLP (FP32)";
    case dense_path::cublaslt_tf32: return "cuBLASLt per layer (TF32)";
    case dense_path::cublaslt_fp32: return "cuBLASLt per layer (FP32)";
  }
  return "?";
}

// The path a model gets unless told otherwise: fused (TF32) when the chain fits the fused kernel.
template <class Model>
inline constexpr dense_path default_dense_path = dense_chain<Model>::fusable ? dense_path::fused_tf32 : dense_path::cublaslt_fp32;

// How the fused path forms the weight gradients: atomics inside the backward kernel (every layer in
// one kernel), or the kernel writes each layer's gradient and one cuBLASLt GEMM per layer over the
// whole batch forms dW (tiny-cuda-nn's split; fewer atomics at large widths and batches). The gemm
// split needs activations differentiated from their outputs (not gelu); with gelu it stays atomics.
enum class weight_grads : int { atomics, gemm };

// What one step reads: device pointers, the batch last.
struct step_batch {
  float const* x = nullptr;       // [in, batch]
  float const* target = nullptr;  // [out, batch] one-hot / soft, or [batch] class indices
  bool target_is_index = false;
  long long batch = 0;
};

template <class Model, class Store = param_store<typename Model::param_spec>, dense_path Path = default_dense_path<Model>>
class dense_program {
  using chain = dense_chain<Model>;
  static_assert(checks_evaluated<require_dense_model<Model>()>);

 public:
  using model_type = Model;
  using store_type = Store;
  static constexpr std::size_t layers = chain::layers;
  static constexpr dense_path path = Path;
  static constexpr bool fused = Path == dense_path::fused_tf32 || Path == dense_path::fused_fp32;
  static constexpr bool tf32 = Path == dense_path::fused_tf32 || Path == dense_path::cublaslt_tf32;
  static constexpr std::int64_t in = chain::info[0].in;
  static constexpr std::int64_t out = chain::info[layers - 1].out;
  static constexpr std::int64_t size = Store::size;  // floats in the flat buffer (padding included)

  explicit dense_program(cuda_backend& be) : m_be(&be) {
    cuda::device_scope on(be.device_id());
    for (std::size_t l = 0; l < layers; ++l) {
      const std::string prefix = chain::single ? std::string() : "layer_" + std::to_string(l + 1) + ".";
      m_w[l] = find_offset(prefix + "weight");
      m_b[l] = chain::info[l].bias ? find_offset(prefix + "bias") : -1;
      if (m_w[l] < 0 || (chain::info[l].bias && m_b[l] < 0))
        throw error("E-CUDA-012", "the parameter store has no leaf " + prefix + "weight/bias for layer " + std::to_string(l + 1),
                    "build the program with the param_store of the model's param_spec");
    }
    m_params.reserve(static_cast<std::size_t>(size));
    m_grads.reserve(static_cast<std::size_t>(size));
    // Zeroed on the compute stream, where every later kernel of the program runs (the legacy default
    // stream would not order against the backend's non-blocking streams); the sums too, so that
    // read_sums before any batch reads zeros, not whatever cudaMalloc left.
    m_params.zero_async(m_be->compute(), static_cast<std::size_t>(size));
    m_grads.zero_async(m_be->compute(), static_cast<std::size_t>(size));
    NITRO_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m_sums), sizeof(metric_sums)));
    reset_sums();
  }
  ~dense_program() {
    if (m_sums) cudaFree(m_sums);
  }
  dense_program(dense_program const&) = delete;
  dense_program& operator=(dense_program const&) = delete;

  cuda_backend& backend() const noexcept { return *m_be; }
  float* params() noexcept { return m_params.data(); }
  float* grads() noexcept { return m_grads.data(); }
  std::int64_t weight_offset(std::size_t l) const noexcept { return m_w[l]; }
  std::int64_t bias_offset(std::size_t l) const noexcept { return m_b[l]; }

  // The host flat buffer (param_store::values(), `size` floats) to the device, and back.
  void upload(float const* host_values) {
    cuda::device_scope on(m_be->device_id());
    NITRO_CUDA_CHECK(cudaMemcpyAsync(m_params.data(), host_values, sizeof(float) * static_cast<std::size_t>(size), cudaMemcpyHostToDevice,
                                     m_be->compute()));
    NITRO_CUDA_CHECK(cudaStreamSynchronize(m_be->compute()));
  }
  void download(float* host_values) const { copy_out(m_params.data(), host_values); }
  void download_grads(float* host_values) const { copy_out(m_grads.data(), host_values); }

  void zero_grads() { m_grads.zero_async(m_be->compute(), static_cast<std::size_t>(size)); }

  // The fused path's weight gradients (see weight_grads); the cuBLASLt path ignores it.
  void set_weight_grads(weight_grads w) {
    const weight_grads want = (fused && !split_possible) ? weight_grads::atomics : w;
    if (want != m_wgrads) m_capacity = 0;  // buffers are laid out again at the next forward
    m_wgrads = want;
  }
  weight_grads weight_grads_mode() const noexcept { return m_wgrads; }

  // ---- the pieces of a step --------------------------------------------------------------------
  // Logits [out, batch] on the device, valid until the next forward.
  float const* forward(float const* x, long long batch, bool training) {
    cuda::device_scope on(m_be->device_id());
    reserve(batch);
    m_x = x;
    m_batch = batch;
    if constexpr (fused) {
      mlp_args a = fused_args(batch);
      a.x = x;
      if (!training)
        for (auto& s : a.saved) s = nullptr;
      fused_mlp_kernels<cfg>::forward(a, training, m_be->compute());
    } else {
      float const* h = x;
      for (std::size_t l = 0; l < layers; ++l) {
        const dense_shape d = shape_of(l);
        dense_forward(m_be->gemm(), m_be->lt(), m_be->compute(), d, batch, m_params.data() + m_w[l], bias_ptr(l), h, z_of(l), h_of(l), tf32);
        h = h_of(l);
      }
    }
    return logits();
  }
  float* logits() noexcept { return fused ? m_acts.data() + m_y_at : h_of(layers - 1); }

  // Gradients (+=) of the parameters for d(loss)/d(logits) = dy, after forward(training = true) of
  // the same batch; dx (may be null) receives d(loss)/d(x).
  void backward(float const* dy, float* dx = nullptr) {
    cuda::device_scope on(m_be->device_id());
    const long long batch = m_batch;
    if constexpr (fused) {
      mlp_args a = fused_args(batch);
      a.x = m_x;
      a.dy = dy;
      a.dx = dx;
      const bool split = m_wgrads == weight_grads::gemm;
      for (std::size_t l = 0; l < layers; ++l) {
        a.dw[l] = m_grads.data() + m_w[l];
        a.db[l] = m_b[l] >= 0 ? m_grads.data() + m_b[l] : nullptr;
        if (split) a.dz[l] = m_acts.data() + m_dz_at[l];
      }
      fused_mlp_kernels<cfg>::backward(a, m_be->compute());
      if (split) {  // dW_l += dz_l input_l^T, one GEMM over the batch per layer
        for (std::size_t l = 0; l < layers; ++l) {
          const dense_shape d = shape_of(l);
          float const* input = l == 0 ? m_x : a.saved[l - 1];
          m_be->gemm().matmul(m_be->lt(), m_be->compute(), false, true, d.out, d.in, static_cast<int>(batch), 1.0f, a.dz[l], d.out, input, d.in,
                              1.0f, m_grads.data() + m_w[l], d.out, tf32);
        }
      }
    } else {
      float const* dh = dy;
      for (std::size_t l = layers; l-- > 0;) {
        const dense_shape d = shape_of(l);
        float const* xin = l == 0 ? m_x : h_of(l - 1);
        float const* saved = d.act == activation_kind::gelu ? z_of(l) : h_of(l);
        float* scratch = grad_buffer(l % 2);
        float* dprev = l == 0 ? dx : grad_buffer((l + 1) % 2);
        dense_backward(m_be->gemm(), m_be->lt(), m_be->compute(), d, batch, m_params.data() + m_w[l], xin, saved, dh, scratch,
                       m_grads.data() + m_w[l], m_b[l] >= 0 ? m_grads.data() + m_b[l] : nullptr, dprev, 0.0f, tf32);
        dh = dprev;
      }
    }
  }

  // forward (training), the fused softmax cross-entropy (smoothing from the scalar block), its
  // gradient, backward: gradients accumulate in grads(); the batch's loss and accuracy add to the
  // device sums (read_sums).
  void loss_and_grads(step_batch const& b, scalar_ref smoothing) {
    float const* y = forward(b.x, b.batch, true);
    softmax_xent(y, static_cast<int>(out), b.batch, b.target, b.target_is_index, smoothing, m_be->scalars(), m_dy.data(), m_sums, m_be->compute());
    backward(m_dy.data());
  }
  // forward (evaluation) and the loss sums, no gradients.
  void evaluate(step_batch const& b, scalar_ref smoothing) {
    float const* y = forward(b.x, b.batch, false);
    softmax_xent(y, static_cast<int>(out), b.batch, b.target, b.target_is_index, smoothing, m_be->scalars(), nullptr, m_sums, m_be->compute());
  }
  // The sums since the last reset (waits for the device); E-LOSS-002/-003 when a batch was flagged.
  metric_sums read_sums() const {
    metric_sums s;
    cuda::device_scope on(m_be->device_id());
    NITRO_CUDA_CHECK(cudaMemcpyAsync(&s, m_sums, sizeof s, cudaMemcpyDeviceToHost, m_be->compute()));
    NITRO_CUDA_CHECK(cudaStreamSynchronize(m_be->compute()));
    s.check();
    return s;
  }
  void reset_sums() { NITRO_CUDA_CHECK(cudaMemsetAsync(m_sums, 0, sizeof(metric_sums), m_be->compute())); }
  metric_sums* sums_device() noexcept { return m_sums; }

 private:
  static constexpr std::int64_t max_width = [] {
    std::int64_t w = 0;
    for (auto const& i : chain::info) w = i.out > w ? i.out : w;
    return w;
  }();
  static constexpr tile::math math = Path == dense_path::fused_fp32 ? tile::math::fp32 : tile::math::tf32;
  static constexpr auto cfg_pick() {
    if constexpr (fused) return fused_mlp_config_t<Model, math>{};
    else return 0;
  }
  using cfg = decltype(cfg_pick());
  static constexpr bool split_possible = [] {
    for (auto const& i : chain::info)
      if (i.act == activation_kind::gelu) return false;
    return true;
  }();

  static std::int64_t find_offset(std::string_view keypath) {
    for (auto const& li : Store::leaves)
      if (li.keypath == keypath) return li.offset;
    return -1;
  }
  void copy_out(float const* dev, float* host) const {
    cuda::device_scope on(m_be->device_id());
    NITRO_CUDA_CHECK(cudaMemcpyAsync(host, dev, sizeof(float) * static_cast<std::size_t>(size), cudaMemcpyDeviceToHost, m_be->compute()));
    NITRO_CUDA_CHECK(cudaStreamSynchronize(m_be->compute()));
  }
  float const* bias_ptr(std::size_t l) const { return m_b[l] >= 0 ? m_params.data() + m_b[l] : nullptr; }
  static dense_shape shape_of(std::size_t l) {
    return dense_shape{static_cast<int>(chain::info[l].in), static_cast<int>(chain::info[l].out), chain::info[l].act};
  }

  // Activations: fused — saved [W, B] per hidden layer, y and z_out [out, B], and in the split
  // mode each layer's gradient [out_l, B]; cuBLASLt — per layer h [out_l, B] (and z for gelu), and
  // two gradient buffers [max width, B]. Every region starts on 256 bytes (cuBLASLt's preference).
  void reserve(long long batch) {
    if (batch <= m_capacity) return;
    m_be->synchronize();  // growing: nothing may still use the old buffers
    std::size_t floats = 0;
    auto take = [&](long long n) {
      const std::size_t at = floats;
      floats += static_cast<std::size_t>((n + 63) / 64 * 64);
      return static_cast<std::int64_t>(at);
    };
    if constexpr (fused) {
      for (std::size_t l = 0; l + 1 < layers; ++l) m_saved_at[l] = take(cfg::width * batch);
      m_y_at = take(out * batch);
      m_zout_at = take(out * batch);
      if (m_wgrads == weight_grads::gemm)
        for (std::size_t l = 0; l < layers; ++l) m_dz_at[l] = take(chain::info[l].out * batch);
    } else {
      for (std::size_t l = 0; l < layers; ++l) {
        m_h_at[l] = take(chain::info[l].out * batch);
        m_z_at[l] = chain::info[l].act == activation_kind::gelu ? take(chain::info[l].out * batch) : m_h_at[l];
      }
      m_g_at[0] = take(max_width * batch);
      m_g_at[1] = take(max_width * batch);
    }
    m_acts.reserve(floats);
    m_dy.reserve(static_cast<std::size_t>(out * batch));
    m_capacity = batch;
  }
  mlp_args fused_args(long long batch) {
    mlp_args a;
    for (std::size_t l = 0; l < layers; ++l) {
      a.w[l] = m_params.data() + m_w[l];
      a.b[l] = bias_ptr(l);
    }
    if constexpr (fused) {
      for (std::size_t l = 0; l + 1 < layers; ++l) a.saved[l] = m_acts.data() + m_saved_at[l];
      a.y = m_acts.data() + m_y_at;
      a.z_out = m_acts.data() + m_zout_at;
    }
    a.batch = batch;
    return a;
  }
  float* h_of(std::size_t l) noexcept { return m_acts.data() + m_h_at[l]; }
  float* z_of(std::size_t l) noexcept { return m_acts.data() + m_z_at[l]; }
  float* grad_buffer(std::size_t i) noexcept { return m_acts.data() + m_g_at[i]; }

  cuda_backend* m_be;
  std::array<std::int64_t, layers> m_w{}, m_b{}, m_h_at{}, m_z_at{}, m_saved_at{}, m_dz_at{};
  std::int64_t m_y_at = 0, m_zout_at = 0;
  std::array<std::int64_t, 2> m_g_at{};
  weight_grads m_wgrads = weight_grads::atomics;
  device_buffer<float> m_params, m_grads, m_acts, m_dy;
  metric_sums* m_sums = nullptr;
  float const* m_x = nullptr;
  long long m_batch = 0, m_capacity = 0;
};

// ---- the optimizer over a program's groups ---------------------------------------------------------
// One group_optimizer per group of the store's layout (one for the plain layout), each over its
// contiguous span; the default no_decay (the note's): leaves of rank 1 are not decayed. Values come
// from rule_refs per group (slots of the scalar block when scheduled). Optionally clips the global
// gradient norm first (factor computed on the device).
namespace detail {
// A store's parameter groups: its grouped layout's spans, or one span over the whole buffer.
template <class Store>
constexpr std::size_t group_count() {
  if constexpr (requires { Store::group_count; }) return Store::group_count;
  else return 1;
}
struct span_info {
  std::int64_t offset = 0, size = 0;
};
template <class Store>
constexpr span_info group_span(std::size_t g) {
  if constexpr (requires { Store::group_span_of(g); }) return {Store::group_span_of(g).offset, Store::group_span_of(g).size};
  else return {0, Store::size};
}
}  // namespace detail

template <class Program, class R>
class dense_optimizer {
  using Store = typename Program::store_type;
  static constexpr std::size_t groups = detail::group_count<Store>();

 public:
  using refs_type = rule_refs_of<R>;

  dense_optimizer(Program& p, R rule) : m_be(&p.backend()) {
    cuda::device_scope on(m_be->device_id());
    for (std::size_t g = 0; g < groups; ++g) {
      const auto span = detail::group_span<Store>(g);
      m_opt.emplace_back(rule, span.size, m_be->compute());
      std::vector<std::uint32_t> bits(static_cast<std::size_t>((span.size + 31) / 32), 0u);
      for (auto const& li : Store::leaves) {
        if (!li.trainable || li.rank < 2 || li.offset < span.offset || li.offset >= span.offset + span.size) continue;
        for (std::int64_t i = li.offset - span.offset; i < li.offset - span.offset + li.numel; ++i)
          bits[static_cast<std::size_t>(i >> 5)] |= 1u << (i & 31);
      }
      m_opt.back().set_decay_mask(bits, m_be->compute());
    }
    NITRO_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m_scratch), sizeof(double) + sizeof(float)));
  }
  ~dense_optimizer() {
    if (m_scratch) cudaFree(m_scratch);
  }
  dense_optimizer(dense_optimizer const&) = delete;
  dense_optimizer& operator=(dense_optimizer const&) = delete;

  group_optimizer<R>& group(std::size_t g) { return m_opt[g]; }

  // One update of every group (t counts steps from 1). refs: one per group (or one for all).
  // clip_norm: a constant or slot (<= 0: no clipping).
  void step(Program& p, std::vector<refs_type> const& refs, long long t, scalar_ref clip_norm = scalar_ref::constant(0)) {
    cuda::device_scope on(m_be->device_id());
    float* factor = nullptr;
    const bool clip = !(clip_norm.is_constant() && !(clip_norm.value > 0));
    if (clip) {
      factor = reinterpret_cast<float*>(m_scratch + 1);
      clip_factor(p.grads(), Store::size, clip_norm, m_be->scalars(), m_scratch, factor, m_be->compute());
    }
    for (std::size_t g = 0; g < groups; ++g) {
      const auto span = detail::group_span<Store>(g);
      refs_type const& h = refs.size() == 1 ? refs[0] : refs.at(g);
      m_opt[g].step(p.params() + span.offset, p.grads() + span.offset, h, t, m_be->scalars(), factor, m_be->compute());
    }
  }

 private:
  cuda_backend* m_be;
  std::vector<group_optimizer<R>> m_opt;
  double* m_scratch = nullptr;
};

}  // namespace nitro::cuda
