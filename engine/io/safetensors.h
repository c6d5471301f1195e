// Reading and writing the safetensors format: a table of named tensors and a string map.
//
//   tpu::TensorFile f;
//   f.tensors.push_back({"dense.kernel", kernel});
//   f.metadata["format"] = "tputrain";
//   tpu::write_safetensors("model.safetensors", f);   // atomic: temp file, fsync, rename
//   tpu::TensorFile g = tpu::read_safetensors("model.safetensors");
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON (an object: one entry
// {"dtype", "shape", "data_offsets": [begin, end]} per tensor, and an optional "__metadata__"
// object of strings), then the data: each tensor's raw little-endian bytes at
// [begin, end) relative to the end of the header. dtypes: F32, BF16, I32, U8, BOOL.
//
// Reading trusts nothing in the file: the header length is bounded (and must fit in the file),
// the JSON must be well formed with no duplicate keys, each entry needs a known dtype, a shape
// of non-negative sizes whose byte size equals its offsets' span, and the tensors must tile the
// data exactly (in range, no overlap, no gap, nothing after). BOOL bytes must be 0 or 1.
// Allocations never exceed the file's size. Every defect throws tpu::Error with a one-line
// message that starts with the path and names the tensor.
//
// Writing orders tensors by element size (largest first) then name, so every tensor is aligned
// to its element size, and pads the header with spaces to a multiple of 8 bytes.
#pragma once
#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tpu {

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

struct TensorFile {
  std::vector<NamedTensor> tensors;  // read: in data order
  std::map<std::string, std::string> metadata;
};

// Largest header accepted (as the format's reference implementation: 100 MB).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

TensorFile read_safetensors(const std::string& path);
// The same checks on bytes in memory; `path` only names them in messages.
TensorFile parse_safetensors(std::span<const std::byte> bytes, const std::string& path);

void write_safetensors(const std::string& path, const TensorFile& file);
// The bytes write_safetensors would write.
std::string encode_safetensors(const TensorFile& file, const std::string& path = "<memory>");

}  // namespace tpu
