// nitro/tensor/cpu/conv.hpp — the CPU's 2-D convolution, forward and backward: the kernels behind
// device_ops::conv2d (tensor/convolution.hpp says what the extents are).
//
//   cpu::conv2d<float>(window, x, w, bias, nitro::epilogue_act::relu, z, y, scratch);
//   cpu::conv2d_backward<float>(window, act, x, w, yz, gy, gx, gw, gb, scratch);   // += into each
//
// Forward, per sample: im2col (unrolled for 3x3 and 5x5 kernels at stride 1 or 2; a stride-1 window
// with "same" padding copies each tap's plane as one run) into scratch [P, K*K*InC] (P = output pixels), one product with the
// weight seen as [K*K*InC, OutC] accumulated onto the bias straight into the sample's [P, OutC]
// block of the WHCN output, then the activation in place. Backward, per sample: the activation's
// derivative, dW += col^T g (col recomputed, not kept), dcol = g W^T, col2im into dx. Samples run
// in fixed chunks (by the batch size alone) on the thread pool's workers; the weight's and bias's
// gradients are summed per chunk, then in chunk order, so the bits do not depend on the thread
// count. The caller's scratch (conv2d_scratch values) holds every chunk's buffers.
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/tensor/convolution.hpp"
#include "nitro/tensor/cpu/elementwise.hpp"  // detail::flat
#include "nitro/tensor/cpu/gemm.hpp"
#include "nitro/tensor/cpu/thread_pool.hpp"
#include "nitro/tensor/epilogue.hpp"
#include "nitro/tensor/ops/epilogue.hpp"

#include <algorithm>  // min, fill_n
#include <cstdint>    // int64_t
#include <cstring>    // memset

