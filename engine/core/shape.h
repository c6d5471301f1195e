// Static shapes: a list of dimension sizes, row-major.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/small_vec.h"

namespace tpu {

// Dimension lists (shapes, axes, permutations) are short: up to four are kept inline.
using Dims = SmallVec<int64_t, 4>;
using Shape = Dims;

inline int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// Elements a value of this shape occupies in TPU memory: the two minor dimensions padded to
// multiples of 8 and 128 (a scalar still fills one 8x128 tile).
inline int64_t tpu_padded_elements(const Shape& s) {
  Shape p = s.empty() ? Shape{8, 128} : s;
  p.back() = (p.back() + 127) / 128 * 128;
  if (p.size() >= 2) p[p.size() - 2] = (p[p.size() - 2] + 7) / 8 * 8;
  return num_elements(p);
}

// Row-major strides in elements.
inline std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = int(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

}  // namespace tpu
