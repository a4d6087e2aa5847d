// src/runtime.cpp — nitro::runtime, the optional compiled part (nitro/core/runtime.hpp): what every
// trainer would otherwise compile for itself, compiled once with the flags of the project that
// builds it (its -march decides which GEMM kernel runs, and gemm_kernel_name() says which).
#define NITRO_RUNTIME_BUILD
#include "nitro/data/fashion_mnist.hpp"
#include "nitro/data/idx.hpp"
#include "nitro/dist/replicas.hpp"
#include "nitro/dist/shard.hpp"
#include "nitro/knobs/records.hpp"
#include "nitro/nn/reducers.hpp"
#include "nitro/record/atomic_file.hpp"
#include "nitro/record/checkpoint.hpp"
#include "nitro/record/checkpoint_file.hpp"
#include "nitro/record/checkpoint_index.hpp"
#include "nitro/record/history.hpp"
#include "nitro/record/loggers/console.hpp"
#include "nitro/record/loggers/csv.hpp"
#include "nitro/record/loggers/defaults.hpp"
#include "nitro/record/loggers/jsonl.hpp"
#include "nitro/record/loggers/tensorboard.hpp"
#include "nitro/record/run_reference.hpp"
#include "nitro/record/safetensors.hpp"
#include "nitro/record/safetensors_writer.hpp"
#include "nitro/tensor/cpu/gemm.hpp"
#include "nitro/tensor/cpu/thread_pool.hpp"
#include "nitro/train/divergence.hpp"
#include "nitro/train/early_stop.hpp"
#include "nitro/train/ema.hpp"
#include "nitro/train/run_control.hpp"
#include "nitro/train/show.hpp"

namespace nitro::cpu {
template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, float const*, std::int64_t, float const*,
                          std::int64_t, float, float*, std::int64_t);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, double const*, std::int64_t,
                           double const*, std::int64_t, double, double*, std::int64_t);
}  // namespace nitro::cpu
