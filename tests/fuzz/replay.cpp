// Replays the committed corpus through the reader with any compiler: files named valid-* must be
// accepted, files named damaged-* refused with a nitro::error, and nothing may crash (*.json files
// are checkpoint indexes, the others safetensors files).
//   fuzz_replay_safetensors tests/fuzz/corpus/safetensors
#include "target.hpp"

#include <algorithm>   // sort
#include <cstdio>      // report
#include <filesystem>  // the corpus
#include <fstream>     // reading
#include <iterator>    // istreambuf_iterator
#include <string>      // names
#include <vector>      // files

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  std::vector<std::filesystem::path> files;
  for (auto const& e : std::filesystem::directory_iterator(argv[1]))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  int wrong = 0, valid = 0, damaged = 0;
  for (auto const& p : files) {
    std::ifstream in(p, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string name = p.filename().string();
    auto const* data = reinterpret_cast<std::uint8_t const*>(bytes.data());
    const bool index = name.ends_with(".json");
    const bool accepted = index ? nitro_fuzz::one_index(data, bytes.size()) : nitro_fuzz::one_input(data, bytes.size());
    if (!index) (void)nitro_fuzz::one_index(data, bytes.size());
    const bool want_valid = name.rfind("valid-", 0) == 0, want_damaged = name.rfind("damaged-", 0) == 0;
    valid += want_valid;
    damaged += want_damaged;
    if ((want_valid && !accepted) || (want_damaged && accepted)) {
      std::printf("WRONG: %s was %s\n", name.c_str(), accepted ? "accepted" : "refused");
      ++wrong;
    }
  }
  std::printf("%zu inputs (%d valid, %d damaged), %d wrong\n", files.size(), valid, damaged, wrong);
  return (wrong == 0 && valid > 0 && damaged > 0) ? 0 : 1;
}
