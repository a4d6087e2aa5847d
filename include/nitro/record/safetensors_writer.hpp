// nitro/record/safetensors_writer.hpp — a safetensors file written in one pass, atomically.
//
//   nitro::safetensors_writer w;
//   w.add("params.layer_1.weight", data, shape);     // by reference: unchanged until save
//   w.metadata("step", "12");
//   w.write(path);                                   // temp file, fsync, rename (record/atomic_file.hpp)
#pragma once

#include "nitro/record/safetensors_format.hpp"

#include "nitro/core/error.hpp"
#include "nitro/record/atomic_file.hpp"
#include "nitro/tensor/shape.hpp"
#include "nitro/tensor/tensor.hpp"

#include "nitro/core/runtime.hpp"

#include <cstddef>      // size_t, byte
#include <cstdint>      // fixed-width integers
#include <filesystem>   // paths
#include <map>          // metadata
#include <string>       // names
#include <vector>       // entries

namespace nitro {

// ---- the writer ---------------------------------------------------------------------------------
// Collects tensors by reference (their memory must stay unchanged until write/bytes), then writes
// header and data in one pass. Tensors are laid out by dtype size, largest first, so each starts
// aligned to its element size (the header is padded with spaces to a multiple of 8).
class safetensors_writer {
 public:
  // Metadata "format": "nitro.tensors" unless the caller sets another "nitro.*" format.
  safetensors_writer() { m_metadata["format"] = "nitro.tensors"; }

  // Raw bytes with the shape as stored (row-major). The other overloads use nitro's extents.
  void add_row_major(std::string name, st_dtype dtype, std::vector<std::int64_t> file_shape, void const* data);
  // A buffer of T with nitro's (column-major) extents.
  template <class T>
  void add(std::string name, T const* data, nitro::shape s) {
    std::vector<std::int64_t> fs;
    for (int i = s.rank() - 1; i >= 0; --i) fs.push_back(s[i]);
    add_row_major(std::move(name), dtype_of<T>::value, std::move(fs), data);
  }
  template <class T>
  void add(std::string name, basic_tensor<T> const& t) { add(std::move(name), t.data(), t.shape()); }

  // A string metadata entry. "format" must stay "nitro.<something>"; checksum keys are nitro's.
  void metadata(std::string key, std::string value);
  std::size_t size() const noexcept { return m_items.size(); }

  // The whole file, in memory.
  std::string bytes() const;
  // Writes the file atomically: the path holds the previous file or this one, never a mixture.
  void write(std::filesystem::path const& path) const;

 private:
  struct item {
    std::string name;
    st_dtype dtype;
    std::vector<std::int64_t> file_shape;
    std::byte const* data;
    std::uint64_t bytes;
  };
  void check_name(std::string const& name) const;
  std::vector<std::size_t> order() const;
  std::uint64_t data_bytes() const {
    std::uint64_t n = 0;
    for (auto const& i : m_items) n += i.bytes;
    return n;
  }
  std::string prefix() const;

  std::vector<item> m_items;
  std::map<std::string, std::string> m_metadata;
};

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
#include <nlohmann/json.hpp>

#include <algorithm>  // stable_sort

namespace nitro {

NITRO_RUNTIME_INLINE void safetensors_writer::add_row_major(std::string name, st_dtype dtype, std::vector<std::int64_t> file_shape, void const* data) {
  check_name(name);
  std::uint64_t bytes = size_of(dtype);
  for (auto d : file_shape) {
    if (d < 0) throw error("E-CKPT-016", "tensor '" + name + "' has a negative extent", "pass non-negative extents");
    bytes *= static_cast<std::uint64_t>(d);
  }
  m_items.push_back({std::move(name), dtype, std::move(file_shape), static_cast<std::byte const*>(data), bytes});
}

NITRO_RUNTIME_INLINE void safetensors_writer::metadata(std::string key, std::string value) {
  if (key == detail::crc_header_key || key == detail::crc_tensors_key || key == detail::data_bytes_key)
    throw error("E-CKPT-016", "metadata key '" + key + "' is reserved for nitro's checksums", "choose another key");
  if (key == "format" && value.rfind("nitro.", 0) != 0)
    throw error("E-CKPT-016", "metadata \"format\" = \"" + value + "\": nitro files name a format starting with \"nitro.\"", "use \"nitro.<name>\" or another key");
  m_metadata[std::move(key)] = std::move(value);
}

NITRO_RUNTIME_INLINE std::string safetensors_writer::bytes() const {
  std::string out = prefix();
  out.reserve(out.size() + static_cast<std::size_t>(data_bytes()));
  for (auto i : order()) out.append(reinterpret_cast<char const*>(m_items[i].data), static_cast<std::size_t>(m_items[i].bytes));
  return out;
}

NITRO_RUNTIME_INLINE void safetensors_writer::write(std::filesystem::path const& path) const {
  atomic_file f(path, "safetensors file");
  f.write(prefix());
  for (auto i : order()) f.write(m_items[i].data, static_cast<std::size_t>(m_items[i].bytes));
  f.commit();
}

NITRO_RUNTIME_INLINE void safetensors_writer::check_name(std::string const& name) const {
  if (name.empty() || name == detail::metadata_key)
    throw error("E-CKPT-016", "a tensor cannot be called '" + name + "'", "name tensors by keypath (params.layer_1.weight)");
  for (auto const& it : m_items)
    if (it.name == name) throw error("E-CKPT-016", "tensor '" + name + "' is added twice", "give every tensor its own name");
}

NITRO_RUNTIME_INLINE std::vector<std::size_t> safetensors_writer::order() const {
  std::vector<std::size_t> o(m_items.size());
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = i;
  std::stable_sort(o.begin(), o.end(), [&](std::size_t a, std::size_t b) { return size_of(m_items[a].dtype) > size_of(m_items[b].dtype); });
  return o;
}

NITRO_RUNTIME_INLINE std::string safetensors_writer::prefix() const {
  nlohmann::json h = nlohmann::json::object();
  nlohmann::json crcs = nlohmann::json::object();
  std::uint64_t at = 0;
  for (auto i : order()) {
    auto const& it = m_items[i];
    h[it.name] = {{"dtype", std::string(to_string(it.dtype))}, {"shape", it.file_shape}, {"data_offsets", {at, at + it.bytes}}};
    crcs[it.name] = detail::crc_hex(detail::crc32_of(it.data, static_cast<std::size_t>(it.bytes)));
    at += it.bytes;
  }
  nlohmann::json meta = nlohmann::json::object();
  for (auto const& [k, v] : m_metadata) meta[k] = v;
  meta[std::string(detail::crc_tensors_key)] = crcs.dump();
  meta[std::string(detail::data_bytes_key)] = std::to_string(at);
  h[std::string(detail::metadata_key)] = meta;
  const std::string canonical = h.dump();
  h[std::string(detail::metadata_key)][std::string(detail::crc_header_key)] = detail::crc_hex(detail::crc32_of(canonical.data(), canonical.size()));
  std::string header = h.dump();
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');
  std::string out(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xffu);
  return out + header;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
