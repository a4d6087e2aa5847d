// nitro/tensor/cuda/tile.hpp — the tile math of the fused kernels: warp tiles, their register
// layouts, and a block-wide GEMM over shared memory, written once for the GPU and for the CPU.
//
// A tile product is the tensor-core instruction mma.sync.m16n8k8 (TF32 inputs, FP32 accumulation)
// or, on the FP32 path, the same 16x8 tile computed with FMAs in the same register layout. Code is
// written against two small policies:
//   a warp policy   lanes(f) runs f(lane) for the lanes it stands for; mma_tf32(...) multiplies a
//                   16x8x8 tile from the lanes' registers
//   a block policy  for_each(n, f), warps(f), sync(), regs<N>() (registers that outlive a sync)
// On the device (nvcc) the policies are one thread: device_block / device_warp. On the host,
// emulated_block runs every warp and lane in turn and emulates the tensor-core instruction, so the
// CPU tests execute the kernels' own tile programs and compare them with the Eigen backend. Because
// each phase between two sync() calls runs to completion before the next starts, the emulation has
// the same ordering a barrier gives.
//
// Layouts (PTX ISA, mma.m16n8k8 .tf32; g = lane / 4, t = lane % 4):
//   A (16x8, row x k)  a0 (g, t)   a1 (g+8, t)   a2 (g, t+4)   a3 (g+8, t+4)
//   B (8x8,  k x col)  b0 (t, g)   b1 (t+4, g)
//   C (16x8, row x col) c0 (g, 2t) c1 (g, 2t+1)  c2 (g+8, 2t)  c3 (g+8, 2t+1)
#pragma once

#include "nitro/tensor/cuda/hd.hpp"
#include "nitro/tensor/cuda/pointwise.hpp"

#include <cstddef>  // size_t
#include <vector>   // the emulator's registers

namespace nitro::cuda::tile {

inline constexpr int warp_size = 32;

enum class math : int { fp32 = 0, tf32 = 1 };
constexpr char const* to_string(math m) noexcept { return m == math::fp32 ? "fp32" : "tf32"; }

// ---- register layouts of m16n8k8 ----------------------------------------------------------------
NITRO_HD_INLINE constexpr int a_row(int lane, int i) { return (lane >> 2) + ((i & 1) ? 8 : 0); }
NITRO_HD_INLINE constexpr int a_col(int lane, int i) { return (lane & 3) + ((i & 2) ? 4 : 0); }
NITRO_HD_INLINE constexpr int b_row(int lane, int i) { return (lane & 3) + (i ? 4 : 0); }
NITRO_HD_INLINE constexpr int b_col(int lane, int) { return lane >> 2; }
NITRO_HD_INLINE constexpr int c_row(int lane, int i) { return (lane >> 2) + ((i & 2) ? 8 : 0); }
NITRO_HD_INLINE constexpr int c_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

// ---- views of memory -----------------------------------------------------------------------------
// element (r, c) of a column-major matrix at p[r + c * ld], of a row-major one at p[c + r * ld]
struct col_major {
  float* p;
  int ld;
  NITRO_HD_INLINE float& operator()(int r, int c) const { return p[r + c * ld]; }
};
struct row_major {
  float* p;
  int ld;
  NITRO_HD_INLINE float& operator()(int r, int c) const { return p[c + r * ld]; }
};

// ---- registers -----------------------------------------------------------------------------------
// One lane's N registers (the device: each thread holds its own lane's).
template <int N>
struct lane_regs {
  float v[N];
  NITRO_HD_INLINE float* at(int) { return v; }
  NITRO_HD_INLINE lane_regs& warp(int) { return *this; }
};
// All 32 lanes' N registers of one warp (the host emulation).
template <int N>
struct warp_regs {
  float v[warp_size][N];
  float* at(int lane) { return v[lane]; }
};

// One 16x8x8 TF32 product-accumulate, c += a * b, from the lanes' registers as laid out above.
// Device: the instruction. The operands must already be rounded to TF32 (round_tf32).
#if defined(__CUDACC__)
__device__ __forceinline__ void mma_tf32_lane(float* c, float const* a, float const* b) {
#if NITRO_DEVICE_PASS
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])), "r"(__float_as_uint(a[3])),
        "r"(__float_as_uint(b[0])), "r"(__float_as_uint(b[1])));
#else
  // before sm_80 there is no TF32 tensor-core instruction: the same tile from shuffles and FMAs
  // (every lane shuffles every register, then keeps the one its element lives in)
  const int lane = threadIdx.x & 31;
  float r[4] = {c[0], c[1], c[2], c[3]};
  for (int k = 0; k < 8; ++k) {
    for (int i = 0; i < 4; ++i) {
      const int row = c_row(lane, i), col = c_col(lane, i);
      const int src_a = (row & 7) * 4 + (k & 3), src_b = col * 4 + (k & 3);
      const float x0 = __shfl_sync(0xffffffffu, a[0], src_a), x1 = __shfl_sync(0xffffffffu, a[1], src_a);
      const float x2 = __shfl_sync(0xffffffffu, a[2], src_a), x3 = __shfl_sync(0xffffffffu, a[3], src_a);
      const float y0 = __shfl_sync(0xffffffffu, b[0], src_b), y1 = __shfl_sync(0xffffffffu, b[1], src_b);
      const float av = row >= 8 ? (k >= 4 ? x3 : x1) : (k >= 4 ? x2 : x0);
      r[i] += av * (k >= 4 ? y1 : y0);
    }
  }
  c[0] = r[0]; c[1] = r[1]; c[2] = r[2]; c[3] = r[3];
