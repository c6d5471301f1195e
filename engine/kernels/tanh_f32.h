// tanh(x) in plain float operations, for the tanh kernel and its fusion-program form (the tanh
// GELU of GPT-2, recurrent cells). As exp_f32: every step is one IEEE operation, the same in a
// vector lane as in scalar code, so the loops that call it vectorise without changing a bit and
// a fused body gives the kernel's bits wherever its chunks fall.
#pragma once
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/exp_f32.h"

namespace tpu {

namespace tanh_detail {

// For |x| < 1, tanh(x) = x + x^3 P(x^2): P's coefficients in powers of z = x^2, z^0 first, a
// least-squares fit of degree 7 within 1.8e-9 of tanh relatively (tools/fit_tanh.py prints them).
inline constexpr std::array<float, 8> kNear = {-0.33333334f,  0.13333312f,   -0.053963624f, 0.021830779f,
                                               -0.008701321f, 0.0032118538f, -0.0009271475f, 0.00014382882f};

// Where tanh is 1 in float (from 13 ln 2 = 9.011 on), e^2|x| is taken at 2|x| = kFarHigh at most:
// 2^k then fits one float's exponent and no clamp below is needed (2|x| >= 0).
constexpr float kFarHigh = 19.0f;

// e^y for y in [0, kFarHigh] (a NaN gives e^kFarHigh): exp_f32's steps without its clamps, 2^k
// applied as one factor (exact: no result is subnormal). Each value is exp_f32's bits.
inline float exp_far(float y) {
  float k;
  const float p = exp_reduced(y < kFarHigh ? y : kFarHigh, k);  // as vminps: a NaN y gives kFarHigh
  return p * std::bit_cast<float>((int32_t(k) + exp_detail::kBias) << 23);
}

}  // namespace tanh_detail

// |x| < 1: the fit, x + (x z) P(z) (no cancellation near 0); from 1 on 1 - 2 / (e^(2|x|) + 1)
// with x's sign (at least 0.76, where the subtraction loses little; 1 from 9.011 on). Both parts
// are computed and one is kept, so the function has no branch to stop a loop vectorising. Within
// 1.5 ulps of tanh (tests/unit/test_ops.cpp; 1.13 at most over every float).
inline float tanh_f32(float x) {
  using namespace tanh_detail;
  const float a = std::fabs(x), z = x * x;
  float p = kNear[kNear.size() - 1];
#pragma GCC unroll 8  // unrolled, the caller's loop over elements vectorises
  for (size_t n = kNear.size() - 1; n-- > 0;) p = std::fma(p, z, kNear[n]);
  const float near = std::fma(x * z, p, x);
  const float e = exp_far(a + a);
  const float far = std::copysign(1.0f - 2.0f / (e + 1.0f), x);
  return x != x || x == 0 ? x : a < 1.0f ? near : far;  // NaN and -0 as they are (the fit gives +0)
}

}  // namespace tpu
