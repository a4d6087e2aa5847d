// nitro/cli/detail/weights.hpp — the weights a run leaves for `eval` and `bundle`: a safetensors
// file of the parameters ("params.<keypath>") and state ("state.<keypath>"), F32.
//
// Shapes follow nitro's safetensors convention: a column-major tensor of extents (d0, ..., dk) is
// written with its bytes untouched and the shape (dk, ..., d0), which is the same memory read in
// C order. `__metadata__` holds strings (step, epoch, the selection, the metrics). The reader
// checks the header length, the JSON, every expected entry's dtype, shape and offsets before it
// copies anything; a mismatch is E-REC-003 naming the file and the entry.
#pragma once

#include "nitro/core/error.hpp"
#include "nitro/core/tree.hpp"
#include "nitro/knobs/record_file.hpp"
#include "nitro/tensor/shape.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>  // uint64_t
#include <cstring>  // memcpy
#include <map>      // metadata
#include <string>   // bytes
#include <vector>   // shapes

namespace nitro::cli::detail {

inline std::vector<std::int64_t> file_shape(nitro::shape const& sh) {
  std::vector<std::int64_t> v;
  for (int d = sh.rank(); d-- > 0;) v.push_back(sh[d]);
  return v;
}

// Every leaf of a tree of tensors (params(), state()) under prefix + keypath.
template <class Tree>
void add_weights(nlohmann::ordered_json& header, std::string& data, std::string const& prefix, Tree const& tree) {
  for_each_leaf(tree, [&](auto kp, auto const& t) {
    nlohmann::ordered_json e;
    e["dtype"] = "F32";
    e["shape"] = file_shape(t.shape());
    const std::uint64_t begin = data.size();
    data.append(reinterpret_cast<char const*>(t.data()), sizeof(float) * static_cast<std::size_t>(t.numel()));
    e["data_offsets"] = {begin, static_cast<std::uint64_t>(data.size())};
    header[prefix + std::string(decltype(kp)::view())] = e;
  });
}

template <class Params, class State>
void write_weights(std::string const& path, Params const& ps, State const& st, std::map<std::string, std::string> const& meta) {
  nlohmann::ordered_json header;
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  for (auto const& [k, v] : meta) m[k] = v;
  m["writer"] = "nitro cli";
  header["__metadata__"] = m;
  std::string data;
  add_weights(header, data, "params.", ps);
  add_weights(header, data, "state.", st);
  std::string h = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += h;
  out += data;
  write_record_atomic(path, out);
}

struct weights_file {
  std::string path;
  std::string bytes;
  nlohmann::json header;
  std::uint64_t data_start = 0;
  std::map<std::string, std::string> metadata;
};

[[noreturn]] inline void weights_damaged(std::string const& path, std::string const& why) {
  throw error("E-REC-003", "the weights file " + path + " cannot be used: " + why,
              "evaluate another checkpoint (--weights final|best|PATH), or rerun the run to write it again");
}

inline weights_file read_weights_file(std::string const& path) {
  weights_file f;
  f.path = path;
  f.bytes = read_record_file(path);
  if (f.bytes.size() < 8) weights_damaged(path, "it is shorter than the 8-byte header length");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(f.bytes[static_cast<std::size_t>(i)])) << (8 * i);
  if (n > f.bytes.size() - 8) weights_damaged(path, "its header length (" + std::to_string(n) + " bytes) runs past the end of the file");
  f.header = nlohmann::json::parse(f.bytes.substr(8, n), nullptr, false);
  if (f.header.is_discarded() || !f.header.is_object()) weights_damaged(path, "its header is not a JSON object");
  f.data_start = 8 + n;
  if (f.header.contains("__metadata__") && f.header["__metadata__"].is_object())
    for (auto const& [k, v] : f.header["__metadata__"].items())
      if (v.is_string()) f.metadata[k] = v.get<std::string>();
  return f;
}

// Checks every leaf of `tree` against the file, then copies them in (nothing is copied if one fails).
template <class Tree>
void load_weights(weights_file const& f, std::string const& prefix, Tree const& tree) {
  for_each_leaf(tree, [&](auto kp, auto const& t) {
    const std::string key = prefix + std::string(decltype(kp)::view());
    if (!f.header.contains(key)) weights_damaged(f.path, "it has no entry '" + key + "' (it was written for another program)");
    auto const& e = f.header[key];
    if (!e.is_object() || !e.contains("dtype") || e["dtype"] != "F32") weights_damaged(f.path, "'" + key + "' is not F32");
    const std::vector<std::int64_t> want = file_shape(t.shape());
    bool shape_ok = e.contains("shape") && e["shape"].is_array() && e["shape"].size() == want.size();
    for (std::size_t i = 0; shape_ok && i < want.size(); ++i)
      shape_ok = e["shape"][i].is_number_integer() && e["shape"][i].template get<std::int64_t>() == want[i];
    if (!shape_ok)
      weights_damaged(f.path, "'" + key + "' has shape " + (e.contains("shape") ? e["shape"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : std::string("none")) +
                                  ", the program's is " + nlohmann::json(want).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2 ||
        !e["data_offsets"][0].is_number_unsigned() || !e["data_offsets"][1].is_number_unsigned())
      weights_damaged(f.path, "'" + key + "' has no valid data_offsets");
    const std::uint64_t b = e["data_offsets"][0].template get<std::uint64_t>(), en = e["data_offsets"][1].template get<std::uint64_t>();
    const std::uint64_t need = sizeof(float) * static_cast<std::uint64_t>(t.numel());
    if (en < b || en - b != need || en > f.bytes.size() - f.data_start)
      weights_damaged(f.path, "'" + key + "' has offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                                  "] outside the data or of the wrong size");
  });
  for_each_leaf(tree, [&](auto kp, auto const& t) {
    auto const& e = f.header[prefix + std::string(decltype(kp)::view())];
    const std::uint64_t b = e["data_offsets"][0].template get<std::uint64_t>();
    std::memcpy(const_cast<float*>(t.data()), f.bytes.data() + f.data_start + b, sizeof(float) * static_cast<std::size_t>(t.numel()));
  });
}

}  // namespace nitro::cli::detail
