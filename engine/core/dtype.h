// Element types. bf16 is declared so the IR and printer already know it; its kernels come later.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace tpu {

enum class DType : uint8_t { f32, bf16, i32, u8, boolean };

// An integer element from a float value: truncated, saturating at the type's range, NaN as 0
// (an out-of-range conversion would be undefined; -inf, the identity of an empty max, gets here).
template <class T>
T saturate(double v) {
  if (v != v) return 0;
  if (v <= double(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return T(v);
}

constexpr size_t size_of(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::u8: return 1;
    case DType::boolean: return 1;
  }
  return 0;
}

constexpr std::string_view name_of(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
  }
  return "?";
}

inline std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::f32, DType::bf16, DType::i32, DType::u8, DType::boolean})
    if (name_of(t) == s) return t;
  return std::nullopt;
}

constexpr bool is_float(DType t) { return t == DType::f32 || t == DType::bf16; }
constexpr bool is_integer(DType t) { return t == DType::i32 || t == DType::u8; }

}  // namespace tpu
