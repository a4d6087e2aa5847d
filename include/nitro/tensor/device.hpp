// nitro/tensor/device.hpp — where a tensor's memory lives.
#pragma once

#include <string>  // describe

namespace nitro {

enum class device_kind : unsigned char { cpu, cuda };

constexpr char const* to_string(device_kind d) noexcept { return d == device_kind::cpu ? "cpu" : "cuda"; }

// The CUDA backend, chosen by value: `nitro::device = nitro::cuda_device{}` ({.index = 1}: the
// second GPU). The handle builds its nitro::cuda_backend (nitro/cuda.cuh) on that GPU, so a trainer
// that names it is compiled by nvcc; anywhere else the choice is compile error E-CUDA-106
// (tensor/backend.hpp). A value, not the backend itself: a backend owns streams and handles.
struct cuda_device {
  int index = 0;
  std::string describe() const { return "cuda:" + std::to_string(index); }  // the `device` fact in the records
};

}  // namespace nitro
