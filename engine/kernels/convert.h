// Bulk f32 <-> bf16 conversion, vectorised. Exact: rounding is to nearest even, NaN stays a
// (quiet) NaN, infinities and subnormals convert like the scalar f32_to_bf16 in core/tensor.h.
#pragma once
#include <cstdint>

namespace tpu {

void round_to_bf16(const float* src, uint16_t* dst, int64_t n);
void widen_bf16(const uint16_t* src, float* dst, int64_t n);
// The upper halves of src, when every element is exactly a bf16 value (lower half zero);
// false as soon as a block of elements is not (dst then holds no meaningful values).
bool narrow_exact_bf16(const float* src, uint16_t* dst, int64_t n);

}  // namespace tpu
