// nitro/tensor/cuda/mlp_tile.hpp — the fully fused MLP: its shape, its shared-memory plan, and the
// program one thread block runs over one tile of samples, forward and backward.
//
//   mlp_config<In, Width, Out, Hidden, ActH, ActO, Math>
//       in -> width (ActH) -> [width -> width (ActH)] x Hidden -> out (ActO); Width a multiple of 16
//       in [16, 128]; Math fp32 (FMA) or tf32 (mma.sync, FP32 accumulation)
//   mlp_forward_tile<Cfg>(blk, args, smem, first_sample, training)
//   mlp_backward_tile<Cfg>(blk, args, smem, first_sample)
//   emulate_mlp_forward<Cfg>(args, training) / emulate_mlp_backward<Cfg>(args)   (host, for tests)
//
// Every layer of a tile runs in one kernel: the tile's activations stay in shared memory between
// layers and the products accumulate in registers; only the input, the output and (when training)
// what the backward pass needs touch device memory. The backward kernel walks the layers from the
// last to the first, accumulating each layer's weight and bias gradients with atomics and keeping
// the running gradient in shared memory. The widths are template arguments — the experiment's
// GraphConst values (see mlp_traits.hpp) — so every loop bound and every shared-memory offset is a
// compile-time constant. kernels/include/nitro/kernels/fused_mlp.cuh launches these programs.
#pragma once

#include "nitro/tensor/cuda/hd.hpp"
#include "nitro/tensor/cuda/pointwise.hpp"
#include "nitro/tensor/cuda/tile.hpp"

#include <vector>  // the emulation's shared memory

namespace nitro::cuda {

inline constexpr int max_mlp_layers = 12;

template <int In, int Width, int Out, int Hidden, activation_kind ActH, activation_kind ActO, tile::math Math>
struct mlp_config {
  static_assert(Width % 16 == 0 && Width >= 16 && Width <= 128,
                "E-CUDA-103: the fused MLP kernel takes widths that are multiples of 16 from 16 to 128. Fix: choose such a width, or leave the chain to the general path.");
  static_assert(In >= 1 && Out >= 1 && Out <= 128, "E-CUDA-104: the fused MLP kernel takes 1 <= In and 1 <= Out <= 128. Fix: a smaller output layer, or the general path.");
  static_assert(Hidden >= 0 && Hidden + 2 <= max_mlp_layers, "E-CUDA-105: the fused MLP kernel takes at most 10 hidden width x width layers. Fix: fewer layers, or the general path.");

  static constexpr int in = In, width = Width, out = Out, hidden = Hidden, layers = Hidden + 2;
  static constexpr activation_kind act_hidden = ActH, act_out = ActO;
  static constexpr tile::math math = Math;

  static constexpr int out_p = (Out + 15) / 16 * 16;                   // output rows, padded to a tile
  static constexpr int m_max = Width > out_p ? Width : out_p;          // widest layer output
  static constexpr int warps = m_max / 16 > 4 ? m_max / 16 : 4;
  static constexpr int threads = warps * 32;
  static constexpr int bt = m_max > 64 ? 64 : 128;                     // samples per block tile
  static constexpr int kc = 64;                                        // input features per streamed chunk
  static constexpr int chunks = (In + kc - 1) / kc;

  // shared memory, in floats: activations [bt][ld_h], gradients [bt][ld_g] (backward), and a
  // region for a layer's weights (or their transpose, or a pre-activation tile)
  static constexpr int ld_h = (m_max > kc ? m_max : kc) + 4;
  static constexpr int ld_g = m_max + 4;
  static constexpr int h_floats = bt * ld_h;
  static constexpr int g_floats = bt * ld_g;
  static constexpr bool keeps_pre = act_math<ActH>::needs_pre || act_math<ActO>::needs_pre;
  static constexpr int max5(int a, int b, int c, int d, int e) {
    int m = a;
    m = b > m ? b : m;
    m = c > m ? c : m;
    m = d > m ? d : m;
    return e > m ? e : m;
  }
  static constexpr int w_floats_core = max5((Width + 8) * kc,      // layer 0, one chunk
                                            (Width + 8) * Width,   // a hidden layer
                                            (out_p + 8) * Width,   // the output layer
                                            (Width + 8) * m_max,   // backward: a layer's transpose
                                            (kc + 8) * Width);     // backward: W0^T, one chunk (dx)
  static constexpr int w_floats = keeps_pre && bt * ld_h > w_floats_core ? bt * ld_h : w_floats_core;
  static constexpr int forward_smem_bytes = (h_floats + w_floats) * 4;
  static constexpr int backward_smem_bytes = (h_floats + g_floats + w_floats) * 4;

