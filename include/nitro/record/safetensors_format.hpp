// nitro/record/safetensors_format.hpp — the safetensors format's vocabulary: dtypes, byte order,
// the JSON header's rules, one tensor's entry. Shared by the reader (record/safetensors.hpp) and the
// writer (record/safetensors_writer.hpp).
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/record/atomic_file.hpp"
#include "nitro/tensor/shape.hpp"
#include "nitro/tensor/tensor.hpp"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>    // sort, reverse
#include <bit>          // bit_cast
#include <cstddef>      // size_t, byte
#include <cstdint>      // fixed-width integers
#include <cstdio>       // snprintf
#include <cstring>      // memcpy
#include <filesystem>   // paths
#include <fstream>      // reading
#include <map>          // metadata
#include <optional>     // dtype lookup
#include <set>          // duplicate keys
#include <span>         // tensor bytes
#include <string>       // names
#include <string_view>  // names
#include <type_traits>  // dtype_of
#include <utility>      // move
#include <vector>       // entries

namespace nitro {

// ---- dtypes -------------------------------------------------------------------------------------
enum class st_dtype { BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

constexpr std::string_view to_string(st_dtype d) noexcept {
  switch (d) {
    case st_dtype::BOOL: return "BOOL";
    case st_dtype::U8: return "U8";
    case st_dtype::I8: return "I8";
    case st_dtype::I16: return "I16";
    case st_dtype::U16: return "U16";
    case st_dtype::F16: return "F16";
    case st_dtype::BF16: return "BF16";
    case st_dtype::I32: return "I32";
    case st_dtype::U32: return "U32";
    case st_dtype::F32: return "F32";
    case st_dtype::F64: return "F64";
    case st_dtype::I64: return "I64";
    case st_dtype::U64: return "U64";
  }
  return "?";
}
constexpr std::size_t size_of(st_dtype d) noexcept {
  switch (d) {
    case st_dtype::BOOL: case st_dtype::U8: case st_dtype::I8: return 1;
    case st_dtype::I16: case st_dtype::U16: case st_dtype::F16: case st_dtype::BF16: return 2;
    case st_dtype::I32: case st_dtype::U32: case st_dtype::F32: return 4;
    case st_dtype::F64: case st_dtype::I64: case st_dtype::U64: return 8;
  }
  return 1;
}
constexpr bool is_floating(st_dtype d) noexcept {
  return d == st_dtype::F16 || d == st_dtype::BF16 || d == st_dtype::F32 || d == st_dtype::F64;
}
inline std::optional<st_dtype> parse_dtype(std::string_view s) noexcept {
  for (st_dtype d : {st_dtype::BOOL, st_dtype::U8, st_dtype::I8, st_dtype::I16, st_dtype::U16, st_dtype::F16, st_dtype::BF16,
                     st_dtype::I32, st_dtype::U32, st_dtype::F32, st_dtype::F64, st_dtype::I64, st_dtype::U64})
    if (to_string(d) == s) return d;
  return std::nullopt;
}

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr st_dtype value = st_dtype::F32; };
template <> struct dtype_of<double> { static constexpr st_dtype value = st_dtype::F64; };
template <> struct dtype_of<std::int64_t> { static constexpr st_dtype value = st_dtype::I64; };
template <> struct dtype_of<std::uint64_t> { static constexpr st_dtype value = st_dtype::U64; };
template <> struct dtype_of<std::int32_t> { static constexpr st_dtype value = st_dtype::I32; };
template <> struct dtype_of<std::uint32_t> { static constexpr st_dtype value = st_dtype::U32; };
template <> struct dtype_of<std::int16_t> { static constexpr st_dtype value = st_dtype::I16; };
template <> struct dtype_of<std::uint16_t> { static constexpr st_dtype value = st_dtype::U16; };
template <> struct dtype_of<std::int8_t> { static constexpr st_dtype value = st_dtype::I8; };
template <> struct dtype_of<std::uint8_t> { static constexpr st_dtype value = st_dtype::U8; };
template <> struct dtype_of<bool> { static constexpr st_dtype value = st_dtype::BOOL; };

namespace detail {

static_assert(std::endian::native == std::endian::little, "E-REC-006: safetensors files are little-endian, and nitro reads them in place, so it builds for little-endian machines only. Fix: build on x86-64, AArch64 or another little-endian target.");

inline std::uint32_t crc32_of(void const* data, std::size_t n, std::uint32_t crc = 0) noexcept {
  auto const* p = static_cast<unsigned char const*>(data);
  uLong c = crc;
  while (n > 0) {
    const uInt chunk = n > (std::size_t(1) << 30) ? uInt(1) << 30 : static_cast<uInt>(n);
    c = ::crc32(c, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<std::uint32_t>(c);
}
inline std::string crc_hex(std::uint32_t c) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", c);
  return buf;
}

inline constexpr std::uint64_t max_header_bytes = 100'000'000;  // the safetensors package's limit
inline constexpr std::string_view metadata_key = "__metadata__";
inline constexpr std::string_view crc_header_key = "crc32.header";
inline constexpr std::string_view crc_tensors_key = "crc32.tensors";
inline constexpr std::string_view data_bytes_key = "data_bytes";

inline std::string shape_text(std::vector<std::int64_t> const& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) bits = sign;
    else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) { mant <<= 1; --exp; }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);
  else bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  return std::bit_cast<float>(bits);
}
inline float bf16_to_float(std::uint16_t h) noexcept { return std::bit_cast<float>(std::uint32_t(h) << 16); }

}  // namespace detail

// ---- one tensor of a file -----------------------------------------------------------------------
struct safetensors_entry {
  std::string name;
  st_dtype dtype = st_dtype::F32;
  std::vector<std::int64_t> file_shape;  // as stored: row-major (C order)
  std::uint64_t begin = 0, end = 0;      // data offsets
  std::span<std::byte const> bytes;      // the tensor's bytes, inside the file's buffer

  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (auto d : file_shape) n *= d;
    return n;
  }
  // nitro's extents: the stored shape reversed (see the layout note at the top).
  nitro::shape shape() const {
    std::vector<std::int64_t> r(file_shape.rbegin(), file_shape.rend());
    if (r.size() > static_cast<std::size_t>(nitro::shape::max_rank))
      throw error("E-CKPT-012", "tensor '" + name + "' has " + std::to_string(r.size()) + " dimensions; nitro tensors have at most 5",
                  "reshape it to at most 5 dimensions before saving");
    return nitro::shape::from(r.begin(), r.end());
  }
};

}  // namespace nitro
