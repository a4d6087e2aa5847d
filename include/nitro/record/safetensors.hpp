// nitro/record/safetensors.hpp — tensors in a file that PyTorch, NumPy and the `safetensors` package read.
//
//   nitro::safetensors_writer w;
//   w.add("params.layer_1.weight", ps_weight);          // a nitro tensor, its bytes as they are
//   w.add("train.counts", counts_ptr, nitro::shape{3});  // float, double, int64_t, ... by pointer
//   w.metadata("step", "1200");
//   w.write("model.safetensors");                        // atomically (record/atomic_file.hpp)
//
//   auto f = nitro::safetensors_file::read("model.safetensors");   // validated, or a coded error
//   auto const& t = f.at("params.layer_1.weight");                  // dtype, shapes, bytes
//   f.copy_to(t, dst_float_ptr, t.numel());                         // F32/F64/F16/BF16 -> float
//
// The format (https://github.com/huggingface/safetensors): 8 bytes, a little-endian unsigned
// header length N; N bytes of JSON, {"name": {"dtype": "F32", "shape": [..], "data_offsets":
// [begin, end]}, ..., "__metadata__": {string: string}}; then the data, tensors packed without
// gaps, offsets relative to the data's start. Row-major (C order) shapes.
//
// Layout: nitro is column-major (the first extent varies fastest, the batch last). A nitro tensor
// of extents (d0, ..., dk) is written with its bytes untouched and the shape (dk, ..., d0), which
// is exactly the same memory read in C order: NumPy/PyTorch see the transpose of nitro's indexing
// (a dense weight [out, in] appears as [in, out], a WHCN image batch as NCHW). `file_shape` is
// the shape as stored; `shape()` is nitro's.
//
// Integrity: safetensors has no checksum, so nitro adds CRC-32s (zlib) to `__metadata__`:
// "crc32.tensors" (a JSON object name -> crc of that tensor's bytes), "crc32.header" (the crc of
// the header's compact JSON with that one key removed) and "data_bytes". A file whose "format"
// starts with "nitro." must carry them; a file from another writer is validated without them.
//
// The reader checks everything before handing anything out: header length, JSON (no duplicate
// keys), each entry's fields, dtype, shape and byte count, offsets (in range, no overlap, no gap,
// covering the data exactly), truncation and checksums. Each failure is a nitro::error
// (E-CKPT-001..009) naming the file and what is wrong. It never crashes on any input and never
// returns a partial file: tests/fuzz/ fuzzes it with libFuzzer.
//
// The format's vocabulary is record/safetensors_format.hpp; the writer record/safetensors_writer.hpp
// (included here, so this header is the whole format).
#pragma once

#include "nitro/core/runtime.hpp"
#include "nitro/record/safetensors_format.hpp"
#include "nitro/record/safetensors_writer.hpp"

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

// ---- the reader ---------------------------------------------------------------------------------
class safetensors_file {
 public:
  // Reads and validates a whole file. Every failure is a nitro::error naming the file.
  static safetensors_file read(std::filesystem::path const& path);

  // Validates bytes already in memory; `source` names them in errors (a path, "<memory>").
  static safetensors_file parse(std::string bytes, std::string source);

  // Copies and moves keep each entry's bytes pointing into the object's own buffer.
  safetensors_file(safetensors_file const& o)
      : m_bytes(o.m_bytes), m_source(o.m_source), m_entries(o.m_entries), m_metadata(o.m_metadata), m_data_at(o.m_data_at), m_nitro(o.m_nitro), m_checked(o.m_checked) {
    rebase();
  }
  safetensors_file(safetensors_file&& o) noexcept
      : m_bytes(std::move(o.m_bytes)), m_source(std::move(o.m_source)), m_entries(std::move(o.m_entries)), m_metadata(std::move(o.m_metadata)),
        m_data_at(o.m_data_at), m_nitro(o.m_nitro), m_checked(o.m_checked) {
    rebase();
  }
  safetensors_file& operator=(safetensors_file const& o) {
    if (this != &o) *this = safetensors_file(o);
    return *this;
  }
  safetensors_file& operator=(safetensors_file&& o) noexcept {
    m_bytes = std::move(o.m_bytes);
    m_source = std::move(o.m_source);
    m_entries = std::move(o.m_entries);
    m_metadata = std::move(o.m_metadata);
    m_data_at = o.m_data_at;
    m_nitro = o.m_nitro;
    m_checked = o.m_checked;
    rebase();
    return *this;
  }
  ~safetensors_file() = default;

