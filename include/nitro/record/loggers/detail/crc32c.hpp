// nitro/record/loggers/detail/crc32c.hpp — CRC-32C (Castagnoli), as TFRecord framing uses it.
//
// The reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF; crc32c("123456789")
// is 0xE3069283. masked_crc32c is TFRecord's masking: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
#pragma once

#include <array>    // the table
#include <cstddef>  // size_t
#include <cstdint>  // uint32_t

namespace nitro::detail {

inline constexpr std::array<std::uint32_t, 256> crc32c_table = [] {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}();

inline std::uint32_t crc32c(void const* data, std::size_t n, std::uint32_t crc = 0) noexcept {
  auto const* p = static_cast<unsigned char const*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) crc = crc32c_table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

inline std::uint32_t masked_crc32c(void const* data, std::size_t n) noexcept {
  const std::uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

}  // namespace nitro::detail