namespace nitro::cpu {

namespace detail {

// The output columns ox in [lo, hi) whose input column ox s - pad + kx lies inside [0, w).
inline void conv_valid_range(conv_window const& p, std::int64_t kx, std::int64_t& lo, std::int64_t& hi) noexcept {
  const std::int64_t before = p.pad - kx;  // ox s >= before
  lo = before > 0 ? (before + p.stride - 1) / p.stride : 0;
  const std::int64_t last = p.w - 1 + p.pad - kx;  // ox s <= last
  hi = last < 0 ? 0 : std::min<std::int64_t>(p.ow, last / p.stride + 1);
  lo = std::min(lo, hi);
}

// One image [w, h, in_c] -> col [P, K*K*in_c]; out-of-image taps read zero. Kc, Sc > 0: the
// kernel's side and stride known at compile time (the common ones); 0: read from p.
template <std::int64_t Kc, std::int64_t Sc, class T>
void im2col(conv_window const& p, T const* x, T* col) {
  const std::int64_t P = p.out_plane(), K = Kc ? Kc : p.k, S = Sc ? Sc : p.stride;
  for (std::int64_t c = 0; c < p.in_c; ++c)
    for (std::int64_t ky = 0; ky < K; ++ky)
      for (std::int64_t kx = 0; kx < K; ++kx) {
        T* dst = col + P * (kx + K * (ky + K * c));
        std::int64_t lo, hi;
        conv_valid_range(p, kx, lo, hi);
        const std::int64_t off = kx - p.pad;
        if (S == 1 && p.ow == p.w && lo < hi) {
          // Stride 1, as wide as the image ("same" padding): output pixel f = ow oy + ox reads input
          // pixel f + w (ky - pad) + off of the plane, so the tap's rows inside the image are one run
          // of it (copied a row of 14 or 28 floats at a time, the per-row work was most of the cost);
          // the columns outside [lo, hi), which that run fills from the neighbouring row, are then
          // set to the padding's zeros.
          const std::int64_t y0 = std::clamp<std::int64_t>(p.pad - ky, 0, p.oh), y1 = std::clamp<std::int64_t>(p.h + p.pad - ky, y0, p.oh);
          std::fill_n(dst, p.ow * y0, T(0));
          if (y0 < y1) {
            const std::int64_t first = p.ow * y0 + lo, last = p.ow * (y1 - 1) + hi;
            const std::int64_t from = p.w * (p.h * c + ky - p.pad) + off + first;  // >= the plane's start: y0 >= pad - ky, lo >= -off
            std::copy(x + from, x + from + (last - first), dst + first);
            // a column at a time (at most pad of them a side): a call to memset a row for one float
            // cost more than the run's copy
            for (std::int64_t ox = 0; ox < lo; ++ox)
              for (std::int64_t oy = y0; oy < y1; ++oy) dst[ox + p.ow * oy] = T(0);
            for (std::int64_t ox = hi; ox < p.ow; ++ox)
              for (std::int64_t oy = y0; oy < y1; ++oy) dst[ox + p.ow * oy] = T(0);
          }
          std::fill(dst + p.ow * y1, dst + P, T(0));
          continue;
        }
        for (std::int64_t oy = 0; oy < p.oh; ++oy) {
          T* d = dst + p.ow * oy;
          const std::int64_t iy = oy * S - p.pad + ky;
          if (iy < 0 || iy >= p.h) {
            std::fill_n(d, p.ow, T(0));
            continue;
          }
          T const* row = x + p.w * (iy + p.h * c);
          for (std::int64_t ox = 0; ox < lo; ++ox) d[ox] = T(0);
          if (S == 1)
            for (std::int64_t ox = lo; ox < hi; ++ox) d[ox] = row[ox + off];
          else
            for (std::int64_t ox = lo; ox < hi; ++ox) d[ox] = row[ox * S + off];
          for (std::int64_t ox = hi; ox < p.ow; ++ox) d[ox] = T(0);
        }
      }
}

// The adjoint of im2col: dx[w, h, in_c] += the taps of dcol that came from each pixel.
template <std::int64_t Kc, std::int64_t Sc, class T>
void col2im(conv_window const& p, T const* dcol, T* dx) {
  const std::int64_t P = p.out_plane(), K = Kc ? Kc : p.k, S = Sc ? Sc : p.stride;
  for (std::int64_t c = 0; c < p.in_c; ++c)
    for (std::int64_t ky = 0; ky < K; ++ky)
      for (std::int64_t kx = 0; kx < K; ++kx) {
        T const* src = dcol + P * (kx + K * (ky + K * c));
        std::int64_t lo, hi;
        conv_valid_range(p, kx, lo, hi);
        const std::int64_t off = kx - p.pad;
        for (std::int64_t oy = 0; oy < p.oh; ++oy) {
          const std::int64_t iy = oy * S - p.pad + ky;
          if (iy < 0 || iy >= p.h) continue;
          T const* d = src + p.ow * oy;
          T* row = dx + p.w * (iy + p.h * c);
          for (std::int64_t ox = lo; ox < hi; ++ox) row[ox * S + off] += d[ox];
        }
      }
}

// g.template operator()<K, S>() with the kernel's side and stride as constants where they are
// common (3 and 5 at stride 1 or 2), else 0, 0.
template <class G>
void with_kernel(conv_window const& p, G&& g) {
  if (p.k == 3 && p.stride == 1) return g.template operator()<3, 1>();
  if (p.k == 3 && p.stride == 2) return g.template operator()<3, 2>();
  if (p.k == 5 && p.stride == 1) return g.template operator()<5, 1>();
  if (p.k == 5 && p.stride == 2) return g.template operator()<5, 2>();
  g.template operator()<0, 0>();
}

}  // namespace detail

// The scratch values conv2d (backward: conv2d_backward) needs for window p.
inline std::int64_t conv2d_scratch(conv_window const& p, bool backward) noexcept {
  const fixed_chunks ch(p.batch);
  const std::int64_t P = p.out_plane(), col = p.direct() ? 0 : ch.count * P * p.rows();
  if (!backward) return col;
  return ch.count * P * p.out_c + col + ch.count * p.rows() * p.out_c + ch.count * p.out_c + 1;
}

template <class T>
void conv2d(conv_window const& p, T const* x, T const* w, T const* bias, epilogue_act act, T* z, T* y, T* scratch) {
  const std::int64_t P = p.out_plane(), kkc = p.rows(), OutC = p.out_c, in_image = p.in_plane() * p.in_c;
  const bool direct = p.direct();
  T* pre = z ? z : y;  // the pre-activation: z when it is kept apart
  const fixed_chunks ch(p.batch);
  detail::with_kernel(p, [&]<std::int64_t Kc, std::int64_t Sc>() {
    run_chunks(ch, 2.0 * double(p.batch) * double(P) * double(kkc) * double(OutC), [&](std::int64_t c) {
      T* col = direct ? nullptr : scratch + c * P * kkc;
      for (std::int64_t b = ch.begin(c); b < ch.end(c); ++b) {
        T const* xb = x + b * in_image;
        if (direct) col = const_cast<T*>(xb);
        else detail::im2col<Kc, Sc>(p, xb, col);
        T* zb = pre + b * P * OutC;
        // the bias first, then the product accumulates onto it: one pass over the output saved
        if (bias)
          for (std::int64_t o = 0; o < OutC; ++o) detail::flat(zb + o * P, P) = bias[o];
        cpu::gemm<T>(false, false, P, OutC, kkc, T(1), col, P, w, kkc, bias ? T(1) : T(0), zb, P);
        if (act != epilogue_act::identity || zb != y + b * P * OutC) {
          T* yb = y + b * P * OutC;
          if (zb != yb) detail::flat(yb, P * OutC) = detail::flat(static_cast<T const*>(zb), P * OutC);
          nitro::detail::with_epilogue(act, [&](auto A) { nitro::detail::epilogue_forward<A.value>(detail::flat(yb, P * OutC)); });
        }
      }
    });
  });
}

template <class T>
void conv2d_backward(conv_window const& p, epilogue_act act, T const* x, T const* w, T const* yz, T const* gy, T* gx, T* gw, T* gb,
                     T* scratch) {
  const std::int64_t P = p.out_plane(), kkc = p.rows(), OutC = p.out_c, in_image = p.in_plane() * p.in_c;
  const bool direct = p.direct(), identity = act == epilogue_act::identity;
  const fixed_chunks ch(p.batch);
  const std::int64_t n_act = ch.count * P * OutC, n_col = direct ? 0 : ch.count * P * kkc, n_dw = ch.count * kkc * OutC;
  T* act_s = scratch;
  T* col_s = act_s + n_act;
  T* dw_s = col_s + n_col;
  T* db_s = dw_s + n_dw;
  std::memset(dw_s, 0, sizeof(T) * static_cast<std::size_t>(n_dw + ch.count * OutC));
  const double flops = 2.0 * double(p.batch) * double(P) * double(kkc) * double(OutC) * (double(gw != nullptr) + double(gx != nullptr));
  detail::with_kernel(p, [&]<std::int64_t Kc, std::int64_t Sc>() {
    run_chunks(ch, flops, [&](std::int64_t c) {
      T* col = col_s + c * P * kkc;
      T* dw = dw_s + c * kkc * OutC;
      T* db = db_s + c * OutC;
      for (std::int64_t b = ch.begin(c); b < ch.end(c); ++b) {
        T const* g = gy + b * P * OutC;
        if (!identity) {  // g = gy act'(.), one output map at a time, summed for the bias
          T* s = act_s + c * P * OutC;
          nitro::detail::with_epilogue(act, [&](auto A) {
            for (std::int64_t o = 0; o < OutC; ++o) {
              const std::int64_t at = b * P * OutC + o * P;
              auto S = detail::flat(s + o * P, P);
              S = detail::flat(gy + at, P);
              nitro::detail::epilogue_backward<A.value>(S, detail::flat(yz + at, P));
              if (gb) db[o] += S.sum();
            }
          });
          g = s;
        } else if (gb) {
          for (std::int64_t o = 0; o < OutC; ++o) db[o] += detail::flat(g + o * P, P).sum();
        }
        T const* xb = x + b * in_image;
        if (gw) {
          T const* cb = xb;
          if (!direct) {
            detail::im2col<Kc, Sc>(p, xb, col);
            cb = col;
          }
          cpu::gemm<T>(true, false, kkc, OutC, P, T(1), cb, P, g, P, T(1), dw, kkc);
        }
        if (gx) {
          if (direct) {  // col2im is the identity: accumulate straight into dx
            cpu::gemm<T>(false, true, P, kkc, OutC, T(1), g, P, w, kkc, T(1), gx + b * in_image, P);
          } else {
            cpu::gemm<T>(false, true, P, kkc, OutC, T(1), g, P, w, kkc, T(0), col, P);
            detail::col2im<Kc, Sc>(p, static_cast<T const*>(col), gx + b * in_image);
          }
        }
      }
    });
  });
  if (gw) {
    auto G = detail::flat(gw, kkc * OutC);
    for (std::int64_t c = 0; c < ch.count; ++c) G += detail::flat(static_cast<T const*>(dw_s + c * kkc * OutC), kkc * OutC);
  }
  if (gb) {
    auto G = detail::flat(gb, OutC);
    for (std::int64_t c = 0; c < ch.count; ++c) G += detail::flat(static_cast<T const*>(db_s + c * OutC), OutC);
  }
}

#if NITRO_RUNTIME_EXTERN
// Compiled once, in nitro::runtime (src/runtime.cpp): every activation for both types.
extern template void conv2d<float>(conv_window const&, float const*, float const*, float const*, epilogue_act, float*, float*, float*);
extern template void conv2d<double>(conv_window const&, double const*, double const*, double const*, epilogue_act, double*, double*,
                                    double*);
extern template void conv2d_backward<float>(conv_window const&, epilogue_act, float const*, float const*, float const*, float const*, float*,
                                            float*, float*, float*);
extern template void conv2d_backward<double>(conv_window const&, epilogue_act, double const*, double const*, double const*, double const*,
                                             double*, double*, double*, double*);
#endif

}  // namespace nitro::cpu