  NITRO_HD_INLINE static constexpr int in_of(int l) { return l == 0 ? In : Width; }
  NITRO_HD_INLINE static constexpr int out_of(int l) { return l == layers - 1 ? Out : Width; }
  // multiply-adds per sample, forward
  static constexpr long long macs_per_sample = static_cast<long long>(In) * Width +
                                               static_cast<long long>(Hidden) * Width * Width + static_cast<long long>(Width) * Out;
};

// What a fused MLP reads and writes (device pointers for a kernel, host pointers for the emulation).
// Matrices are column-major with the batch last, as nitro's tensors: x [in, batch], y [out, batch],
// layer l's weight [out_l, in_l] (the dense layer's "weight" leaf) and bias [out_l].
struct mlp_args {
  float const* x = nullptr;
  float const* w[max_mlp_layers] = {};
  float const* b[max_mlp_layers] = {};      // null: the layer has no bias
  float* y = nullptr;
  float* saved[max_mlp_layers] = {};        // l < layers-1: [width, batch] what backward needs (the
                                            // activation, or the pre-activation for gelu)
  float* z_out = nullptr;                   // [out, batch] the output's pre-activation (gelu output)
  float const* dy = nullptr;                // [out, batch] d(loss)/d(y)
  float* dw[max_mlp_layers] = {};           // += d(loss)/d(weight); null: not wanted
  float* db[max_mlp_layers] = {};           // += d(loss)/d(bias); null: no bias or not wanted
  float* dx = nullptr;                      // = d(loss)/d(x); null: not wanted
  float* dz[max_mlp_layers] = {};           // when set: = d(loss)/d(pre-activation of layer l) [out_l, batch],
                                            // and dw[l] is left to the caller (one GEMM over the batch)
  long long batch = 0;
};

namespace detail {

// The bias, the activation and the copy out of one layer's product (forward).
template <class Cfg, class Plan, activation_kind A, class Block, class Acc>
NITRO_HD_INLINE void mlp_forward_epilogue(Block const& blk, Acc& acc, mlp_args const& p, float* hs, float* zs, int l, int rows, int nb,
                                          long long s0, bool training) {
  using Act = act_math<A>;
  constexpr int LDH = Cfg::ld_h;
  float const* bias = p.b[l];
  tile::block_epilogue<Plan>(blk, acc, [&](int o, int s, float v) {
    const float z = v + (bias != nullptr && o < rows ? bias[o] : 0.0f);
    hs[s * LDH + o] = Act::forward(z);
    if constexpr (Act::needs_pre) zs[s * LDH + o] = z;
  });
  blk.sync();
  if (l < Cfg::layers - 1) {
    if (training && p.saved[l] != nullptr) {
      float const* src = Act::needs_pre ? zs : hs;
      float* dst = p.saved[l];
      blk.for_each(nb * rows, [&](int i) {
        const int o = i % rows, s = i / rows;
        dst[o + (s0 + s) * rows] = src[s * LDH + o];
      });
    }
  } else {
    blk.for_each(nb * rows, [&](int i) {
      const int o = i % rows, s = i / rows;
      p.y[o + (s0 + s) * rows] = hs[s * LDH + o];
    });
    if (Act::needs_pre && training && p.z_out != nullptr)
      blk.for_each(nb * rows, [&](int i) {
        const int o = i % rows, s = i / rows;
        p.z_out[o + (s0 + s) * rows] = zs[s * LDH + o];
      });
  }
}

// Copies a layer's weight [rows, cols] into shared memory, column-major with leading dimension
// rows_p + 8 (conflict-free A fragments), rows padded with zeros to rows_p.
template <class Block>
NITRO_HD_INLINE void stage_weight(Block const& blk, float* ws, float const* w, int rows, int rows_p, int cols) {
  const int ld = rows_p + 8;
  blk.for_each(rows_p * cols, [&](int i) {
    const int o = i % rows_p, k = i / rows_p;
    ws[o + k * ld] = o < rows ? w[o + static_cast<long long>(k) * rows] : 0.0f;
  });
}

// Backward through layer l >= 1 (its input is the previous hidden layer's output, `width` rows).
// On entry gs holds d(loss)/d(pre-activation of layer l) in its first `rows` rows; on exit it holds
// d(loss)/d(pre-activation of layer l-1).
template <class Cfg, int MP, class Block>
NITRO_HD_INLINE void mlp_backward_layer(Block const& blk, mlp_args const& p, float* hs, float* gs, float* ws, int l, int rows, int nb,
                                        long long s0) {
  using namespace tile;
  constexpr int W = Cfg::width, BT = Cfg::bt, LDH = Cfg::ld_h, LDG = Cfg::ld_g;
  using AH = act_math<Cfg::act_hidden>;
  float* db = p.db[l];
  if (db != nullptr)
    blk.for_each(rows, [&](int o) {
      float sum = 0.0f;
      for (int s = 0; s < nb; ++s) sum += gs[s * LDG + o];
      atomic_add(db + o, sum);
    });
  if (float* dz = p.dz[l]; dz != nullptr)
    blk.for_each(nb * rows, [&](int i) {
      const int o = i % rows, s = i / rows;
      dz[o + (s0 + s) * rows] = gs[s * LDG + o];
    });
  float const* sv = p.saved[l - 1];
  blk.for_each(BT * W, [&](int i) {
    const int f = i % W, s = i / W;
    float v = 0.0f;
    if (s < nb) {
      v = sv[f + (s0 + s) * W];
      if constexpr (AH::needs_pre) v = AH::forward(v);
    }
    hs[s * LDH + f] = v;
  });
  float const* w = p.w[l];
  blk.for_each(MP * W, [&](int idx) {  // the transpose: (i, o) at i + o * (W + 8)
    const int o = idx % MP, i = idx / MP;
    ws[i + o * (W + 8)] = o < rows ? w[o + static_cast<long long>(i) * rows] : 0.0f;
  });
  blk.sync();
  if (float* dw = p.dw[l]; dw != nullptr && p.dz[l] == nullptr) {  // dW += G H^T: rows o, columns i, inner samples
    using P = gemm_plan<MP, W, BT, Cfg::warps>;
    auto acc = blk.template regs<P::nt * 4>();
    block_gemm<Cfg::math, P>(blk, acc, col_major{gs, LDG}, row_major{hs, LDH}, false);
    block_epilogue<P>(blk, acc, [&](int o, int i, float v) {
      if (o < rows) atomic_add(dw + o + static_cast<long long>(i) * rows, v);
    });
  }
  using Q = gemm_plan<W, BT, MP, Cfg::warps>;  // dH = W^T G: rows i, columns samples, inner o
  auto acc = blk.template regs<Q::nt * 4>();
  block_gemm<Cfg::math, Q>(blk, acc, col_major{ws, W + 8}, col_major{gs, LDG}, false);
  blk.sync();
  block_epilogue<Q>(blk, acc, [&](int i, int s, float v) {
    float g = 0.0f;
    if (s < nb) g = AH::backward(v, AH::needs_pre ? sv[i + (s0 + s) * W] : hs[s * LDH + i]);
    gs[s * LDG + i] = g;
  });
  blk.sync();
}

}  // namespace detail

// ---- forward: one tile of Cfg::bt samples starting at s0 ------------------------------------------
template <class Cfg, class Block>
NITRO_HD void mlp_forward_tile(Block const& blk, mlp_args const& p, float* smem, long long s0, bool training) {
  using namespace tile;
  constexpr int BT = Cfg::bt, W = Cfg::width, KC = Cfg::kc, LDH = Cfg::ld_h, IN = Cfg::in, L = Cfg::layers;
  float* hs = smem;
  float* ws = smem + Cfg::h_floats;
  const long long rem = p.batch - s0;
  const int nb = rem < BT ? static_cast<int>(rem) : BT;

  {  // layer 0: in -> width, the input streamed through shared memory KC features at a time
    using P = gemm_plan<W, BT, KC, Cfg::warps>;
    auto acc = blk.template regs<P::nt * 4>();
    float const* w0 = p.w[0];
    for (int c = 0; c < Cfg::chunks; ++c) {
      const int k0 = c * KC;
      blk.sync();
      blk.for_each(BT * KC, [&](int i) {
        const int k = i % KC, s = i / KC;
        hs[s * LDH + k] = (s < nb && k0 + k < IN) ? p.x[(s0 + s) * IN + k0 + k] : 0.0f;
      });
      blk.for_each(W * KC, [&](int i) {
        const int o = i % W, k = i / W;
        ws[o + k * (W + 8)] = k0 + k < IN ? w0[o + static_cast<long long>(k0 + k) * W] : 0.0f;
      });
      blk.sync();
      block_gemm<Cfg::math, P>(blk, acc, col_major{ws, W + 8}, col_major{hs, LDH}, c > 0);
    }
    blk.sync();
    detail::mlp_forward_epilogue<Cfg, P, Cfg::act_hidden>(blk, acc, p, hs, ws, 0, W, nb, s0, training);
  }
  for (int l = 1; l <= Cfg::hidden; ++l) {  // width -> width
    using P = gemm_plan<W, BT, W, Cfg::warps>;
    auto acc = blk.template regs<P::nt * 4>();
    blk.sync();
    detail::stage_weight(blk, ws, p.w[l], W, W, W);
    blk.sync();
    block_gemm<Cfg::math, P>(blk, acc, col_major{ws, W + 8}, col_major{hs, LDH}, false);
    blk.sync();
    detail::mlp_forward_epilogue<Cfg, P, Cfg::act_hidden>(blk, acc, p, hs, ws, l, W, nb, s0, training);
  }
  {  // width -> out
    constexpr int OP = Cfg::out_p;
    using P = gemm_plan<OP, BT, W, Cfg::warps>;
    auto acc = blk.template regs<P::nt * 4>();
    blk.sync();
    detail::stage_weight(blk, ws, p.w[L - 1], Cfg::out, OP, W);
    blk.sync();
    block_gemm<Cfg::math, P>(blk, acc, col_major{ws, OP + 8}, col_major{hs, LDH}, false);
    blk.sync();
    detail::mlp_forward_epilogue<Cfg, P, Cfg::act_out>(blk, acc, p, hs, ws, L - 1, Cfg::out, nb, s0, training);
  }
}

// ---- backward: one tile; needs the forward's y (and saved activations) of the same samples -------
template <class Cfg, class Block>
NITRO_HD void mlp_backward_tile(Block const& blk, mlp_args const& p, float* smem, long long s0) {
  using namespace tile;
  constexpr int BT = Cfg::bt, W = Cfg::width, KC = Cfg::kc, LDH = Cfg::ld_h, LDG = Cfg::ld_g, IN = Cfg::in, L = Cfg::layers;
  constexpr int O = Cfg::out, OP = Cfg::out_p;
  using AO = act_math<Cfg::act_out>;
  float* hs = smem;
  float* gs = smem + Cfg::h_floats;
  float* ws = gs + Cfg::g_floats;
  const long long rem = p.batch - s0;
  const int nb = rem < BT ? static_cast<int>(rem) : BT;

  blk.for_each(BT * OP, [&](int i) {  // G = dy * act_out'(.)
    const int o = i % OP, s = i / OP;
    float v = 0.0f;
    if (s < nb && o < O) {
      const long long at = o + (s0 + s) * O;
      v = AO::backward(p.dy[at], AO::needs_pre ? p.z_out[at] : p.y[at]);
    }
    gs[s * LDG + o] = v;
  });
  blk.sync();
  detail::mlp_backward_layer<Cfg, OP>(blk, p, hs, gs, ws, L - 1, O, nb, s0);
  for (int l = Cfg::hidden; l >= 1; --l) detail::mlp_backward_layer<Cfg, W>(blk, p, hs, gs, ws, l, W, nb, s0);

  // layer 0: gs holds d(loss)/d(pre-activation of layer 0), W rows
  if (float* db = p.db[0]; db != nullptr)
    blk.for_each(W, [&](int o) {
      float sum = 0.0f;
      for (int s = 0; s < nb; ++s) sum += gs[s * LDG + o];
      atomic_add(db + o, sum);
    });
  if (float* dz = p.dz[0]; dz != nullptr)
    blk.for_each(nb * W, [&](int i) {
      const int o = i % W, s = i / W;
      dz[o + (s0 + s) * W] = gs[s * LDG + o];
    });
  if (float* dw = p.dw[0]; dw != nullptr && p.dz[0] == nullptr) {  // dW0 += G X^T, X streamed KC features at a time
    using P = gemm_plan<W, KC, BT, Cfg::warps>;
    for (int c = 0; c < Cfg::chunks; ++c) {
      const int k0 = c * KC;
      blk.sync();
      blk.for_each(BT * KC, [&](int i) {
        const int k = i % KC, s = i / KC;
        hs[s * LDH + k] = (s < nb && k0 + k < IN) ? p.x[(s0 + s) * IN + k0 + k] : 0.0f;
      });
      blk.sync();
      auto acc = blk.template regs<P::nt * 4>();
      block_gemm<Cfg::math, P>(blk, acc, col_major{gs, LDG}, row_major{hs, LDH}, false);
      block_epilogue<P>(blk, acc, [&](int o, int k, float v) {
        if (k0 + k < IN) atomic_add(dw + o + static_cast<long long>(k0 + k) * W, v);
      });
    }
  }
  if (float* dx = p.dx; dx != nullptr) {  // dx = W0^T G, KC input features at a time
    using P = gemm_plan<KC, BT, W, Cfg::warps>;
    float const* w0 = p.w[0];
    for (int c = 0; c < Cfg::chunks; ++c) {
      const int k0 = c * KC;
      blk.sync();
      blk.for_each(KC * W, [&](int idx) {
        const int o = idx % W, i = idx / W;
        ws[i + o * (KC + 8)] = k0 + i < IN ? w0[o + static_cast<long long>(k0 + i) * W] : 0.0f;
      });
      blk.sync();
      auto acc = blk.template regs<P::nt * 4>();
      block_gemm<Cfg::math, P>(blk, acc, col_major{ws, KC + 8}, col_major{gs, LDG}, false);
      block_epilogue<P>(blk, acc, [&](int i, int s, float v) {
        if (s < nb && k0 + i < IN) dx[(k0 + i) + (s0 + s) * IN] = v;
      });
    }
  }
}

// ---- the host emulation: every tile of the batch, one after another -------------------------------
template <class Cfg>
void emulate_mlp_forward(mlp_args const& p, bool training) {
  tile::emulated_block blk(Cfg::warps);
  std::vector<float> smem(static_cast<std::size_t>(Cfg::forward_smem_bytes / 4));
  for (long long s0 = 0; s0 < p.batch; s0 += Cfg::bt) mlp_forward_tile<Cfg>(blk, p, smem.data(), s0, training);
}
template <class Cfg>
void emulate_mlp_backward(mlp_args const& p) {
  tile::emulated_block blk(Cfg::warps);
  std::vector<float> smem(static_cast<std::size_t>(Cfg::backward_smem_bytes / 4));
  for (long long s0 = 0; s0 < p.batch; s0 += Cfg::bt) mlp_backward_tile<Cfg>(blk, p, smem.data(), s0);
}

}  // namespace nitro::cuda
