// Static shapes: a list of dimension sizes, row-major.
//
// Every shape is born through one rule (shape_fault): no negative dimension, and fewer than
// 2^40 elements (DESIGN section 7), with the dimensions other than 0 also multiplying to less
// than 2^40, so that an empty tensor's strides cannot overflow either. Under that bound every
// size computed from a shape stays far inside int64: element counts, byte sizes (8-byte
// elements: < 2^43), strides, and tpu_padded_elements (< 2^50).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/small_vec.h"

namespace tpu {

// Dimension lists (shapes, axes, permutations) are short: up to four are kept inline.
using Dims = SmallVec<int64_t, 4>;
using Shape = Dims;

// A tensor has fewer elements than this.
constexpr int64_t kMaxElements = int64_t(1) << 40;

// "" when the dims make a valid shape, else what is wrong, worded to follow the shape:
// "has a negative dimension", "is too large: a tensor has fewer than 2^40 elements".
std::string shape_fault(std::span<const int64_t> dims);

inline std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// "" or "shape [a,b] <fault>".
inline std::string shape_problem(const Shape& s) {
  std::string fault = shape_fault(s);
  return fault.empty() ? fault : "shape " + shape_str(s) + " " + fault;
}

// Throws tpu::Error "<call>: shape [a,b] <fault>" when the shape breaks the rule.
void check_shape(const Shape& s, std::string_view call);

// Only for shapes that passed the rule (or that describe existing tensors).
inline int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
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
