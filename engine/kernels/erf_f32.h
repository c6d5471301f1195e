// erf(x) in plain float operations, for the erf kernel and its fusion-program form (the exact
// GELU, x/2 (1 + erf(x / sqrt 2)), of BERT and Keras's default). As exp_f32: every step is one
// IEEE operation, the same in a vector lane as in scalar code, so the loops that call it
// vectorise without changing a bit and a fused body gives the kernel's bits wherever its
// chunks fall. (The C library's erff is scalar: it took 13% of the samples of a BERT's
// training run.)
#pragma once
#include <array>
#include <cmath>

namespace tpu {

namespace erf_detail {

// erf's Maclaurin series, 2/sqrt(pi) sum_n (-1)^n x^(2n+1) / (n! (2n+1)): the coefficients of
// x^(2n+1) for 0 < n <= kTerms (n = 0's, 2/sqrt(pi), apart as a float and its rounding error, so
// that the leading term keeps its low bits). For |x| < 1 the terms left out add under 1.3e-9.
constexpr double kTwoOverSqrtPi = 1.1283791670955126;
constexpr float kLeadHi = float(kTwoOverSqrtPi), kLeadLo = float(kTwoOverSqrtPi - double(kLeadHi));
constexpr int kTerms = 10;
constexpr std::array<float, kTerms> maclaurin() {
  std::array<float, kTerms> c{};
  double factorial = 1;
  for (int n = 1; n <= kTerms; ++n) {
    factorial *= n;
    c[size_t(n - 1)] = float((n % 2 ? -1 : 1) * kTwoOverSqrtPi / (factorial * (2 * n + 1)));
  }
  return c;
}
inline constexpr std::array<float, kTerms> kNear = maclaurin();

// erf on [1, 4] in powers of u = x - 2.5 (exact in float there), u^0 first: a least-squares
// fit of degree 16 within 6.1e-10 of erf (tools/fit_erf.py prints them).
inline constexpr std::array<float, 17> kFar = {
    0.999593f,      0.0021782785f,  -0.0054457015f, 0.008350212f,  -0.008622484f, 0.0061165877f,
    -0.0027979813f, 0.00054453383f, 0.0002594749f,  -0.00025342416f, 8.03943e-05f, 7.7564455e-06f,
    -1.534835e-05f, 3.4626537e-06f, 7.88689e-07f,   -3.5129915e-07f, 1.1272014e-08f};

}  // namespace erf_detail

// |x| < 1: the series, x (2/sqrt(pi) + x^2 P(x^2)); 1 <= |x| < 4: the fit, with x's sign;
// from 4 on +-1 (erf(4) = 1 - 1.5e-8 rounds to 1). Both parts are computed and one is kept, so the function
// has no branch to stop a loop vectorising. Within 1.5 ulps of erf (tests/unit/test_ops.cpp).
inline float erf_f32(float x) {
  using namespace erf_detail;
  const float a = std::fabs(x), z = x * x;
  float p = kNear[kTerms - 1];
#pragma GCC unroll 16  // unrolled, the caller's loop over elements vectorises
  for (int n = kTerms - 2; n >= 0; --n) p = std::fma(p, z, kNear[size_t(n)]);
  const float near = std::fma(x, kLeadHi, std::fma(x, kLeadLo, x * z * p));
  const float u = (a < 1 ? 1.0f : a > 4 ? 4.0f : a) - 2.5f;
  float q = kFar[16];
#pragma GCC unroll 16
  for (int n = 15; n >= 0; --n) q = std::fma(q, u, kFar[size_t(n)]);
  const float far = std::copysign(a >= 4 || q > 1 ? 1.0f : q, x);
  return x != x || x == 0 ? x : a < 1 ? near : far;  // NaN and -0 as they are (the sum gives +0)
}

}  // namespace tpu
