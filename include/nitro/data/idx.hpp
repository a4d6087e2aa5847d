// nitro/data/idx.hpp — reading IDX files (the MNIST family's format), gzip'd or not, through zlib.
//
// An IDX file is a 4-byte magic (0, 0, element type, rank), rank big-endian 32-bit extents, then the
// elements. Only unsigned bytes (type 0x08) are read here: images and labels. A missing file is
// E-DATA-001 with the command that installs it; a file that is not IDX, is truncated, or whose
// gzip stream is damaged is E-DATA-002 naming the file and what is wrong. Never a crash.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/runtime.hpp"

#include <cstdint>     // uint8_t, int64_t
#include <filesystem>  // exists
#include <string>      // paths, messages
#include <vector>      // extents, bytes

namespace nitro::data {

struct idx_array {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> bytes;
  std::int64_t count() const noexcept { return dims.empty() ? 0 : dims[0]; }
};

NITRO_RUNTIME_INLINE idx_array read_idx(std::string const& path, std::string const& install_hint = {});

}  // namespace nitro::data

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
#include <zlib.h>

#include <algorithm>  // min

namespace nitro::data {

NITRO_RUNTIME_INLINE idx_array read_idx(std::string const& path, std::string const& install_hint) {
  if (!std::filesystem::exists(path))
    throw error("E-DATA-001", "the data file " + path + " does not exist",
                install_hint.empty() ? "check the path" : install_hint);
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw error("E-DATA-002", "cannot open " + path + " for reading", "check the file's permissions");
  struct closer { gzFile f; ~closer() { gzclose(f); } } guard{f};
  auto corrupt = [&](std::string const& what) {
    return error("E-DATA-002", "the data file " + path + " is damaged: " + what,
                 install_hint.empty() ? "replace the file with an intact copy" : "reinstall it: " + install_hint);
  };
  auto read_exact = [&](void* dst, unsigned n, char const* what) {
    int got = gzread(f, dst, n);
    if (got < 0) {
      int code = 0;
      char const* msg = gzerror(f, &code);
      throw corrupt(std::string("gzip stream error while reading ") + what + " (" + (msg ? msg : "?") + ")");
    }
    if (static_cast<unsigned>(got) != n)
      throw corrupt(std::string("it ends early while reading ") + what + " (" + std::to_string(got) + " of " + std::to_string(n) + " bytes)");
  };
  std::uint8_t magic[4];
  read_exact(magic, 4, "the header");
  if (magic[0] != 0 || magic[1] != 0) throw corrupt("it does not start with an IDX magic number");
  if (magic[2] != 0x08) throw corrupt("its elements are not unsigned bytes (type 0x" + std::to_string(int(magic[2])) + ")");
  const int rank = magic[3];
  if (rank < 1 || rank > 4) throw corrupt("it declares " + std::to_string(rank) + " dimensions (1 to 4 expected)");
  idx_array out;
  std::int64_t total = 1;
  for (int i = 0; i < rank; ++i) {
    std::uint8_t b[4];
    read_exact(b, 4, "the extents");
    std::int64_t d = (std::int64_t(b[0]) << 24) | (std::int64_t(b[1]) << 16) | (std::int64_t(b[2]) << 8) | std::int64_t(b[3]);
    if (d <= 0 || d > (std::int64_t(1) << 31)) throw corrupt("extent " + std::to_string(i) + " is " + std::to_string(d));
    if (total > (std::int64_t(1) << 34) / d) throw corrupt("it declares more than 16 GiB of elements");  // before the product can overflow
    total *= d;
    out.dims.push_back(d);
  }
  // the elements, held as they arrive: a damaged header that declares more than the file holds
  // costs what the file holds, not the up to 16 GiB it declares
  const std::size_t want = static_cast<std::size_t>(total);
  std::size_t done = 0;
  while (done < want) {
    const std::size_t chunk = std::min<std::size_t>(want - done, std::size_t(1) << 24);
    out.bytes.resize(done + chunk);
    const int got = gzread(f, out.bytes.data() + done, static_cast<unsigned>(chunk));
    if (got < 0) {
      int code = 0;
      char const* msg = gzerror(f, &code);
      throw corrupt(std::string("gzip stream error while reading the elements (") + (msg ? msg : "?") + ")");
    }
    done += static_cast<std::size_t>(got);
    if (static_cast<std::size_t>(got) != chunk)
      throw corrupt("it ends early while reading the elements (" + std::to_string(done) + " of " + std::to_string(want) + " bytes)");
  }
  std::uint8_t extra;
  int more = gzread(f, &extra, 1);
  if (more < 0) throw corrupt("gzip stream error after the elements");
  if (more > 0) throw corrupt("it has bytes after the " + std::to_string(total) + " elements its header declares");
  // zlib ends a gzip stream cut short (no checksum and length at its end) as a plain end of file
  int code = Z_OK;
  (void)gzerror(f, &code);
  if (code == Z_BUF_ERROR) throw corrupt("its gzip stream is cut short (it lacks the checksum at its end)");
  return out;
}

}  // namespace nitro::data
#endif  // !NITRO_RUNTIME_EXTERN
