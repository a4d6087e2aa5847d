// nitro/core/runtime.hpp — nitro's optional compiled part, in the manner of fmt's and spdlog's.
//
//   target_link_libraries(my_trainer PRIVATE nitro::nitro nitro::runtime)   # CMake
//
// nitro is header-only by default. Code that does not depend on an experiment (today: the CPU
// backend's matrix products for float and double, cpu::gemm) can instead be compiled once, into
// the static library nitro::runtime (src/runtime.cpp, built in the user's project with its flags),
// and every translation unit that links it (NITRO_RUNTIME_LIB) declares it `extern` rather than
// compiling it again. NITRO_RUNTIME_BUILD is defined only by src/runtime.cpp, which holds the
// definitions; NITRO_RUNTIME_INLINE is `inline` in header-only use and empty there. A program is
// one or the other: every translation unit of it links nitro::runtime (CMake gives its define to
// each source of a target that links it), or none does.
#pragma once

#if defined(NITRO_RUNTIME_BUILD)
#define NITRO_RUNTIME_INLINE
#else
#define NITRO_RUNTIME_INLINE inline
#endif

// 1 in a translation unit that links nitro::runtime (the compiled part's definitions are elsewhere).
#if defined(NITRO_RUNTIME_LIB) && !defined(NITRO_RUNTIME_BUILD)
#define NITRO_RUNTIME_EXTERN 1
#else
#define NITRO_RUNTIME_EXTERN 0
#endif