#endif
#endif
}
#endif

// ---- the device policies (one thread of a block) -------------------------------------------------
#if defined(__CUDACC__)
struct device_warp {
  int lane;
  template <int N> using regs = lane_regs<N>;
  template <class F>
  __device__ __forceinline__ void lanes(F&& f) const { f(lane); }
  template <int NC, int NA, int NB>
  __device__ __forceinline__ void mma_tf32(lane_regs<NC>& c, int ci, lane_regs<NA>& a, int ai, lane_regs<NB>& b, int bi) const {
    mma_tf32_lane(c.v + ci, a.v + ai, b.v + bi);
  }
};

struct device_block {
  int tid, nthreads;
  template <int N> using regs_t = lane_regs<N>;
  template <int N>
  __device__ __forceinline__ lane_regs<N> regs() const { return lane_regs<N>{}; }
  template <class F>
  __device__ __forceinline__ void for_each(int n, F&& f) const {
    for (int i = tid; i < n; i += nthreads) f(i);
  }
  template <class F>
  __device__ __forceinline__ void warps(F&& f) const { f(tid >> 5, device_warp{tid & 31}); }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
};
#endif

// ---- the host policies (a whole block, one warp and lane after another) ---------------------------
struct emulated_warp {
  template <int N> using regs = warp_regs<N>;
  template <class F>
  void lanes(F&& f) const {
    for (int lane = 0; lane < warp_size; ++lane) f(lane);
  }
  // c += a * b over the tile, operands gathered from the lanes as the instruction reads them.
  template <int NC, int NA, int NB>
  void mma_tf32(warp_regs<NC>& c, int ci, warp_regs<NA>& a, int ai, warp_regs<NB>& b, int bi) const {
    float A[16][8], B[8][8];
    for (int lane = 0; lane < warp_size; ++lane) {
      for (int i = 0; i < 4; ++i) A[a_row(lane, i)][a_col(lane, i)] = a.v[lane][ai + i];
      for (int i = 0; i < 2; ++i) B[b_row(lane, i)][b_col(lane, i)] = b.v[lane][bi + i];
    }
    for (int lane = 0; lane < warp_size; ++lane)
      for (int i = 0; i < 4; ++i) {
        const int r = c_row(lane, i), col = c_col(lane, i);
        float s = c.v[lane][ci + i];
        for (int k = 0; k < 8; ++k) s += A[r][k] * B[k][col];
        c.v[lane][ci + i] = s;
      }
  }
};

class emulated_block {
 public:
  explicit emulated_block(int warps) : m_warps(warps) {}
  int warp_count() const noexcept { return m_warps; }

  template <int N>
  struct regs_t {
    std::vector<warp_regs<N>> w;
    warp_regs<N>& warp(int i) { return w[static_cast<std::size_t>(i)]; }
  };
  template <int N>
  regs_t<N> regs() const { return regs_t<N>{std::vector<warp_regs<N>>(static_cast<std::size_t>(m_warps))}; }
  template <class F>
  void for_each(int n, F&& f) const {
    for (int i = 0; i < n; ++i) f(i);
  }
  template <class F>
  void warps(F&& f) const {
    for (int w = 0; w < m_warps; ++w) f(w, emulated_warp{});
  }
  void sync() const {}

 private:
  int m_warps;
};

// Adds v to *p: an atomic on the device (blocks run at once), a plain add in the emulation.
NITRO_HD_INLINE void atomic_add(float* p, float v) {
#if NITRO_DEVICE_PASS
  atomicAdd(p, v);
#else
  *p += v;
#endif
}

// ---- how a block splits an M x N product among its warps ------------------------------------------
// M is cut into 16-row tiles, N into 8-column tiles. Each active warp owns one row tile and `nt`
// consecutive column tiles, so it loads its A fragment once per k-step for all of them.
constexpr int largest_divisor_at_most(int n, int cap) {
  int best = 1;
  for (int d = 1; d <= n && d <= cap; ++d)
    if (n % d == 0) best = d;
  return best;
}

