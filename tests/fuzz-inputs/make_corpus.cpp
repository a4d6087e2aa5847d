// Writes the seed corpus of fuzz_inputs: for each reader (the first byte, target.hpp), valid inputs and
// damaged variants of each kind it refuses, and the inputs of the bugs the fuzzer found (regressions).
//   cmake --build build --target fuzz_make_corpus_inputs && build/tests/fuzz-inputs/fuzz_make_corpus_inputs tests/fuzz-inputs/corpus
#include "target.hpp"

#include <zlib.h>

#include <cstdio>      // report
#include <filesystem>  // the corpus
#include <iterator>    // istreambuf_iterator
#include <string>      // bytes
#include <utility>     // pair
#include <vector>      // the references

namespace {
std::filesystem::path out;
int written = 0;
void put(std::string const& name, char reader, std::string const& bytes) {
  nitro_fuzz_inputs::write_file(out / name, std::string(1, reader) + bytes);
  ++written;
}
std::string gzip(std::string const& bytes) {
  const auto tmp = out / ".gz-tmp";
  gzFile f = gzopen(tmp.c_str(), "wb9");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  std::ifstream in(tmp, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(tmp);
  return s;
}
std::string replace_once(std::string s, std::string const& from, std::string const& to) {
  if (auto at = s.find(from); at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  out = argv[1];
  std::filesystem::create_directories(out);
  using namespace nitro_fuzz_inputs;

  // '0': IDX
  const std::string images = valid_images(2), labels = valid_labels(5);
  put("valid-idx-images", '0', images);
  put("valid-idx-labels", '0', labels);
  put("valid-idx-labels.gz", '0', gzip(labels));
  put("valid-idx-images.gz", '0', gzip(images));
  put("valid-idx-rank4", '0', idx_bytes({1, 2, 3, 2}, "abcdefghijkl"));
  put("damaged-idx-empty", '0', "");
  put("damaged-idx-magic", '0', std::string("\x01\x02\x08\x01\0\0\0\x01" "a", 9));
  put("damaged-idx-type", '0', std::string("\0\0\x0d\x01\0\0\0\x01" "abcd", 12));
  put("damaged-idx-rank0", '0', std::string("\0\0\x08\0", 4));
  put("damaged-idx-rank5", '0', idx_bytes({1, 1, 1, 1, 1}, "a"));
  put("damaged-idx-extent0", '0', idx_bytes({0}, ""));
  put("damaged-idx-truncated", '0', images.substr(0, images.size() - 100));
  put("damaged-idx-trailing", '0', labels + "x");
  put("damaged-idx-header-cut", '0', images.substr(0, 10));
  const std::string gz = gzip(labels);
  put("damaged-idx-gzip-cut", '0', gz.substr(0, gz.size() - 6));
  std::string flipped = gz;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x55);
  put("damaged-idx-gzip-flipped", '0', flipped);
  // regressions: a 9-byte file made read_idx allocate the 2 GiB its header declares (out of memory
  // under the fuzzer), extents whose product passes 2^63 overflowed (UBSan), and a gzip stream
  // without its checksum was accepted (damaged-idx-gzip-cut)
  put("damaged-idx-declares-2gib", '0', std::string("\0\0\x08\x01\x7f\xff\xff\xff", 8));
  put("damaged-idx-declares-12mib", '0', idx_bytes({0x4000, 28, 28}, "pixels"));
  put("damaged-idx-extents-overflow", '0', idx_bytes({3, 2, 0x61626364, 0x65666768}, "ijkl"));

  // '1': the reference grammar (a bare path is accepted by the grammar: it names a file)
  for (auto const& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"valid-ref-latest-best", "latest >> best"},
           {"valid-ref-average", "latest >> Average(Last(10))"},
           {"valid-ref-average-best", " Average( Best(2) ) "},
           {"valid-ref-run-best", "fuzz-alpha >> Best(2)"},
           {"valid-ref-run-last", "fuzz-alpha >> Last(3)"},
           {"valid-ref-all", "all >> Last(2)"},
           {"valid-ref-all-best", "all >> best"},
           {"valid-ref-bare", "Best(3)"},
           {"valid-ref-latest", "latest"},
           {"valid-ref-path", "model.safetensors"},
           {"valid-ref-run-prefix", "fuzz >> latest"},
           {"damaged-ref-empty", "  "},
           {"damaged-ref-count", "Best(x)"},
           {"damaged-ref-zero", "latest >> Last(0)"},
           {"damaged-ref-average", "Average(best)"},
           {"damaged-ref-no-run", ">> best"},
           {"damaged-ref-no-checkpoint", "latest >> "},
           {"damaged-ref-long-count", "Best(1234567890123)"},
           // regressions: text too long to be a file name made weights_in_run throw std::filesystem_error
           {"valid-ref-name-too-long", std::string(300, 'a') + " >> best"},
           {"valid-ref-long-path", "runs/" + std::string(300, 'b') + ".safetensors"},
       })
    put(name, '1', text);

