// libFuzzer target for the text and byte inputs without a fuzzer of their own (clang:
// -fsanitize=fuzzer,address,undefined): IDX files, the weights/resume reference grammar, a run's
// manifest.json and status.json, text corpora. The first byte chooses the reader (target.hpp).
//   ./fuzz_inputs -dict=tests/fuzz-inputs/inputs.dict -max_total_time=25 corpus-copy/
#include "target.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  (void)nitro_fuzz_inputs::one_input(data, size);
  return 0;
}
