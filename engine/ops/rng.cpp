// The rng row: counter-based random numbers. The key operand i32[2] holds a 64-bit stream
// key (high word first); element i of a draw is a hash of (key, i), so values depend only on
// the key and the element, never on threads or on what else the graph computes.
// The fold kind derives new keys instead: one per element of an i32 data operand. The
// bernoulli kind compares each element of the uniform draw with p, where it is made.
#include <algorithm>
#include <cmath>
// AVX-512DQ has the 64-bit multiply and conversion: there the plain loop vectorises.
#if defined(__AVX2__) && !defined(__AVX512DQ__)
#include <immintrin.h>
#define TPU_RNG_AVX2 1
#endif

#include "ops/kernel_util.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

RngKind kind_of(const Node& n) { return n.rng_kind(); }

std::string shape_rng(const Graph& g, Node& n) {
  const Node& key = g.at(n.in.at(0));
  if (key.dtype != DType::i32 || key.shape != Shape{2} || n.attrs.axis < 0 || n.attrs.axis > int64_t(RngKind::bernoulli))
    return "rng needs a key i32[2] and a kind, got " + operands_str(g, n);
  const bool fold = kind_of(n) == RngKind::fold, bernoulli = kind_of(n) == RngKind::bernoulli;
  if (bernoulli && (n.in.size() != 2 || g.at(n.in[1]).dtype != DType::f32 || !g.at(n.in[1]).shape.empty()))
    return "rng bernoulli needs a key i32[2] and a probability f32[], got " + operands_str(g, n);
  if (!bernoulli && (n.in.size() != (fold ? 2u : 1u) || (fold && g.at(n.in[1]).dtype != DType::i32)))
    return fold ? "rng fold needs a key i32[2] and i32 data, got " + operands_str(g, n)
                : "rng takes only a key, got " + operands_str(g, n);
  n.dtype = kind_of(n) == RngKind::bits || fold ? DType::i32 : bernoulli ? DType::boolean : DType::f32;
  if (fold) {
    n.shape = g.at(n.in[1]).shape;
    n.shape.push_back(2);
  }
  for (int64_t d : n.shape)
    if (d < 0) return "rng: negative dimension in " + shape_str(n.shape);
  return "";
}

uint64_t mix(uint64_t z) {  // splitmix64's finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t key_of(const Tensor& k) {
  const int32_t* w = k.data<int32_t>();
  return uint64_t(uint32_t(w[0])) << 32 | uint32_t(w[1]);
}

uint64_t bits(uint64_t key, uint64_t i) { return mix(key ^ mix(i)); }

double unit(uint64_t key, uint64_t i) { return double(bits(key, i) >> 11) * 0x1.0p-53; }  // [0, 1)

float unit_f32(uint64_t key, uint64_t i) {
  float u = float(unit(key, i));
  return u < 1.0f ? u : 0x1.fffffep-1f;  // rounding may reach 1
}

#ifdef TPU_RNG_AVX2
// The uniform draw four elements at a time: AVX2 has no 64-bit multiply or 64-bit integer to
// double conversion, so the scalar loop did not vectorise (a dropout mask over a transformer's
// 64x4x128x128 attention took 12 ms a step, 15% of it). The same arithmetic, exactly: the
// products' low 64 bits from 32-bit halves, the 53 bits as a double from its two halves.
__m256i times(__m256i z, uint64_t c) {  // z * c, modulo 2^64
  const __m256i c_lo = _mm256_set1_epi64x(int64_t(c & 0xffffffffu)), c_hi = _mm256_set1_epi64x(int64_t(c >> 32));
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(z, 32), c_lo), _mm256_mul_epu32(z, c_hi));
  return _mm256_add_epi64(_mm256_mul_epu32(z, c_lo), _mm256_slli_epi64(cross, 32));
}

__m256i mix4(__m256i z) {  // mix, lane by lane
  z = _mm256_add_epi64(z, _mm256_set1_epi64x(int64_t(0x9e3779b97f4a7c15ull)));
  z = times(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), 0xbf58476d1ce4e5b9ull);
  z = times(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), 0x94d049bb133111ebull);
  return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

// Lanes below 2^52 as doubles, exactly: their bits under the exponent of 2^52, less 2^52.
__m256d exact_double(__m256i x) {
  const __m256d two52 = _mm256_set1_pd(0x1.0p52);
  return _mm256_sub_pd(_mm256_or_pd(_mm256_castsi256_pd(x), two52), two52);
}

// Elements [begin, end) of a uniform draw, as unit_f32 gives them, into o[0 .. end - begin).
void uniform_avx2(uint64_t key, int64_t begin, int64_t end, float* o) {
  const __m256i k = _mm256_set1_epi64x(int64_t(key)), step = _mm256_set1_epi64x(4);
  __m256i i = _mm256_setr_epi64x(begin, begin + 1, begin + 2, begin + 3);
  int64_t e = begin;
  for (; e + 4 <= end; e += 4, i = _mm256_add_epi64(i, step)) {
    const __m256i b = _mm256_srli_epi64(mix4(_mm256_xor_si256(k, mix4(i))), 11);  // 53 bits
    const __m256d d = _mm256_add_pd(_mm256_mul_pd(exact_double(_mm256_srli_epi64(b, 32)), _mm256_set1_pd(0x1.0p32)),
                                    exact_double(_mm256_and_si256(b, _mm256_set1_epi64x(0xffffffff))));
    const __m128 u = _mm256_cvtpd_ps(_mm256_mul_pd(d, _mm256_set1_pd(0x1.0p-53)));
    _mm_storeu_ps(o + (e - begin), _mm_min_ps(u, _mm_set1_ps(0x1.fffffep-1f)));  // rounding may reach 1
  }
  for (; e < end; ++e) o[e - begin] = unit_f32(key, uint64_t(e));
}
#endif

