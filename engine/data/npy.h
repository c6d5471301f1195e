// Reading .npy files (format versions 1.0, 2.0 and 3.0).
//
//   tpu::Tensor x = tpu::read_npy("train_x.npy");   // '<f8' (60000, 784) -> f32[60000,784]
//
// Layout: the magic "\x93NUMPY", a major and minor version byte, the header length (u16 in
// version 1, u32 in versions 2 and 3, little-endian), a header holding a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }, then the elements in C order.
// Element types map to ours: f2, f4, f8 -> f32; i1, i2, i4, i8, u2, u4, u8 -> i32 (64-bit and
// unsigned 32-bit values must fit); u1 -> u8; b1 -> bool. Either byte order ('<', '>', '|'
// for one-byte types, '=' native). Fortran-ordered arrays, structured, string and object
// dtypes are refused. Every defect (missing file, bad magic or version, malformed or
// truncated header, shape and data size that disagree, values out of range) throws
// tpu::Error with a one-line message that starts with the path.
#pragma once
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace tpu {

Tensor read_npy(const std::string& path);

// The same from bytes in memory; `name` starts the error messages.
Tensor parse_npy(std::string_view bytes, const std::string& name);

}  // namespace tpu
