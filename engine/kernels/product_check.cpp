#include "kernels/product_check.h"

#include <algorithm>
#include <cmath>

namespace tpu {

bool close_to_sum(double got, double sum, double magnitude, int64_t k) {
  return std::abs(got - sum) <= double(k + 2) * 0x1p-23 * magnitude + 1e-30;
}

bool close_to_probe_sum(double got, double sum, double magnitude, int64_t k) {
  constexpr double kExactBelow = 0x1p10;  // 2^24 multiples of 2^-14
  return magnitude < kExactBelow ? got == sum : close_to_sum(got, sum, magnitude, k);
}

std::vector<int64_t> spread_indices(int64_t n, int64_t most) {
  const int64_t count = std::min(n, most);
  std::vector<int64_t> at;
  for (int64_t r = 0; r < count; ++r) at.push_back(count == 1 ? 0 : r * (n - 1) / (count - 1));
  return at;
}

namespace {

// Sums of products and of their magnitudes, four running sums each, so that the adds do not
// each wait for the one before.
struct RunningSums {
  double sum[4] = {}, mag[4] = {};
  void add(const double* x, const double* y, int64_t n) {
    const int64_t whole = n / 4 * 4;
    for (int64_t p = 0; p < whole; p += 4)
      for (int64_t l = 0; l < 4; ++l) {
        const double t = x[p + l] * y[p + l];
        sum[l] += t, mag[l] += std::abs(t);
      }
    for (int64_t p = whole; p < n; ++p) {
      const double t = x[p] * y[p];
      sum[0] += t, mag[0] += std::abs(t);
    }
  }
  double total() const { return (sum[0] + sum[1]) + (sum[2] + sum[3]); }
  double magnitude() const { return (mag[0] + mag[1]) + (mag[2] + mag[3]); }
};

// The inner dimension is read in pieces: the sampled rows' and columns' pieces stay in cache,
// and the check's memory stays a few MB however long the sums.
constexpr int64_t kPiece = 2048;

}  // namespace

bool product_matches_at_samples(MatrixView a, MatrixView b, MatrixView c, int64_t m, int64_t k, int64_t w,
                                Operands operands) {
  // Columns at most 16 apart, so that every block of 16 columns a library computes together
  // has one checked, in a tile's middle as well as at its ends. 16 rows, or 8 over long sums (a
  // pointwise filter gradient's, over every position of the batch).
  const std::vector<int64_t> rows = spread_indices(m, k > 16384 ? 8 : 16);
  const std::vector<int64_t> cols = spread_indices(w, std::max<int64_t>(32, (w + 14) / 16 + 1));
  std::vector<RunningSums> sums(rows.size() * cols.size());
  // Each piece of the sampled rows of A and columns of B, contiguous in double: strided reads
  // (a transposed operand) once per element instead of once per checked entry.
  std::vector<double> a_piece(rows.size() * size_t(kPiece)), b_piece(cols.size() * size_t(kPiece));
  for (int64_t p0 = 0; p0 < k; p0 += kPiece) {
    const int64_t len = std::min(kPiece, k - p0);
    for (size_t r = 0; r < rows.size(); ++r)
      for (int64_t p = 0; p < len; ++p) a_piece[r * size_t(kPiece) + size_t(p)] = a.at(rows[r], p0 + p);
    for (size_t q = 0; q < cols.size(); ++q)
      for (int64_t p = 0; p < len; ++p) b_piece[q * size_t(kPiece) + size_t(p)] = b.at(p0 + p, cols[q]);
    for (size_t r = 0; r < rows.size(); ++r)
      for (size_t q = 0; q < cols.size(); ++q)
        sums[r * cols.size() + q].add(&a_piece[r * size_t(kPiece)], &b_piece[q * size_t(kPiece)], len);
  }
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t q = 0; q < cols.size(); ++q) {
      const RunningSums& s = sums[r * cols.size() + q];
      const double got = c.at(rows[r], cols[q]);
      if (operands == Operands::probe ? !close_to_probe_sum(got, s.total(), s.magnitude(), k)
                                      : !close_to_sum(got, s.total(), s.magnitude(), k))
        return false;
    }
  return true;
}

}  // namespace tpu
