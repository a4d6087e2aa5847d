// Writes the seed corpus of the safetensors fuzzer: valid files (nitro's, a checkpoint, one as
// PyTorch's writer makes it) and damaged variants of each kind the reader refuses.
//   cmake --build build --target fuzz_make_corpus && build/tests/fuzz/fuzz_make_corpus tests/fuzz/corpus/safetensors
#include <nitro/record/checkpoint.hpp>
#include <nitro/record/safetensors.hpp>

#include <cstdint>     // uint64_t
#include <cstdio>      // report
#include <filesystem>  // the corpus
#include <fstream>     // writing, reading the index back
#include <iterator>    // istreambuf_iterator
#include <string>      // bytes
#include <vector>      // tensors

namespace {
std::filesystem::path out;
void put(std::string const& name, std::string const& bytes) {
  std::ofstream f(out / name, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string raw(std::string const& header, std::string const& data) {
  std::string s(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s + header + data;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  out = argv[1];
  std::filesystem::create_directories(out);
  std::vector<float> w{1, 2, 3, 4, 5, 6};
  std::vector<double> d{0.5, -1.25};
  std::vector<std::int64_t> i{3, -4};
  std::vector<std::uint16_t> h{0x3c00, 0xc000};

  nitro::safetensors_writer t;
  t.add("params.layer_1.weight", w.data(), nitro::shape{3, 2});
  t.add("params.layer_1.bias", d.data(), nitro::shape{2});
  t.add("train.i", i.data(), nitro::shape{2});
  const std::string tensors = t.bytes();
  put("valid-tensors.safetensors", tensors);

  nitro::safetensors_writer c;
  c.add("params.w", w.data(), nitro::shape{6});
  c.add("optim.m", w.data(), nitro::shape{2, 3});
  nitro::checkpoint_info info{.step = 120, .epoch = 2, .batch_in_epoch = 5, .seed = 7, .metrics = {{"valid.loss", 0.25}}};
  info.seq = 3;
  nitro::write_checkpoint_metadata(c, info);
  const std::string ckpt = c.bytes();
  put("valid-checkpoint.safetensors", ckpt);

  std::string pt_header = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[],"data_offsets":[4,8]}})";
  while (pt_header.size() % 8) pt_header += ' ';
  const float half = 0.5f;
  put("valid-pytorch.safetensors", raw(pt_header, std::string(reinterpret_cast<char const*>(h.data()), 4) + std::string(reinterpret_cast<char const*>(&half), 4)));
  put("valid-empty.safetensors", raw("{}", ""));

  put("damaged-short.safetensors", tensors.substr(0, 5));
  put("damaged-truncated.safetensors", ckpt.substr(0, ckpt.size() - 7));
  std::string flipped = ckpt;
  flipped[flipped.size() - 2] ^= 0x10;
  put("damaged-checksum.safetensors", flipped);
  std::string len = tensors;
  len[3] = 0x7f;
  put("damaged-length.safetensors", len);
  std::string hdr = ckpt;
  hdr[hdr.find("\"120\"") + 2] = '3';
  put("damaged-header-edit.safetensors", hdr);
  const std::string four(16, '\x01');
  put("damaged-overlap.safetensors", raw(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", four));
  put("damaged-gap.safetensors", raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", four));
  put("damaged-range.safetensors", raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[64,72]}})", four));
  put("damaged-bytecount.safetensors", raw(R"({"a":{"dtype":"F64","shape":[4],"data_offsets":[0,16]}})", four));
  put("damaged-dtype.safetensors", raw(R"({"a":{"dtype":"Q4","shape":[4],"data_offsets":[0,16]}})", four));
  put("damaged-json.safetensors", raw(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16])", four));
  put("damaged-duplicate.safetensors", raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", four));
  put("damaged-trailing.safetensors", raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", four));
  put("damaged-metadata.safetensors", raw(R"({"__metadata__":{"step":3}})", ""));
  // checkpoint indexes
  auto dir = out / "index-tmp";
  std::filesystem::create_directories(dir);
  {
    nitro::checkpointer ck(dir, {.every = nitro::every_steps(1), .keep_last = 2, .keep_best = 1, .monitor = "valid.loss"});
    for (int s = 1; s <= 3; ++s) {
      nitro::safetensors_writer one;
      one.add("params.w", w.data(), nitro::shape{6});
      ck.save(one, {.step = s, .epoch = 0, .batch_in_epoch = s, .seed = 7, .metrics = {{"valid.loss", 1.0 / s}}});
    }
  }
  std::ifstream in(dir / "index.json", std::ios::binary);
  const std::string index((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove_all(dir);
  put("valid-index.json", index);
  put("damaged-index-truncated.json", index.substr(0, index.size() / 2));
  std::string mode = index;
  mode.replace(mode.find("\"min\""), 5, "\"mid\"");
  put("damaged-index-mode.json", mode);
  put("damaged-index-format.json", R"({"format": "nitro.checkpoint-index", "version": 1})");
  std::printf("wrote the corpus to %s\n", out.c_str());
}
