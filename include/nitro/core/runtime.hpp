// nitro/core/runtime.hpp — nitro's optional compiled part, in the manner of fmt's and spdlog's.
//
//   target_link_libraries(my_trainer PRIVATE nitro::nitro nitro::runtime)   # CMake
//
// nitro is header-only by default. Code that does not depend on an experiment can instead be
// compiled once, into the static library nitro::runtime (src/runtime.cpp, built in the user's
// project with its flags), and every translation unit that links it (NITRO_RUNTIME_LIB) only
// declares it rather than compiling it again: the CPU backend's matrix products for float and
// double (cpu::gemm) and its thread pool; the records (atomic files, safetensors reading and
// writing, checkpoints, their index, notes and averaging, the run table, run folders, manifest and
// status JSON, the weights grammar and its resolution, finding runs); the loggers (console, CSV,
// JSONL, TensorBoard); the run's control (early stopping, divergence, EMA, scheduled values); the
// IDX reader, Fashion-MNIST, the data sets' errors and the loader's prefetch ring; the metrics
// accumulator and the collectives of metrics over ranks; the command line (arguments, help,
// commands, reports, knob values, selections, slugs, sweep points); the handle's description text
// (show_text) and the distributed checks that are not templates; and, declared `extern template`,
// logitcrossentropy and the initialisers for float.
//
// NITRO_RUNTIME_BUILD is defined only by src/runtime.cpp, which holds the definitions;
// NITRO_RUNTIME_INLINE is `inline` in header-only use and empty where the runtime is linked (its
// declarations name the library's one definition). A program is one or the other: every
// translation unit of it links nitro::runtime (CMake gives its define to each source of a target
// that links it), or none does. nitro_precompile (cmake/nitroPrecompile.cmake) adds a precompiled
// <nitro/main.hpp> for the trainers that link the runtime (docs/compile-time.md).
//
// A header with such functions declares them where they belong and keeps their definitions in one
// block at its end, under `#if !NITRO_RUNTIME_EXTERN`, with the includes only the definitions need:
// a translation unit that links the runtime neither compiles nor parses them.
#pragma once

#if defined(NITRO_RUNTIME_BUILD) || defined(NITRO_RUNTIME_LIB)
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
