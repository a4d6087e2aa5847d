// nitro/tensor/device.hpp — where a tensor's memory lives.
#pragma once

namespace nitro {

enum class device_kind : unsigned char { cpu, cuda };

constexpr char const* to_string(device_kind d) noexcept { return d == device_kind::cpu ? "cpu" : "cuda"; }

}  // namespace nitro