// Elements [begin, end) of a uniform draw, as unit_f32 gives them, into o[0 .. end - begin), in
// the widest vectors the build has: with AVX-512DQ's 64-bit multiplies, 512-bit ones do the same
// work in half the instructions of the 256-bit ones the compiler otherwise prefers.
#ifdef __AVX512DQ__
__attribute__((noinline, target("prefer-vector-width=512")))  // inlined, it lost the width
#endif
void uniform_loop(uint64_t key, int64_t begin, int64_t end, float* o) {
  for (int64_t e = begin; e < end; ++e) o[e - begin] = unit_f32(key, uint64_t(e));
}

// Elements [begin, end) of a bernoulli draw: unit_f32 below p, as 0 or 1, in one loop (vector
// code with AVX-512DQ's 64-bit multiplies).
#ifdef __AVX512DQ__
__attribute__((noinline, target("prefer-vector-width=512")))
#endif
void bernoulli_loop(uint64_t key, float p, int64_t begin, int64_t end, uint8_t* o) {
  for (int64_t e = begin; e < end; ++e) o[e] = unit_f32(key, uint64_t(e)) < p;
}

// Elements [begin, end) of a uniform draw into o[0 .. end - begin): in vectors (AVX2 code
// where the build has AVX2 but not AVX-512DQ), or (the reference) in the plain loop.
void uniform_range(uint64_t key, int64_t begin, int64_t end, float* o, bool vectors) {
#ifdef TPU_RNG_AVX2
  if (vectors) return uniform_avx2(key, begin, end, o);
#endif
  if (vectors) return uniform_loop(key, begin, end, o);
  for (int64_t e = begin; e < end; ++e) o[e - begin] = unit_f32(key, uint64_t(e));
}

// Box-Muller on counters 2c and 2c+1 (c = 64 i + attempt); truncated: resample |z| > 2.
float normal(uint64_t key, uint64_t i, bool truncated) {
  double z = 0;
  for (uint64_t attempt = 0; attempt < 64; ++attempt) {
    const uint64_t c = i * 64 + attempt;
    const double u1 = 1.0 - unit(key, 2 * c), u2 = unit(key, 2 * c + 1);
    z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
    if (!truncated || std::fabs(z) <= 2.0) break;
  }
  return float(truncated ? std::clamp(z, -2.0, 2.0) : z);
}

// Elements [begin, end) of the draw: one loop per kind, so the uniform and bits loops (the
// dropout masks of a step) compile to vector code; `vectors`: the uniform one as AVX2 code
// where the build has AVX2 but not AVX-512DQ (the reference runs the plain loop).
void fill(const Node& n, std::span<const Tensor* const> in, Tensor& out, int64_t begin, int64_t end, bool vectors) {
  const uint64_t key = key_of(*in[0]);
  switch (kind_of(n)) {
    case RngKind::uniform: return uniform_range(key, begin, end, out.data<float>() + begin, vectors);
    case RngKind::bernoulli: {  // the uniform draw compared to p: in one loop, or (AVX2 code, the reference) in blocks held in cache
      const float p = in[1]->data<float>()[0];
      uint8_t* o = out.data<uint8_t>();
#ifndef TPU_RNG_AVX2
      if (vectors) return bernoulli_loop(key, p, begin, end, o);
#endif
      constexpr int64_t kBlock = 1024;
      float u[kBlock];
      for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t n = std::min(kBlock, end - b);
        uniform_range(key, b, b + n, u, vectors);
        for (int64_t j = 0; j < n; ++j) o[b + j] = u[j] < p;
      }
      return;
    }
    case RngKind::normal:
    case RngKind::truncated_normal: {
      const bool truncated = kind_of(n) == RngKind::truncated_normal;
      float* o = out.data<float>();
      for (int64_t e = begin; e < end; ++e) o[e] = normal(key, uint64_t(e), truncated);
      return;
    }
    case RngKind::bits: {
      int32_t* o = out.data<int32_t>();
      for (int64_t e = begin; e < end; ++e) o[e] = int32_t(uint32_t(bits(key, uint64_t(e)) >> 32));
      return;
    }
    case RngKind::fold: {
      const int32_t* data = in[1]->data<int32_t>();
      int32_t* o = out.data<int32_t>();
      for (int64_t e = begin; e < end; ++e) {
        const uint64_t derived = mix(key ^ mix(uint64_t(int64_t(data[e / 2])) + 0x632be59bd9b4e019ull));
        o[e] = int32_t(uint32_t(e % 2 == 0 ? derived >> 32 : derived));
      }
      return;
    }
  }
}

void ref_rng(const Node& n, std::span<const Tensor* const> in, Tensor& out) { fill(n, in, out, 0, out.size(), false); }

// The same elements in fixed chunks spread over the thread pool.
void fast_rng(const Node& n, std::span<const Tensor* const> in, Tensor& out) {
  constexpr int64_t kChunk = 16384;
  const int64_t total = out.size();
  parallel_for((total + kChunk - 1) / kChunk, [&](int64_t t) {
    fill(n, in, out, t * kChunk, std::min(total, (t + 1) * kChunk), true);
  });
}

Cost cost_rng(const Graph& g, const Node& n) {
  Cost c = movement_cost(g, n);
  c.flops = 12.0 * double(num_elements(n.shape));  // two hashes and a conversion per element (and a compare)
  return c;
}

}  // namespace

extern const OpInfo rng_row = {Op::rng, shape_rng, ref_rng, fast_rng, nullptr, cost_rng};

}  // namespace tpu