  // '2': manifest.json
  const std::string manifest = valid_manifest("fuzz-m");
  put("valid-manifest", '2', manifest);
  put("valid-manifest-variant", '2',
      replace_once(manifest, "\"variant\": null", "\"variant\": \"small\""));
  put("valid-manifest-sets", '2', replace_once(manifest, "\"sets\": []", "\"sets\": [[\"lr\", \"0.5\"], [\"width\", \"16\"], [\"bad\"], 7]"));
  put("damaged-manifest-cut", '2', manifest.substr(0, manifest.size() / 2));
  put("damaged-manifest-experiment", '2', replace_once(manifest, "\"experiment\": \"", "\"experiment\": \"Other"));
  put("damaged-manifest-array", '2', "[1, 2, 3]");
  put("damaged-manifest-unknown-knob", '2', replace_once(manifest, "\"sets\": []", "\"sets\": [[\"nope\", \"1\"]]"));
  put("damaged-manifest-bad-value", '2', replace_once(manifest, "\"sets\": []", "\"sets\": [[\"layers\", \"many\"]]"));
  put("damaged-manifest-width", '2', replace_once(manifest, "\"sets\": []", "\"sets\": [[\"width\", \"12\"]]"));
  put("damaged-manifest-variant", '2', replace_once(manifest, "\"variant\": null", "\"variant\": \"huge\""));
  put("manifest-types", '2', replace_once(replace_once(manifest, "\"started\": \"", "\"started\": 5, \"x\": \""), "\"selection\": {", "\"selection\": 3, \"y\": {"));

  // '3': status.json
  const std::string status = valid_status("fuzz-s");
  put("valid-status", '3', status);
  put("valid-status-running", '3', replace_once(replace_once(status, "\"finished\"", "\"running\""), "\"best\": {", "\"best\": null, \"b\": {"));
  put("damaged-status-cut", '3', status.substr(0, status.size() - 20));
  put("damaged-status-nul", '3', std::string("{\"state\":\0}", 11));
  put("damaged-status-array", '3', "[\"finished\"]");
  put("status-types", '3', "{\"state\": 7, \"step\": \"x\", \"last\": [1], \"best\": {\"metric\": 3, \"value\": \"v\"}, \"horizon\": 2}");

  // '4': text (flag byte: seq = 1 + low 4 bits; bit 4: a fortune file)
  const std::string para = "The quick brown fox\njumps over the lazy dog.\n\nA second paragraph, with caf\xc3\xa9 and \xe2\x82\xac.\n\n\n";
  std::string many;
  for (int i = 0; i < 24; ++i) many += "paragraph " + std::to_string(i) + " of some text\n\n";
  std::string fortunes;
  for (int i = 0; i < 22; ++i) fortunes += "fortune " + std::to_string(i) + "\nsays \xf0\x9f\x98\x80 something\n%\n";
  put("valid-text-paragraphs", '4', std::string(1, char(7)) + para);
  put("valid-text-many", '4', std::string(1, char(15)) + many);
  put("valid-text-fortunes", '4', std::string(1, char(16 + 3)) + fortunes);
  put("valid-text-seq1", '4', std::string(1, char(0)) + "ab\n\ncd");
  put("damaged-text-empty", '4', std::string(1, char(3)));
  put("damaged-text-short", '4', std::string(1, char(15)) + "too short");
  put("damaged-text-nul", '4', std::string(1, char(2)) + std::string("text with a NUL\0 byte in it", 27));
  put("damaged-text-latin1", '4', std::string(1, char(2)) + "caf\xe9 au lait, latin-1");
  put("damaged-text-overlong", '4', std::string(1, char(2)) + "overlong \xc0\xaf slash here");
  put("damaged-text-surrogate", '4', std::string(1, char(2)) + "surrogate \xed\xa0\x80 here ok");
  put("damaged-text-beyond", '4', std::string(1, char(2)) + "beyond \xf4\x90\x80\x80 U+10FFFF");
  put("damaged-text-cut", '4', std::string(1, char(2)) + "cut short at the end \xe2\x82");
  put("damaged-fortune-empty", '4', std::string(1, char(16)) + "%\n%\n%\n");
  put("damaged-fortune-latin1", '4', std::string(1, char(16)) + "a fortune\nin latin-1: \xe9t\xe9\n%\n");

  std::printf("%d inputs in %s\n", written, out.c_str());
  return 0;
}
