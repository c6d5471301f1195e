// libFuzzer target: the .npy reader (engine/data/npy.cpp), from memory.
#include "data/npy.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_only_tpu_errors([&] { tpu::parse_npy(fuzz::text(data, size), "fuzz.npy"); });
  return 0;
}
