// nitro/cli/tar.hpp — a POSIX ustar archive, written and read without a library.
//
//   nitro::cli::tar_writer t;
//   t.add("fashion_mlp-small-.../manifest.json", text);   // regular files, mode 0644
//   t.write("run.tar");                                    // atomically
//   auto files = nitro::cli::read_tar(bytes);              // name -> contents (checksums verified)
//
// A member is a 512-byte header (name, mode, size and mtime in octal, a checksum, "ustar\0" "00")
// followed by its bytes padded to 512; two zero blocks end the archive. Names up to 255 bytes use
// ustar's prefix field. `tar -tf` and `tar -xf` read what this writes.
#pragma once

#include "nitro/core/runtime.hpp"

#include "nitro/core/error.hpp"
#include "nitro/record/record_file.hpp"

#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstring>      // memcpy
#include <ctime>        // mtime
#include <map>          // read_tar
#include <string>       // bytes
#include <string_view>  // names
#include <utility>      // pair
#include <vector>       // members

namespace nitro::cli {

class tar_writer {
 public:
  void add(std::string const& name, std::string const& bytes, std::int64_t mtime = static_cast<std::int64_t>(std::time(nullptr))) {
    char h[512] = {};
    std::string prefix, base = name;
    if (name.size() > 100) {
      // split at a '/' so that the prefix fits 155 bytes and the rest 100
      const std::size_t cut = name.rfind('/', 155);
      if (cut == std::string::npos || name.size() - cut - 1 > 100 || name.size() > 255)
        throw error("E-REC-001", "the name '" + name + "' is too long for a tar archive (ustar holds 255 bytes, split at a '/')",
                    "use a shorter --id");
      prefix = name.substr(0, cut);
      base = name.substr(cut + 1);
    }
    std::memcpy(h, base.data(), base.size());
    octal(h + 100, 8, 0644);
    octal(h + 108, 8, 0);
    octal(h + 116, 8, 0);
    octal(h + 124, 12, static_cast<std::uint64_t>(bytes.size()));
    octal(h + 136, 12, static_cast<std::uint64_t>(mtime < 0 ? 0 : mtime));
    std::memset(h + 148, ' ', 8);
    h[156] = '0';
    std::memcpy(h + 257, "ustar", 6);  // with its NUL
    std::memcpy(h + 263, "00", 2);
    std::memcpy(h + 265, "nitro", 5);
    std::memcpy(h + 297, "nitro", 5);
    std::memcpy(h + 345, prefix.data(), prefix.size());
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);  // six digits, NUL, and the space already there
    h[155] = ' ';
    m_bytes.append(h, 512);
    m_bytes += bytes;
    m_bytes.append((512 - bytes.size() % 512) % 512, '\0');
  }
  // The archive: members, then two zero blocks.
  std::string bytes() const { return m_bytes + std::string(1024, '\0'); }
  void write(std::string const& path) const { write_record_atomic(path, bytes()); }

 private:
  static void octal(char* field, std::size_t width, std::uint64_t v) {
    // width - 1 octal digits, zero-padded, then NUL
    for (std::size_t i = width - 1; i-- > 0;) { field[i] = static_cast<char>('0' + (v & 7)); v >>= 3; }
    field[width - 1] = '\0';
  }
  std::string m_bytes;
};

// Reads an archive written by tar_writer (or any ustar/pax-free tar of regular files): name ->
// bytes, in order. A damaged archive is E-REC-002.
NITRO_RUNTIME_INLINE std::vector<std::pair<std::string, std::string>> read_tar(std::string const& bytes);

}  // namespace nitro::cli

// ---- the definitions: compiled once in nitro::runtime when the program links it (core/runtime.hpp)
#if !NITRO_RUNTIME_EXTERN
namespace nitro::cli {

NITRO_RUNTIME_INLINE std::vector<std::pair<std::string, std::string>> read_tar(std::string const& bytes) {
  std::vector<std::pair<std::string, std::string>> out;
  auto damaged = [](std::string const& why) { return error("E-REC-002", "the tar archive is damaged: " + why, "write it again with `bundle`"); };
  std::size_t at = 0;
  while (at + 512 <= bytes.size()) {
    char const* h = bytes.data() + at;
    bool zero = true;
    for (int i = 0; i < 512; ++i) zero = zero && h[i] == 0;
    if (zero) return out;
    unsigned sum = 0;
    for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    auto parse_octal = [&](int off, int width) {
      std::uint64_t v = 0;
      for (int i = 0; i < width && h[off + i] >= '0' && h[off + i] <= '7'; ++i) v = v * 8 + static_cast<unsigned>(h[off + i] - '0');
      return v;
    };
    if (parse_octal(148, 8) != sum) throw damaged("a header's checksum does not match at byte " + std::to_string(at));
    std::uint64_t size = parse_octal(124, 12);
    std::string name(h, strnlen(h, 100));
    std::string prefix(h + 345, strnlen(h + 345, 155));
    if (!prefix.empty()) name = prefix + "/" + name;
    at += 512;
    if (size > bytes.size() - at) throw damaged("the member '" + name + "' is cut short");
    if (h[156] == '0' || h[156] == '\0') out.emplace_back(name, bytes.substr(at, size));
    at += (size + 511) / 512 * 512;
  }
  throw damaged("it does not end with two zero blocks");
}

}  // namespace nitro::cli
#endif  // !NITRO_RUNTIME_EXTERN