  std::string const& source() const noexcept { return m_source; }
  std::vector<safetensors_entry> const& entries() const noexcept { return m_entries; }  // in data order
  std::map<std::string, std::string> const& metadata() const noexcept { return m_metadata; }
  std::size_t size_bytes() const noexcept { return m_bytes.size(); }
  // True for files nitro wrote (metadata "format" = "nitro.*"): they carry checksums.
  bool is_nitro() const noexcept { return m_nitro; }
  // True when the checksums were verified (every nitro file; any file carrying nitro's keys).
  bool checksummed() const noexcept { return m_checked; }

  safetensors_entry const* find(std::string_view name) const noexcept {
    for (auto const& e : m_entries)
      if (e.name == name) return &e;
    return nullptr;
  }
  bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }
  safetensors_entry const& at(std::string_view name) const {
    if (auto const* e = find(name)) return *e;
    throw error("E-CKPT-011", "'" + m_source + "' has no tensor '" + std::string(name) + "'" + near_names(name),
                "load a file written for this model, or check the name");
  }
  std::string const* meta(std::string_view key) const noexcept {
    auto it = m_metadata.find(std::string(key));
    return it == m_metadata.end() ? nullptr : &it->second;
  }

  // Copies `count` values of `e` into dst, converting. Floating destinations take any floating
  // dtype (F64 -> F32 rounds); integer destinations take integer dtypes only. A count other than
  // the tensor's, or a conversion that would change the kind of number, is an error.
  template <class T>
  void copy_to(safetensors_entry const& e, T* dst, std::int64_t count) const {
    if (count != e.numel())
      throw error("E-CKPT-012", "tensor '" + e.name + "' of '" + m_source + "' holds " + std::to_string(e.numel()) + " values, not " + std::to_string(count),
                  "load it into a tensor of its shape " + detail::shape_text(e.file_shape) + " (C order)");
    auto const* src = e.bytes.data();
    const std::size_t n = static_cast<std::size_t>(count);
    if (e.dtype == dtype_of<T>::value) {
      if (n) std::memcpy(dst, src, n * sizeof(T));
      return;
    }
    auto read = [&]<class S>(S*) {
      for (std::size_t i = 0; i < n; ++i) {
        S v;
        std::memcpy(&v, src + i * sizeof(S), sizeof(S));
        dst[i] = static_cast<T>(v);
      }
    };
    if constexpr (std::is_floating_point_v<T>) {
      switch (e.dtype) {
        case st_dtype::F32: return read(static_cast<float*>(nullptr));
        case st_dtype::F64: return read(static_cast<double*>(nullptr));
        case st_dtype::F16:
        case st_dtype::BF16:
          for (std::size_t i = 0; i < n; ++i) {
            std::uint16_t h;
            std::memcpy(&h, src + 2 * i, 2);
            dst[i] = static_cast<T>(e.dtype == st_dtype::F16 ? detail::half_to_float(h) : detail::bf16_to_float(h));
          }
          return;
        default: break;
      }
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      switch (e.dtype) {
        case st_dtype::I64: return read(static_cast<std::int64_t*>(nullptr));
        case st_dtype::I32: return read(static_cast<std::int32_t*>(nullptr));
        case st_dtype::U32: return read(static_cast<std::uint32_t*>(nullptr));
        case st_dtype::I16: return read(static_cast<std::int16_t*>(nullptr));
        case st_dtype::U16: return read(static_cast<std::uint16_t*>(nullptr));
        case st_dtype::I8: return read(static_cast<std::int8_t*>(nullptr));
        case st_dtype::U8: return read(static_cast<std::uint8_t*>(nullptr));
        default: break;
      }
    }
    throw error("E-CKPT-013", "tensor '" + e.name + "' of '" + m_source + "' is " + std::string(to_string(e.dtype)) +
                                  ", which does not load into " + std::string(to_string(dtype_of<T>::value)),
                "save it with a " + std::string(is_floating(dtype_of<T>::value) ? "floating (F32, F64, F16, BF16)" : "integer") + " dtype");
  }
  template <class T>
  std::vector<T> values(safetensors_entry const& e) const {
    std::vector<T> v(static_cast<std::size_t>(e.numel()));
    copy_to(e, v.data(), e.numel());
    return v;
  }

 private:
  safetensors_file() = default;

  [[noreturn]] void fail(char const* code, std::string const& what, std::string const& fix) const {
    throw error(code, "'" + m_source + "' is not a valid safetensors file: " + what, fix);
  }

  std::string near_names(std::string_view name) const;

  void validate();

  void rebase() noexcept {
    char const* data = m_bytes.data() + m_data_at;
    for (auto& e : m_entries) e.bytes = std::span<std::byte const>(reinterpret_cast<std::byte const*>(data + e.begin), static_cast<std::size_t>(e.end - e.begin));
  }

  safetensors_entry parse_entry(std::string const& key, nlohmann::json const& v, char const* rewrite) const;

  std::string m_bytes;
  std::string m_source;
  std::vector<safetensors_entry> m_entries;
  std::map<std::string, std::string> m_metadata;
  std::size_t m_data_at = 0;  // where the data starts in m_bytes
  bool m_nitro = false;
  bool m_checked = false;
};

}  // namespace nitro

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro {

NITRO_RUNTIME_INLINE safetensors_file safetensors_file::read(std::filesystem::path const& path) {
  const std::string name = path.string();
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st))
    throw error("E-CKPT-001", "cannot read '" + name + "': no such file", "check the path (weights = \"...\", or a run => checkpoint reference)");
  if (std::filesystem::is_directory(st))
    throw error("E-CKPT-001", "cannot read '" + name + "': it is a directory, not a safetensors file",
                "name a .safetensors file, or the run: nitro::run_id(\"" + path.filename().string() + "\") >> nitro::best");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error("E-CKPT-001", "cannot read '" + name + "': the file cannot be opened", "check its permissions");
  in.seekg(0, std::ios::end);
  const auto size = in.tellg();
  if (size < 0) throw error("E-CKPT-001", "cannot read '" + name + "': its size cannot be determined", "check the file");
  in.seekg(0, std::ios::beg);
  std::string bytes(static_cast<std::size_t>(size), '\0');
  if (size > 0 && !in.read(bytes.data(), size))
    throw error("E-CKPT-001", "cannot read '" + name + "': reading failed after " + std::to_string(in.gcount()) + " bytes", "check the disk and the file");
  return parse(std::move(bytes), name);
}

