#include "kernels/gemm_packed.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "kernels/onednn.h"
#include "kernels/register_tile.h"
#include "kernels/simd.h"

namespace tpu {

namespace {

using namespace register_tile;

// Depth of a block of the inner dimension: its B strips (kDepth x kCols floats, 16 KiB with
// AVX2) stay in L1 while a block of rows of A streams past; at most kBlockRows rows of A
// (kBlockRows x kDepth floats, 144 KiB) are packed at a time, to stay in L2.
constexpr int64_t kDepth = 256;
constexpr int64_t kBlockRows = 144;
static_assert(kBlockRows % kRows == 0);

// The depth of every block of a K-long inner dimension: as even as possible, so no block is a
// short remainder (K = 784 gives four blocks of 196, not three of 256 and one of 16).
int64_t block_depth(int64_t k) {
  const int64_t blocks = (k + kDepth - 1) / kDepth;
  return (k + blocks - 1) / blocks;
}

// Packing reads rows of an operand a product's width apart, from memory or a shared cache;
// it asks for the row kPrefetchRows ahead, line by line, as it copies one.
constexpr int64_t kPrefetchRows = 8;
void prefetch_row(const float* row, int64_t n) {
  for (int64_t i = 0; i < n; i += 64 / sizeof(float)) __builtin_prefetch(row + i);
}

// One strip of kRows rows of a row-major A (rows lda apart) over depth d. With AVX, 8 values
// of each row at a time are turned in registers; each store then writes 8 - kRows floats past
// the q it is for, which the next store (or the next strip, or the buffer's slack) overwrites.
void pack_a_strip(const float* src, int64_t lda, int64_t d, float* dst) {
  int64_t q = 0;
#ifdef __AVX__
  static_assert(kRows <= 8);
  for (; q + 8 <= d; q += 8) {
    __m256 r[8];
    for (int i = 0; i < 8; ++i) r[i] = i < kRows ? _mm256_loadu_ps(src + i * lda + q) : _mm256_setzero_ps();
    simd::transpose8x8(r);
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + (q + j) * kRows, r[j]);
  }
#endif
  for (; q < d; ++q)
    for (int r = 0; r < kRows; ++r) dst[q * kRows + r] = src[r * lda + q];
}
constexpr int64_t kSlack = 8;  // floats past the last strip that pack_a_strip may write

// Rows [i0, i0 + h) of op(A), depth [p0, p0 + d), into strips of kRows rows: strip r holds, for
// each q in order, the kRows values op(A)[i0 + r * kRows + ..][p0 + q] (zero past row h).
void pack_a(const GemmShape& s, const float* a, int64_t i0, int64_t h, int64_t p0, int64_t d, float* dst) {
  const int64_t whole = h / kRows * kRows;  // rows in whole strips
  if (s.ta) {  // A is [K, M]: row by row of the stored A, each row's values in order
    for (int64_t q = 0; q < d; ++q) {
      const float* src = a + (p0 + q) * s.m + i0;
      if (p0 + q + kPrefetchRows < s.k) prefetch_row(src + kPrefetchRows * s.m, whole);
      for (int64_t r0 = 0; r0 < whole; r0 += kRows) std::memcpy(dst + r0 * d + q * kRows, src + r0, sizeof(float) * kRows);
    }
  } else {
    for (int64_t r0 = 0; r0 < whole; r0 += kRows) pack_a_strip(a + (i0 + r0) * s.k + p0, s.k, d, dst + r0 * d);
  }
  if (whole == h) return;
  float* last = dst + whole * d;  // the last strip: its rows past h are zero
  std::fill(last, last + kRows * d, 0.0f);
  for (int64_t r = 0; r < h - whole; ++r)
    for (int64_t q = 0; q < d; ++q) last[q * kRows + r] = s.ta ? a[(p0 + q) * s.m + i0 + whole + r] : a[(i0 + whole + r) * s.k + p0 + q];
}

// One strip of kCols columns of op(B) from kCols rows of the stored B (rows ldb apart) over
// depth d. With AVX, blocks of 8 rows by 8 values of q are turned in registers.
void pack_b_strip_transposed(const float* src, int64_t ldb, int64_t d, float* dst) {
  int64_t q = 0;
#ifdef __AVX__
  static_assert(kCols % 8 == 0);
  for (; q + 8 <= d; q += 8)
    for (int c0 = 0; c0 < kCols; c0 += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + (c0 + i) * ldb + q);
      simd::transpose8x8(r);
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + (q + j) * kCols + c0, r[j]);
    }
#endif
  for (; q < d; ++q)
    for (int c = 0; c < kCols; ++c) dst[q * kCols + c] = src[c * ldb + q];
}

