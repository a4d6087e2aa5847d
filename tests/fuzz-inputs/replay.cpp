// Replays the committed corpus through the readers with any compiler: files named valid-* must be
// accepted, files named damaged-* refused with a nitro::error, and nothing may crash (other names,
// such as regression-*, only must not crash). Each file's first byte chooses its reader (target.hpp).
//   fuzz_replay_inputs tests/fuzz-inputs/corpus
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
  int per_reader[5] = {};
  for (auto const& p : files) {
    std::ifstream in(p, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string name = p.filename().string();
    auto const* data = reinterpret_cast<std::uint8_t const*>(bytes.data());
    const bool accepted = nitro_fuzz_inputs::one_input(data, bytes.size());
    if (!bytes.empty()) ++per_reader[nitro_fuzz_inputs::reader_of(data[0])];
    const bool want_valid = name.rfind("valid-", 0) == 0, want_damaged = name.rfind("damaged-", 0) == 0;
    valid += want_valid;
    damaged += want_damaged;
    if ((want_valid && !accepted) || (want_damaged && accepted)) {
      std::printf("WRONG: %s was %s\n", name.c_str(), accepted ? "accepted" : "refused");
      ++wrong;
    }
  }
  std::printf("%zu inputs (%d valid, %d damaged), %d wrong; by reader:", files.size(), valid, damaged, wrong);
  bool every_reader = true;
  for (int r = 0; r < 5; ++r) {
    std::printf(" %s %d", nitro_fuzz_inputs::reader_names[r], per_reader[r]);
    every_reader = every_reader && per_reader[r] > 0;
  }
  std::printf("\n");
  return (wrong == 0 && valid > 0 && damaged > 0 && every_reader) ? 0 : 1;
}