NITRO_RUNTIME_INLINE safetensors_file safetensors_file::parse(std::string bytes, std::string source) {
  safetensors_file f;
  f.m_bytes = std::move(bytes);
  f.m_source = std::move(source);
  f.validate();
  return f;
}

NITRO_RUNTIME_INLINE std::string safetensors_file::near_names(std::string_view name) const {
  std::string r;
  int shown = 0;
  for (auto const& e : m_entries) {
    if (shown == 6) { r += ", ..."; break; }
    r += (shown++ ? ", " : "; it has ") + e.name;
  }
  if (m_entries.empty()) r = "; it holds no tensors";
  (void)name;
  return r;
}

NITRO_RUNTIME_INLINE void safetensors_file::validate() {
  static constexpr char const* rewrite = "write the file again (nitro writes atomically, so an interrupted save leaves the previous one)";
  const std::uint64_t total = m_bytes.size();
  if (total < 8)
    fail("E-CKPT-002", "it is " + std::to_string(total) + " bytes long, shorter than the 8-byte header length: it is truncated or not a safetensors file", rewrite);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(m_bytes[static_cast<std::size_t>(i)]);
  if (n == 0) fail("E-CKPT-003", "its header length is 0", rewrite);
  if (n > detail::max_header_bytes)
    fail("E-CKPT-003", "its header length is " + std::to_string(n) + " bytes, above the 100000000-byte limit (the length is corrupt)", rewrite);
  if (n > total - 8)
    fail("E-CKPT-003", "its header length is " + std::to_string(n) + " bytes but only " + std::to_string(total - 8) +
                           " bytes follow the length: the file is truncated or the length is corrupt", rewrite);
  const std::string_view header(m_bytes.data() + 8, static_cast<std::size_t>(n));
  if (header.front() != '{') fail("E-CKPT-004", "its header does not start with '{'", rewrite);
  if (header.find('\0') != std::string_view::npos) fail("E-CKPT-004", "its header contains a NUL byte, which JSON text cannot", rewrite);

  // JSON, with duplicate keys and nesting deeper than safetensors uses refused.
  nlohmann::json j;
  {
    std::vector<std::set<std::string>> open;
    std::string dup;
    struct too_deep {};
    auto cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
      using E = nlohmann::json::parse_event_t;
      if (depth > 3) throw too_deep{};  // safetensors nests three levels; stop before any more is built
      if (ev == E::object_start) open.emplace_back();
      else if (ev == E::object_end) { if (!open.empty()) open.pop_back(); }
      else if (ev == E::key && !open.empty() && parsed.is_string()) {
        if (!open.back().insert(parsed.get<std::string>()).second && dup.empty()) dup = parsed.get<std::string>();
      }
      return true;
    };
    try {
      j = nlohmann::json::parse(header.begin(), header.end(), cb, true, false);
    } catch (nlohmann::json::exception const& e) {
      fail("E-CKPT-004", std::string("its header is not valid JSON (") + e.what() + ")", rewrite);
    } catch (too_deep const&) {
      fail("E-CKPT-004", "its header nests deeper than the format allows", rewrite);
    }
    if (!dup.empty()) fail("E-CKPT-004", "its header names '" + dup + "' twice", rewrite);
  }
  if (!j.is_object()) fail("E-CKPT-004", "its header is JSON but not an object", rewrite);

  // Entries and metadata.
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    auto const& v = it.value();
    if (key == detail::metadata_key) {
      if (!v.is_object()) fail("E-CKPT-005", "its __metadata__ is not an object of strings", rewrite);
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail("E-CKPT-005", "its __metadata__ entry '" + m.key() + "' is not a string", rewrite);
        m_metadata.emplace(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    m_entries.push_back(parse_entry(key, v, rewrite));
  }
  if (auto const* fmt = meta("format"); fmt && fmt->rfind("nitro.", 0) == 0) m_nitro = true;
  // Checked when it says it is nitro's or carries any of nitro's checksum keys: one damaged key
  // cannot turn the checks off.
  m_checked = m_nitro || meta(detail::crc_header_key) || meta(detail::crc_tensors_key) || meta(detail::data_bytes_key);

  // The header's own checksum, before its numbers are trusted any further.
  if (m_checked) {
    auto const* h = meta(detail::crc_header_key);
    if (!h) fail("E-CKPT-008", "it is a nitro file but its header checksum (crc32.header) is missing", rewrite);
    nlohmann::json copy = j;
    copy[std::string(detail::metadata_key)].erase(std::string(detail::crc_header_key));
    const std::string canonical = copy.dump();
    const std::string actual = detail::crc_hex(detail::crc32_of(canonical.data(), canonical.size()));
    if (actual != *h) fail("E-CKPT-008", "its header checksum is " + actual + " but the header records " + *h + ": the header was damaged", rewrite);
  }

  // Byte counts, offsets and coverage.
  const std::uint64_t data_size = total - 8 - n;
  for (auto const& e : m_entries) {
    if (e.end < e.begin)
      fail("E-CKPT-006", "tensor '" + e.name + "' has data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "], which end before they begin", rewrite);
    std::uint64_t bytes = size_of(e.dtype);
    for (auto d : e.file_shape)
      if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes))
        fail("E-CKPT-005", "tensor '" + e.name + "' has shape " + detail::shape_text(e.file_shape) + ", too large to exist", rewrite);
    if (bytes != e.end - e.begin)
      fail("E-CKPT-007", "tensor '" + e.name + "' is " + std::string(to_string(e.dtype)) + " " + detail::shape_text(e.file_shape) + ", " + std::to_string(bytes) +
                             " bytes, but its data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] span " + std::to_string(e.end - e.begin),
           rewrite);
  }
  std::sort(m_entries.begin(), m_entries.end(), [](auto const& a, auto const& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  std::string const* previous = nullptr;
  for (auto const& e : m_entries) {
    if (e.begin < expected)
      fail("E-CKPT-006", "tensor '" + e.name + "' (bytes " + std::to_string(e.begin) + ".." + std::to_string(e.end) + ") overlaps tensor '" + *previous + "'", rewrite);
    if (e.begin > expected) {
      if (e.begin >= data_size)
        fail("E-CKPT-006", "tensor '" + e.name + "' has data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "], outside the " +
                               std::to_string(data_size) + " data bytes the file holds",
             rewrite);
      fail("E-CKPT-006", "data bytes " + std::to_string(expected) + ".." + std::to_string(e.begin) + " belong to no tensor (a gap before '" + e.name + "')", rewrite);
    }
    expected = e.end;
    previous = &e.name;
  }
  if (auto const* want = meta(detail::data_bytes_key); m_checked && want && *want != std::to_string(expected))
    fail("E-CKPT-008", "its tensors cover " + std::to_string(expected) + " data bytes but it records data_bytes = " + *want, rewrite);
  if (data_size < expected)
    fail("E-CKPT-009", "it is truncated: its tensors need " + std::to_string(expected) + " data bytes but only " + std::to_string(data_size) + " follow the header", rewrite);
  if (data_size > expected)
    fail("E-CKPT-006", std::to_string(data_size - expected) + " bytes after the last tensor belong to no tensor (the offsets do not cover the data)", rewrite);

  m_data_at = static_cast<std::size_t>(8 + n);
  rebase();

  // Tensor checksums.
  if (m_checked) {
    auto const* c = meta(detail::crc_tensors_key);
    if (!c) fail("E-CKPT-008", "it is a nitro file but its tensor checksums (crc32.tensors) are missing", rewrite);
    nlohmann::json crcs;
    try {
      crcs = nlohmann::json::parse(*c);
    } catch (nlohmann::json::exception const&) {
      fail("E-CKPT-008", "its crc32.tensors is not JSON", rewrite);
    }
    if (!crcs.is_object() || crcs.size() != m_entries.size())
      fail("E-CKPT-008", "its crc32.tensors does not list one checksum per tensor", rewrite);
    for (auto const& e : m_entries) {
      auto it = crcs.find(e.name);
      if (it == crcs.end() || !it->is_string()) fail("E-CKPT-008", "its crc32.tensors has no checksum for tensor '" + e.name + "'", rewrite);
      const std::string actual = detail::crc_hex(detail::crc32_of(e.bytes.data(), e.bytes.size()));
      if (actual != it->get<std::string>())
        fail("E-CKPT-008", "tensor '" + e.name + "' has checksum " + actual + " but the header records " + it->get<std::string>() + ": its bytes were damaged", rewrite);
    }
  }
}

