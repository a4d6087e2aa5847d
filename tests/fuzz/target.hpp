// The work of one fuzz input, shared by the libFuzzer target and the corpus replay: parse the bytes
// as a safetensors file and use everything a loader would use, and as a checkpoint index. Only nitro::error may come out;
// anything else (another exception, a crash, a sanitizer report) is a bug in the reader.
#pragma once

#include <nitro/record/checkpoint.hpp>
#include <nitro/record/safetensors.hpp>

#include <cstddef>  // size_t
#include <cstdint>  // uint8_t
#include <string>   // the input's bytes

namespace nitro_fuzz {

// True when the bytes were accepted as a file.
inline bool one_input(std::uint8_t const* data, std::size_t size) {
  try {
    auto f = nitro::safetensors_file::parse(std::string(reinterpret_cast<char const*>(data), size), "fuzz-input");
    for (auto const& e : f.entries()) {
      try {
        (void)e.shape();
        if (nitro::is_floating(e.dtype)) (void)f.values<double>(e);
        else if (e.dtype != nitro::st_dtype::BOOL && e.dtype != nitro::st_dtype::U64) (void)f.values<std::int64_t>(e);
      } catch (nitro::error const&) {
      }
    }
    try {
      (void)nitro::read_checkpoint_info(f);
    } catch (nitro::error const&) {
    }
    return true;
  } catch (nitro::error const&) {
    return false;
  }
}

// The same bytes as a checkpoint index (index.json): parsed or refused with E-CKPT-018.
inline bool one_index(std::uint8_t const* data, std::size_t size) {
  try {
    auto idx = nitro::checkpoint_index::parse(std::string(reinterpret_cast<char const*>(data), size), "fuzz-index");
    (void)idx.best(2);
    (void)idx.last(2);
    (void)idx.to_json().dump();
    return true;
  } catch (nitro::error const&) {
    return false;
  }
}

}  // namespace nitro_fuzz
