// Reading IDX files (the MNIST family's format), plain or gzip-compressed.
//
//   tpu::Tensor images = tpu::read_idx("/data/train-images-idx3-ubyte.gz");  // u8[60000,28,28]
//
// Layout: two zero bytes, a type code, the number of dimensions, one big-endian u32 per
// dimension, then the elements big-endian and row-major. Element types map to ours:
// u8 -> u8; i8, i16, i32 -> i32; f32, f64 -> f32. A path ending in ".gz" is decompressed.
// Every defect (missing or unreadable file, bad header, truncated or extra data, corrupt
// gzip) throws tpu::Error with a one-line message that starts with the path.
#pragma once
#include <string>

#include "core/tensor.h"

namespace tpu {

Tensor read_idx(const std::string& path);

}  // namespace tpu