NITRO_RUNTIME_INLINE safetensors_entry safetensors_file::parse_entry(std::string const& key, nlohmann::json const& v, char const* rewrite) const {
  if (key.empty()) fail("E-CKPT-005", "a tensor has an empty name", rewrite);
  if (!v.is_object()) fail("E-CKPT-005", "the entry of tensor '" + key + "' is not an object", rewrite);
  for (auto f = v.begin(); f != v.end(); ++f)
    if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
      fail("E-CKPT-005", "the entry of tensor '" + key + "' has an unknown field '" + f.key() + "'", rewrite);
  safetensors_entry e;
  e.name = key;
  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) fail("E-CKPT-005", "tensor '" + key + "' has no dtype string", rewrite);
  auto parsed = parse_dtype(dt->get_ref<std::string const&>());
  if (!parsed) fail("E-CKPT-005", "tensor '" + key + "' has dtype '" + dt->get<std::string>() + "', which nitro does not read", "save it as F32, F64, F16, BF16 or an integer type");
  e.dtype = *parsed;
  auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) fail("E-CKPT-005", "tensor '" + key + "' has no shape array", rewrite);
  for (auto const& d : *sh) {
    if (!d.is_number_integer() || (d.is_number_integer() && !d.is_number_unsigned() && d.get<std::int64_t>() < 0))
      fail("E-CKPT-005", "tensor '" + key + "' has a shape entry that is not a non-negative integer", rewrite);
    const std::uint64_t x = d.get<std::uint64_t>();
    if (x > (std::uint64_t(1) << 62)) fail("E-CKPT-005", "tensor '" + key + "' has an extent too large to exist", rewrite);
    e.file_shape.push_back(static_cast<std::int64_t>(x));
  }
  auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2) fail("E-CKPT-005", "tensor '" + key + "' has no data_offsets pair", rewrite);
  for (int i = 0; i < 2; ++i) {
    auto const& x = (*off)[static_cast<std::size_t>(i)];
    if (!x.is_number_integer() || (!x.is_number_unsigned() && x.get<std::int64_t>() < 0))
      fail("E-CKPT-005", "tensor '" + key + "' has a data offset that is not a non-negative integer", rewrite);
    (i == 0 ? e.begin : e.end) = x.get<std::uint64_t>();
  }
  return e;
}

}  // namespace nitro
#endif  // !NITRO_RUNTIME_EXTERN
