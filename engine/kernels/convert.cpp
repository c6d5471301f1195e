#include "kernels/convert.h"

#include <algorithm>
#include <bit>

namespace tpu {

// Plain loops over the bit patterns that the compiler turns into SIMD code; the arithmetic
// is the scalar f32_to_bf16's, so both agree bit for bit.
void round_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(src[i]);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    dst[i] = uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

void widen_bf16(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(uint32_t(src[i]) << 16);
}

bool narrow_exact_bf16(const float* src, uint16_t* dst, int64_t n) {
  constexpr int64_t kBlock = 4096;
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    uint32_t low = 0;
    for (int64_t i = i0; i < std::min(n, i0 + kBlock); ++i) {
      const uint32_t u = std::bit_cast<uint32_t>(src[i]);
      low |= u & 0xffffu;
      dst[i] = uint16_t(u >> 16);
    }
    if (low) return false;
  }
  return true;
}

}  // namespace tpu
