// src/runtime.cpp — nitro::runtime, the optional compiled part (nitro/core/runtime.hpp): what every
// trainer would otherwise compile for itself, compiled once with the flags of the project that
// builds it (every GEMM kernel is compiled whatever its -march; the CPU picks one at run time, and
// gemm_kernel_name() says which).
#define NITRO_RUNTIME_BUILD
#include "nitro/cli/args.hpp"
#include "nitro/cli/commands.hpp"
#include "nitro/cli/context.hpp"
#include "nitro/cli/main.hpp"
#include "nitro/cli/model_text.hpp"
#include "nitro/cli/report.hpp"
#include "nitro/cli/table.hpp"
#include "nitro/cli/tar.hpp"
#include "nitro/data/dataset.hpp"
#include "nitro/data/fashion_mnist.hpp"
#include "nitro/data/idx.hpp"
#include "nitro/data/loader.hpp"
#include "nitro/data/text.hpp"
#include "nitro/dist/metrics.hpp"
#include "nitro/dist/replicas.hpp"
#include "nitro/dist/shard.hpp"
#include "nitro/knobs/detail/did_you_mean.hpp"
#include "nitro/knobs/knob_value.hpp"
#include "nitro/knobs/records.hpp"
#include "nitro/knobs/selection.hpp"
#include "nitro/knobs/slug.hpp"
#include "nitro/knobs/sweep_points.hpp"
#include "nitro/nn/init.hpp"
#include "nitro/nn/losses.hpp"
#include "nitro/nn/metrics.hpp"
#include "nitro/nn/reducers.hpp"
#include "nitro/record/atomic_file.hpp"
#include "nitro/record/checkpoint.hpp"
#include "nitro/record/checkpoint_file.hpp"
#include "nitro/record/run_lock.hpp"
#include "nitro/record/checkpoint_index.hpp"
#include "nitro/record/history.hpp"
#include "nitro/record/loggers/console.hpp"
#include "nitro/record/loggers/csv.hpp"
#include "nitro/record/loggers/defaults.hpp"
#include "nitro/record/loggers/jsonl.hpp"
#include "nitro/record/loggers/tensorboard.hpp"
#include "nitro/record/record_file.hpp"
#include "nitro/record/run_reference.hpp"
#include "nitro/record/safetensors.hpp"
#include "nitro/record/safetensors_writer.hpp"
#include "nitro/record/weights_ref.hpp"
#include "nitro/record/weights_resolve.hpp"
#include "nitro/tensor/cpu/attention.hpp"
#include "nitro/tensor/cpu/backend.hpp"
#include "nitro/tensor/cpu/gemm.hpp"
#include "nitro/tensor/cpu/thread_pool.hpp"
#include "nitro/train/divergence.hpp"
#include "nitro/train/early_stop.hpp"
#include "nitro/train/ema.hpp"
#include "nitro/train/run_control.hpp"
#include "nitro/train/show.hpp"

namespace nitro::cpu {
template void causal_attention<float>(std::int64_t, std::int64_t, std::int64_t, std::int64_t, float const*, float*, float*);
template void causal_attention<double>(std::int64_t, std::int64_t, std::int64_t, std::int64_t, double const*, double*, double*);
template void causal_attention_backward<float>(std::int64_t, std::int64_t, std::int64_t, std::int64_t, float const*, float const*,
                                               float const*, float const*, float*);
template void causal_attention_backward<double>(std::int64_t, std::int64_t, std::int64_t, std::int64_t, double const*, double const*,
                                                double const*, double const*, double*);
template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, float const*, std::int64_t, float const*,
                          std::int64_t, float, float*, std::int64_t);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, double const*, std::int64_t,
                           double const*, std::int64_t, double, double*, std::int64_t);
template void detail::gemm_epilogue<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float const*, std::int64_t, float const*,
                                           std::int64_t, float const*, epilogue_act, float*, float*, std::int64_t);
template void detail::gemm_epilogue<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double const*, std::int64_t,
                                            double const*, std::int64_t, double const*, epilogue_act, double*, double*, std::int64_t);
