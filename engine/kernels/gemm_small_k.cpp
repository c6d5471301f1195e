#include "kernels/gemm_small_k.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/register_tile.h"
#include "runtime/thread_pool.h"

namespace tpu {

namespace {

using namespace register_tile;
constexpr int64_t kRowsPerTask = 8 * kRows;

// One part's operands for a tile: A rows [k][lda] from column i0, B rows [k][ldb] from j0.
struct Operand {
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
};

// tile = sum over parts of their A^T B tiles, each accumulated over k in order from zero.
void tile(std::span<const Operand> parts, int64_t k, Vec (&total)[kRows][kVecs]) {
  for (size_t p = 0; p < parts.size(); ++p) {
    Vec acc[kRows][kVecs] = {};
    const Operand& o = parts[p];
    for (int64_t q = 0; q < k; ++q) {
      Vec row[kVecs];
      for (int v = 0; v < kVecs; ++v) row[v] = load(o.b + q * o.ldb + v * kLanes);
      for (int i = 0; i < kRows; ++i) {
        const float s = o.a[q * o.lda + i];
        for (int v = 0; v < kVecs; ++v) acc[i][v] += s * row[v];
      }
    }
    for (int i = 0; i < kRows; ++i)
      for (int v = 0; v < kVecs; ++v) total[i][v] = p == 0 ? acc[i][v] : total[i][v] + acc[i][v];
  }
}

// Edge tiles read zero-padded copies of their operands' rows and columns: padding only adds
// lanes, so every stored element is computed exactly as in a full tile.
void pad(const float* src, int64_t ld, int64_t k, int64_t width, int64_t pad_to, float* dst) {
  std::fill(dst, dst + k * pad_to, 0.0f);
  for (int64_t q = 0; q < k; ++q) std::copy(src + q * ld, src + q * ld + width, dst + q * pad_to);
}

struct Job {
  const GemmShape& s;
  std::span<const float* const> a, b;
  float* c;
  int64_t full_cols;        // columns in whole tiles
  const float* b_edge;      // per part and batch element: B's last columns padded to a tile
};

// B's columns past the whole tiles, padded once per call (every row of tiles reads them).
const float* pad_b_edge(const GemmShape& s, std::span<const float* const> b, int64_t full_cols) {
  thread_local std::vector<float> buf;
  const int64_t width = s.n - full_cols, block = s.k * kCols;
  if (width == 0) return nullptr;
  buf.resize(size_t(int64_t(b.size()) * s.batch * block));
  for (size_t r = 0; r < b.size(); ++r)
    for (int64_t p = 0; p < s.batch; ++p)
      pad(b[r] + p * s.k * s.n + full_cols, s.n, s.k, width, kCols, buf.data() + (int64_t(r) * s.batch + p) * block);
  return buf.data();
}

// Results [i0, i0 + rows) x [j0, j0 + cols) of batch element p.
void compute_tile(const Job& job, int64_t p, int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
  const GemmShape& s = job.s;
  thread_local std::vector<Operand> parts;
  thread_local std::vector<float> a_edge;  // padded at j0 = 0; this task reads it for the row's other tiles
  parts.clear();
  if (rows < kRows) a_edge.resize(job.a.size() * size_t(s.k * kRows));
  for (size_t r = 0; r < job.a.size(); ++r) {
    Operand o{job.a[r] + p * s.k * s.m + i0, s.m, job.b[r] + p * s.k * s.n + j0, s.n};
    if (rows < kRows) {
      float* dst = a_edge.data() + int64_t(r) * s.k * kRows;
      if (j0 == 0) pad(o.a, s.m, s.k, rows, kRows, dst);
      o.a = dst, o.lda = kRows;
    }
    if (j0 >= job.full_cols) o.b = job.b_edge + (int64_t(r) * s.batch + p) * s.k * kCols, o.ldb = kCols;
    parts.push_back(o);
  }
  Vec total[kRows][kVecs];
  tile(parts, s.k, total);
  float* c = job.c + p * s.m * s.n + i0 * s.n + j0;
  for (int64_t i = 0; i < rows; ++i) {
    if (cols == kCols) std::memcpy(c + i * s.n, &total[i][0], sizeof total[i]);  // vector stores
    else std::memcpy(c + i * s.n, &total[i][0], size_t(cols) * sizeof(float));
  }
}

}  // namespace

// Narrower results than a tile would mostly compute padding.
bool small_k_gemm_applies(const GemmShape& s) { return s.ta && !s.tb && s.k <= kSmallK && s.n >= kCols; }

void small_k_gemm_sum(const GemmShape& s, std::span<const float* const> a, std::span<const float* const> b, float* c) {
  const int64_t full_cols = s.n / kCols * kCols;
  const Job job{s, a, b, c, full_cols, pad_b_edge(s, b, full_cols)};
  const int64_t blocks = (s.m + kRowsPerTask - 1) / kRowsPerTask;
  parallel_for(s.batch * blocks, [&](int64_t t) {
    const int64_t p = t / blocks, i_end = std::min(s.m, (t % blocks + 1) * kRowsPerTask);
    for (int64_t i0 = (t % blocks) * kRowsPerTask; i0 < i_end; i0 += kRows)
      for (int64_t j0 = 0; j0 < s.n; j0 += kCols)
        compute_tile(job, p, i0, std::min<int64_t>(kRows, i_end - i0), j0, std::min<int64_t>(kCols, s.n - j0));
  });
}

}  // namespace tpu
