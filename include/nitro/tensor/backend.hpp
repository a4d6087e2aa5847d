// nitro/tensor/backend.hpp — what the trainer asks of the machine that runs a step.
//
// The trainer moves batch fields to the device, and nothing else crosses: `to_device` is the one
// door, and it counts what passes through it (by field name and bytes) so tests and `show` can
// see that a field no hook declares never moved. The CPU backend's device memory is host memory:
// its to_device hands back the same view. A CUDA backend copies through pinned buffers.
#pragma once

#include "nitro/tensor/tensor.hpp"

#include <cstdint>      // int64_t
#include <functional>   // less<>: lookups by string_view
#include <map>          // transfer counts
#include <string>       // field names
#include <string_view>  // field names

namespace nitro {

struct transfer_count {
  std::int64_t transfers = 0;
  std::int64_t bytes = 0;
};

class cpu_backend {
 public:
  static constexpr device_kind device = device_kind::cpu;
  static constexpr char const* name() noexcept { return "cpu (Eigen)"; }

  template <class T>
  basic_tensor<T> to_device(std::string_view field, basic_tensor<T> const& host) {
    auto it = m_counts.find(field);
    if (it == m_counts.end()) it = m_counts.emplace(std::string(field), transfer_count{}).first;
    it->second.transfers += 1;
    it->second.bytes += host.numel() * static_cast<std::int64_t>(sizeof(T));
    return host;
  }

  std::map<std::string, transfer_count, std::less<>> const& transfers() const noexcept { return m_counts; }
  transfer_count transfers_of(std::string_view field) const {
    auto it = m_counts.find(field);
    return it == m_counts.end() ? transfer_count{} : it->second;
  }
  void reset_counts() { m_counts.clear(); }

 private:
  std::map<std::string, transfer_count, std::less<>> m_counts;
};

}  // namespace nitro