template <int M, int N, int K, int Warps>
struct gemm_plan {
  static_assert(M % 16 == 0 && N % 8 == 0 && K % 8 == 0, "nitro invariant: nitro::cuda::tile::gemm_plan tiles M, N, K in multiples of 16, 8, 8 (mlp_config pads them)");
  static_assert(M / 16 <= Warps, "nitro invariant: nitro::cuda::tile::gemm_plan has a warp for every 16-row tile");
  static constexpr int m = M, n = N, k = K;
  static constexpr int tiles_m = M / 16, tiles_n = N / 8;
  static constexpr int wn = largest_divisor_at_most(tiles_n, Warps / tiles_m);  // warps along N
  static constexpr int nt = tiles_n / wn;                                        // column tiles per warp
  static constexpr int active = tiles_m * wn;                                    // warps with work
  NITRO_HD_INLINE static constexpr int row0(int w) { return (w % tiles_m) * 16; }
  NITRO_HD_INLINE static constexpr int col0(int w) { return (w / tiles_m) * nt * 8; }
};

// Zeroes a warp's accumulators.
template <int N, class Warp, class Regs>
NITRO_HD_INLINE void zero(Warp const& w, Regs& acc) {
  w.lanes([&](int lane) {
    float* c = acc.at(lane);
    NITRO_UNROLL
    for (int i = 0; i < N; ++i) c[i] = 0.0f;
  });
}

// acc (NT tiles of 16x8, 4 registers each per lane) += A[r0 .. r0+16, 0 .. K) * B[0 .. K, c0 .. c0+8 NT).
// A and B are views with operator()(row, col); the k loop stays rolled, the tile loops unroll.
template <math Math, int NT, int K, class Warp, class Regs, class AV, class BV>
NITRO_HD_INLINE void warp_gemm(Warp const& w, Regs& acc, AV const& a, BV const& b, int r0, int c0) {
  if constexpr (Math == math::tf32) {
    typename Warp::template regs<4> af;
    typename Warp::template regs<2 * NT> bf;
    for (int k0 = 0; k0 < K; k0 += 8) {
      w.lanes([&](int lane) {
        float* ar = af.at(lane);
        NITRO_UNROLL
        for (int i = 0; i < 4; ++i) ar[i] = round_tf32(a(r0 + a_row(lane, i), k0 + a_col(lane, i)));
        float* br = bf.at(lane);
        NITRO_UNROLL
        for (int j = 0; j < NT; ++j) {
          NITRO_UNROLL
          for (int i = 0; i < 2; ++i) br[2 * j + i] = round_tf32(b(k0 + b_row(lane, i), c0 + 8 * j + b_col(lane, i)));
        }
      });
      NITRO_UNROLL
      for (int j = 0; j < NT; ++j) w.mma_tf32(acc, 4 * j, af, 0, bf, 2 * j);
    }
  } else {
    w.lanes([&](int lane) {
      float* c = acc.at(lane);
      const int ra = r0 + (lane >> 2), cb = c0 + 2 * (lane & 3);
      for (int k = 0; k < K; ++k) {
        const float a0 = a(ra, k), a1 = a(ra + 8, k);
        NITRO_UNROLL
        for (int j = 0; j < NT; ++j) {
          const float b0 = b(k, cb + 8 * j), b1 = b(k, cb + 8 * j + 1);
          c[4 * j + 0] += a0 * b0;
          c[4 * j + 1] += a0 * b1;
          c[4 * j + 2] += a1 * b0;
          c[4 * j + 3] += a1 * b1;
        }
      }
    });
  }
}

// Visits a warp's accumulators with their place in the block's product: f(row, col, value&).
template <int NT, class Warp, class Regs, class F>
NITRO_HD_INLINE void for_each_acc(Warp const& w, Regs& acc, int r0, int c0, F&& f) {
  w.lanes([&](int lane) {
    float* c = acc.at(lane);
    NITRO_UNROLL
    for (int j = 0; j < NT; ++j) {
      NITRO_UNROLL
      for (int i = 0; i < 4; ++i) f(r0 + c_row(lane, i), c0 + 8 * j + c_col(lane, i), c[4 * j + i]);
    }
  });
}

// The whole block computes C = A B (M x N, inner K) into its warps' registers `acc` (one regs<4 nt>
// per warp, from blk.regs<Plan::nt * 4>()), accumulating when `accumulate`.
template <math Math, class Plan, class Block, class Acc, class AV, class BV>
NITRO_HD_INLINE void block_gemm(Block const& blk, Acc& acc, AV const& a, BV const& b, bool accumulate) {
  blk.warps([&](int w, auto const& warp) {
    if (w >= Plan::active) return;
    auto& r = acc.warp(w);
    if (!accumulate) zero<Plan::nt * 4>(warp, r);
    warp_gemm<Math, Plan::nt, Plan::k>(warp, r, a, b, Plan::row0(w), Plan::col0(w));
  });
}

// Visits every accumulator of the block's product: f(row, col, value).
template <class Plan, class Block, class Acc, class F>
NITRO_HD_INLINE void block_epilogue(Block const& blk, Acc& acc, F&& f) {
  blk.warps([&](int w, auto const& warp) {
    if (w >= Plan::active) return;
    for_each_acc<Plan::nt>(warp, acc.warp(w), Plan::row0(w), Plan::col0(w), f);
  });
}

}  // namespace nitro::cuda::tile
