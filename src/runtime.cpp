// src/runtime.cpp — nitro::runtime, the optional compiled part (nitro/core/runtime.hpp): what every
// trainer would otherwise compile for itself, compiled once with the flags of the project that
// builds it (its -march decides which GEMM kernel runs, and gemm_kernel_name() says which).
#define NITRO_RUNTIME_BUILD
#include "nitro/tensor/cpu/gemm.hpp"

namespace nitro::cpu {
template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, float const*, std::int64_t, float const*,
                          std::int64_t, float, float*, std::int64_t);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, double const*, std::int64_t,
                           double const*, std::int64_t, double, double*, std::int64_t);
}  // namespace nitro::cpu
