// nitro::device = nitro::cuda_device{} where no CUDA backend was compiled in (g++, no nitro/cuda.cuh):
// the coded error names the choice and how to build the trainer for the GPU.
// EXPECT: E-CUDA-106
// EXPECT: nitro::device = nitro::cuda_device{}
// EXPECT: LANGUAGE CUDA
#include <nitro/tensor/backend.hpp>
#include <nitro/train/keywords.hpp>

struct Exp {};

int main() {
#ifdef NITRO_COMPILE_FAIL
  nitro::run_keywords kw(Exp{}, nitro::device = nitro::cuda_device{});
  auto backend = nitro::backend_of<nitro::cuda_device>::make(kw.device.value);
  (void)backend;
  return 0;
#else
  nitro::run_keywords kw(Exp{}, nitro::device = nitro::cpu_backend{});
  auto backend = nitro::backend_of<nitro::cpu_backend>::make(kw.device.value);
  return backend.device == nitro::device_kind::cpu ? 0 : 1;
#endif
}
