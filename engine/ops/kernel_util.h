// Helpers shared by the op rows: dtype dispatch, strided copies, shape-rule checks.
#pragma once
#include <string>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/op_table.h"

namespace tpu {

// A bf16 element as generic kernels see it: it reads as a float, so arithmetic on it happens
// in f32, and storing a float result rounds to nearest even (explicit, so that mixed
// expressions never round by accident). Reference quality; the fast paths for bf16 are the
// convert and dot kernels.
struct bf16_t {
  uint16_t bits = 0;
  bf16_t() = default;
  explicit bf16_t(float f) : bits(f32_to_bf16(f)) {}
  explicit bf16_t(double d) : bits(f32_to_bf16(float(d))) {}
  explicit bf16_t(int64_t v) : bits(f32_to_bf16(float(v))) {}
  explicit bf16_t(int32_t v) : bits(f32_to_bf16(float(v))) {}
  operator float() const { return bf16_to_f32(bits); }
};
static_assert(sizeof(bf16_t) == 2);

// Calls f.template operator()<T>() with the C++ element type of `t` (bf16_t for bf16).
template <class F>
void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::f32: f.template operator()<float>(); return;
    case DType::bf16: f.template operator()<bf16_t>(); return;
    case DType::i32: f.template operator()<int32_t>(); return;
    case DType::u8:
    case DType::boolean: f.template operator()<uint8_t>(); return;
  }
}

// dst[i...] = src[i...] over `shape`, each side addressed by its own element strides.
template <class T>
void copy_strided(T* dst, std::span<const int64_t> dst_strides, const T* src,
                  std::span<const int64_t> src_strides, const Shape& shape) {
  const size_t rank = shape.size();
  if (rank == 0) {
    *dst = *src;
    return;
  }
  if (num_elements(shape) == 0) return;
  std::vector<int64_t> idx(rank, 0);
  const int64_t inner = shape[rank - 1], ds = dst_strides[rank - 1], ss = src_strides[rank - 1];
  for (;;) {
    for (int64_t i = 0; i < inner; ++i) dst[i * ds] = src[i * ss];
    size_t d = rank - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      ++idx[d];
      dst += dst_strides[d];
      src += src_strides[d];
      if (idx[d] < shape[d]) break;
      dst -= dst_strides[d] * shape[d];
      src -= src_strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

inline std::string type_of(const Graph& g, NodeId id) {
  const Node& n = g.at(id);
  return type_str(n.dtype, n.shape);
}

inline std::string operands_str(const Graph& g, const Node& n) {
  std::string s;
  for (size_t i = 0; i < n.in.size(); ++i) s += (i ? ", " : "") + type_of(g, n.in[i]);
  return s;
}

// Normalises an axis list against a rank: every axis in [0, rank), strictly increasing.
inline bool valid_axes(std::span<const int64_t> axes, size_t rank) {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= int64_t(rank) || (i && axes[i] <= axes[i - 1])) return false;
  return true;
}

// FLOPs per output element, and the bytes read and written as a TPU moves them (tile-padded).
inline Cost elementwise_cost(const Graph& g, const Node& n, double flops_per_element = 1) {
  double bytes = double(tpu_padded_elements(n.shape)) * double(size_of(n.dtype));
  for (NodeId i : n.in) bytes += double(tpu_padded_elements(g.at(i).shape)) * double(size_of(g.at(i).dtype));
  return {flops_per_element * double(num_elements(n.shape)), bytes};
}
inline Cost movement_cost(const Graph& g, const Node& n) { return elementwise_cost(g, n, 0); }

}  // namespace tpu
