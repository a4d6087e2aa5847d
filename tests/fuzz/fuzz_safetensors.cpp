// libFuzzer target for the safetensors reader (clang: -fsanitize=fuzzer,address,undefined).
//   ./fuzz_safetensors -max_total_time=25 new-inputs/ tests/fuzz/corpus/safetensors/
#include "target.hpp"

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  (void)nitro_fuzz::one_input(data, size);
  return 0;
}
