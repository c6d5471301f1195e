// e^x in plain float operations, for the exp and sigmoid kernels and their fusion-program
// forms. Every step is one IEEE operation (a multiply-add is written as fma), the same in a
// vector lane as in scalar code: the loops that call it vectorise without changing a bit, and a
// fused body gives the unfused kernel's bits wherever its chunks start and end.
#pragma once
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

namespace tpu {

namespace exp_detail {

// e^x = 2^k e^r with k = round(x / ln 2) and r = x - k ln 2, taken in two parts (Cody and
// Waite) so r keeps its low bits; e^r from its Taylor series to r^7 (|r| <= ln 2 / 2: the
// truncation is under 5e-9, a tenth of an ulp); 2^k applied as two factors so a result down in
// the subnormals is rounded once. Past [kLow, kHigh] e^x is 0 or infinite in float; the clamp
// keeps k within the two factors' range. (The native fusion code reads these too.)
constexpr float kLog2e = 1.44269502f, kLn2Hi = 0.693147182f, kLn2Lo = -1.90465421e-09f;
constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
constexpr float kLow = -104.0f, kHigh = 89.0f;
constexpr int kBias = 127;  // a float's exponent bias
// 1 / n! for n = 7 down to 0, Horner's order.
inline constexpr std::array<float, 8> kTaylor = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24,
                                                 1.0f / 6,    0.5f,        1.0f,        1.0f};

}  // namespace exp_detail

// e^r for c's k and r (exp_detail above): the steps every e^c shares; k is set to round(c / ln 2).
inline float exp_reduced(float c, float& k) {
  using namespace exp_detail;
  k = std::fma(c, kLog2e, kRound) - kRound;
  const float r = std::fma(-k, kLn2Lo, std::fma(-k, kLn2Hi, c));
  float p = kTaylor[0];
#pragma GCC unroll 8  // unrolled, the caller's loop over elements vectorises
  for (size_t n = 1; n < kTaylor.size(); ++n) p = std::fma(p, r, kTaylor[n]);
  return p;
}

// Within 2 ulps of std::exp (tests/unit/test_ops.cpp).
inline float exp_f32(float x) {
  using namespace exp_detail;
  const bool nan = x != x;
  const float c = nan ? 0.0f : x < kLow ? kLow : x > kHigh ? kHigh : x;
  float k;
  const float p = exp_reduced(c, k);
  const int32_t ki = int32_t(k), k1 = ki >> 1, k2 = ki - k1;  // each within [-75, 64]
  const float s1 = std::bit_cast<float>((k1 + kBias) << 23), s2 = std::bit_cast<float>((k2 + kBias) << 23);
  const float e = p * s1 * s2;
  return nan ? x : e;
}

// The logistic function 1 / (1 + e^-x), as the reference kernel writes it; a NaN is returned as
// it is (scalar code may compute 1 + (-x) as 1 - x, which gives a NaN the other sign). Where the
// compiler contracts 1 + p * s1 * s2 into a multiply-add, the result is the same: the product of
// p and two powers of two is exact.
inline float sigmoid_f32(float x) { return x != x ? x : 1.0f / (1.0f + exp_f32(-x)); }

}  // namespace tpu
