// libFuzzer target for the safetensors reader and the checkpoint index parser (clang: -fsanitize=fuzzer,address,undefined).
//   ./fuzz_safetensors -max_total_time=25 new-inputs/ tests/fuzz/corpus/safetensors/
#include "target.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  (void)nitro_fuzz::one_input(data, size);
  (void)nitro_fuzz::one_index(data, size);
  return 0;
}