template void detail::epilogue_backward<float>(epilogue_act, std::int64_t, std::int64_t, float const*, float const*, float*, float*);
template void detail::epilogue_backward<double>(epilogue_act, std::int64_t, std::int64_t, double const*, double const*, double*, double*);
template void detail::copy<float>(std::int64_t, std::int64_t, float const*, std::int64_t, float*, std::int64_t, bool);
template void detail::copy<double>(std::int64_t, std::int64_t, double const*, std::int64_t, double*, std::int64_t, bool);
template void detail::transpose<float>(std::int64_t, std::int64_t, float const*, float*, bool);
template void detail::transpose<double>(std::int64_t, std::int64_t, double const*, double*, bool);
template void conv2d<float>(conv_window const&, float const*, float const*, float const*, epilogue_act, float*, float*, float*);
template void conv2d<double>(conv_window const&, double const*, double const*, double const*, epilogue_act, double*, double*, double*);
template void conv2d_backward<float>(conv_window const&, epilogue_act, float const*, float const*, float const*, float const*, float*, float*,
                                     float*, float*);
template void conv2d_backward<double>(conv_window const&, epilogue_act, double const*, double const*, double const*, double const*, double*,
                                      double*, double*, double*);
template void pool2d<float>(pool_kind, pool_window const&, float const*, float*, std::uint32_t*);
template void pool2d<double>(pool_kind, pool_window const&, double const*, double*, std::uint32_t*);
template void pool2d_backward<float>(pool_kind, pool_window const&, float const*, std::uint32_t const*, float*);
template void pool2d_backward<double>(pool_kind, pool_window const&, double const*, std::uint32_t const*, double*);
#define NITRO_DETAIL_KERNELS(T)                                                                          \
  template void map<T>(map_op, std::int64_t, T, T, T const*, T*);                                        \
  template void map_backward<T>(map_op, std::int64_t, T, T, T const*, T const*, T const*, T*);           \
  template void binary<T>(binop, broadcast_plan const&, T const*, T const*, T*);                         \
  template void binary_backward<T>(binop, broadcast_plan const&, T const*, T const*, T const*, T*, T*);  \
  template void reduce<T>(reduce_op, reduction, T const*, T*);                                           \
  template void reduce_backward<T>(reduce_op, reduction, T const*, T const*, T const*, T*);              \
  template void softmax<T>(bool, std::int64_t, std::int64_t, T const*, T*);                              \
  template void softmax_backward<T>(bool, std::int64_t, std::int64_t, T const*, T const*, T*);               \
  template void cross_entropy<T>(std::int64_t, std::int64_t, T const*, T const*, bool, T, T*, T*);          \
  template void cross_entropy_backward<T>(std::int64_t, std::int64_t, T const*, T const*, bool, T, T const*, T*); \
  template void squared_error<T>(std::int64_t, T const*, T const*, T*);                                     \
  template void squared_error_backward<T>(std::int64_t, T const*, T const*, T const*, T*, T*);              \
  template void binary_cross_entropy<T>(std::int64_t, T const*, T const*, T*);                              \
  template void binary_cross_entropy_backward<T>(std::int64_t, T const*, T const*, T const*, T*, T*);              \
  template void classification_counts<T>(std::int64_t, std::int64_t, T const*, T const*, bool, T*, T*);                 \
  template void layer_norm<T>(std::int64_t, std::int64_t, double, T const*, T const*, T const*, T*, T*);                  \
  template void layer_norm_backward<T>(std::int64_t, std::int64_t, T const*, T const*, T const*, T const*, T*, T*, T*);   \
  template void batch_norm<T>(bool, std::int64_t, std::int64_t, std::int64_t, double, double, T const*, T const*, T const*, \
                              T const*, T const*, T*, T*, T*, T*);                                                        \
  template void batch_norm_backward<T>(bool, std::int64_t, std::int64_t, std::int64_t, T const*, T const*, T const*, T const*, \
                                       T*, T*, T*);
NITRO_DETAIL_KERNELS(float)
NITRO_DETAIL_KERNELS(double)
#undef NITRO_DETAIL_KERNELS
}  // namespace nitro::cpu

// the stock instantiations the headers declare extern where the runtime is linked
namespace nitro::nn {
template basic_tensor<float> logitcrossentropy_at<float>(basic_tensor<float> const&, basic_tensor<float> const&, float);
}  // namespace nitro::nn
namespace nitro::init {
template void initializer::operator()<float>(basic_tensor<float>&, std::int64_t, std::int64_t, rng&) const;
}  // namespace nitro::init
