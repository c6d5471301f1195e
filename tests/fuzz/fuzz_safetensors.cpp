// libFuzzer target: the safetensors reader (engine/io/safetensors.cpp). Whatever it accepts
// must survive a write and read back unchanged.
#include <cstring>

#include "fuzz_common.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::expect_only_tpu_errors([&] {
    auto bytes = std::as_bytes(std::span(data, size));
    tpu::TensorFile f = tpu::parse_safetensors(bytes, "fuzz.safetensors");
    std::string again = tpu::encode_safetensors(f);
    tpu::TensorFile g = tpu::parse_safetensors(std::as_bytes(std::span(again.data(), again.size())), "again");
    if (g.metadata != f.metadata || g.tensors.size() != f.tensors.size()) fuzz::finding("round trip changed the file");
    for (const tpu::NamedTensor& t : f.tensors) {
      bool found = false;
      for (const tpu::NamedTensor& u : g.tensors) {
        found = found || (u.name == t.name && u.tensor.same_type(t.tensor) &&
                          std::memcmp(u.tensor.raw(), t.tensor.raw(), t.tensor.bytes()) == 0);
      }
      if (!found) fuzz::finding("round trip changed tensor " + t.name);
    }
  });
  return 0;
}