// Columns [j0, j0 + w) of op(B), depth [p0, p0 + d), into strips of kCols columns: strip c
// holds, for each q in order, the kCols values op(B)[p0 + q][j0 + c * kCols + ..] (zero past w).
void pack_b(const GemmShape& s, const float* b, int64_t j0, int64_t w, int64_t p0, int64_t d, float* dst) {
  const int64_t whole = w / kCols * kCols;  // columns in whole strips
  if (!s.tb) {  // B is [K, N]: row by row, each row's columns in order (read as they lie)
    for (int64_t q = 0; q < d; ++q) {
      const float* src = b + (p0 + q) * s.n + j0;
      if (p0 + q + kPrefetchRows < s.k) prefetch_row(src + kPrefetchRows * s.n, whole);
      for (int64_t c0 = 0; c0 < whole; c0 += kCols)
        for (int v = 0; v < kVecs; ++v) store(dst + c0 * d + q * kCols + v * kLanes, load(src + c0 + v * kLanes));
    }
  } else {  // B is [N, K]: each strip from its kCols rows of the stored B
    for (int64_t c0 = 0; c0 < whole; c0 += kCols) pack_b_strip_transposed(b + (j0 + c0) * s.k + p0, s.k, d, dst + c0 * d);
  }
  if (whole == w) return;
  float* last = dst + whole * d;  // the last strip: its columns past w are zero
  std::fill(last, last + kCols * d, 0.0f);
  for (int64_t c = 0; c < w - whole; ++c)
    for (int64_t q = 0; q < d; ++q) last[q * kCols + c] = s.tb ? b[(j0 + whole + c) * s.k + p0 + q] : b[(p0 + q) * s.n + j0 + whole + c];
}

// The register tile at c (rows ldc apart): c = (first ? 0 : c) + the strips' product over
// depth d, one fused multiply-add per q in order.
void full_tile(int64_t d, const float* a, const float* b, float* c, int64_t ldc, bool first) {
  Vec acc[kRows][kVecs];
  for (int i = 0; i < kRows; ++i)
    for (int v = 0; v < kVecs; ++v) acc[i][v] = first ? Vec{} : load(c + i * ldc + v * kLanes);
#pragma GCC unroll 4
  for (int64_t q = 0; q < d; ++q, a += kRows, b += kCols) {
    Vec row[kVecs];
    for (int v = 0; v < kVecs; ++v) row[v] = load(b + v * kLanes);
    for (int i = 0; i < kRows; ++i) {
      const float x = a[i];
      for (int v = 0; v < kVecs; ++v) acc[i][v] += x * row[v];
    }
  }
  for (int i = 0; i < kRows; ++i)
    for (int v = 0; v < kVecs; ++v) store(c + i * ldc + v * kLanes, acc[i][v]);
}

// A register tile of which only rows x cols lie inside C: computed in a full-size copy, so
// each stored element gets exactly the arithmetic it would get in a whole tile.
void edge_tile(int64_t d, const float* a, const float* b, float* c, int64_t ldc, bool first, int64_t rows,
               int64_t cols) {
  float tile[kRows * kCols] = {};  // lanes past C: computed, never stored
  for (int64_t i = 0; i < rows && !first; ++i) std::copy_n(c + i * ldc, cols, tile + i * kCols);
  full_tile(d, a, b, tile, kCols, first);
  for (int64_t i = 0; i < rows; ++i) std::copy_n(tile + i * kCols, cols, c + i * ldc);
}

// Packed strips, per thread, reused from call to call.
struct Strips {
  std::vector<float> a, b;
};

Strips& strips(int64_t d, int64_t w) {
  thread_local Strips st;
  const size_t na = size_t(kBlockRows * d + kSlack), nb = size_t((w + kCols - 1) / kCols * kCols * d);
  if (st.a.size() < na) st.a.resize(na);
  if (st.b.size() < nb) st.b.resize(nb);
  return st;
}

std::atomic<PackedGemm> chosen{PackedGemm::automatic};

}  // namespace

void set_packed_gemm(PackedGemm p) { chosen = p; }

bool packed_gemm_used() {
  switch (chosen.load()) {
    case PackedGemm::always: return true;
    case PackedGemm::never: return false;
    case PackedGemm::automatic: break;
  }
  static const bool below_avx512 = !onednn_avx512_kernels();
  return below_avx512;
}

void gemm_f32_packed_tile(const GemmShape& s, const float* a, const float* b, float* c, int64_t i0, int64_t h,
                          int64_t j0, int64_t w) {
  if (s.k == 0) {
    for (int64_t i = i0; i < i0 + h; ++i) std::fill_n(c + i * s.n + j0, w, 0.0f);
    return;
  }
  const int64_t depth = block_depth(s.k);
  Strips& st = strips(depth, w);
  for (int64_t p0 = 0; p0 < s.k; p0 += depth) {
    const int64_t d = std::min(depth, s.k - p0);
    pack_b(s, b, j0, w, p0, d, st.b.data());
    for (int64_t r0 = 0; r0 < h; r0 += kBlockRows) {
      const int64_t block = std::min(kBlockRows, h - r0);
      pack_a(s, a, i0 + r0, block, p0, d, st.a.data());
      for (int64_t c0 = 0; c0 < w; c0 += kCols) {
        for (int64_t rr = 0; rr < block; rr += kRows) {
          float* out = c + (i0 + r0 + rr) * s.n + j0 + c0;
          const float *as = st.a.data() + rr * d, *bs = st.b.data() + c0 * d;
          const int64_t rows = std::min<int64_t>(kRows, block - rr), cols = std::min<int64_t>(kCols, w - c0);
          if (rows == kRows && cols == kCols) full_tile(d, as, bs, out, s.n, p0 == 0);
          else edge_tile(d, as, bs, out, s.n, p0 == 0, rows, cols);
        }
      }
    }
  }
}

}  // namespace tpu
