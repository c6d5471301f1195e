#include "kernels/product_check.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace tpu {

bool close_to_sum(double got, double sum, double magnitude, int64_t k) {
  return std::abs(got - sum) <= double(k + 2) * 0x1p-23 * magnitude + 1e-30;
}

std::vector<int64_t> spread_indices(int64_t n, int64_t most) {
  const int64_t count = std::min(n, most);
  std::vector<int64_t> at;
  for (int64_t r = 0; r < count; ++r) at.push_back(count == 1 ? 0 : r * (n - 1) / (count - 1));
  return at;
}

namespace {

// The sum of x[p] y[p] and of its terms' magnitudes, over four running sums each, so that the
// adds do not each wait for the one before.
std::pair<double, double> dot_and_magnitude(const std::vector<double>& x, const double* y) {
  double sum[4] = {}, mag[4] = {};
  const size_t k = x.size(), whole = k / 4 * 4;
  for (size_t p = 0; p < whole; p += 4)
    for (size_t l = 0; l < 4; ++l) {
      const double t = x[p + l] * y[p + l];
      sum[l] += t, mag[l] += std::abs(t);
    }
  for (size_t p = whole; p < k; ++p) {
    const double t = x[p] * y[p];
    sum[0] += t, mag[0] += std::abs(t);
  }
  return {(sum[0] + sum[1]) + (sum[2] + sum[3]), (mag[0] + mag[1]) + (mag[2] + mag[3])};
}

}  // namespace

bool product_matches_at_samples(MatrixView a, MatrixView b, MatrixView c, int64_t m, int64_t k, int64_t w) {
  // Over long sums (a pointwise filter gradient's, over every position of the batch) half the
  // rows and columns: a quarter of the products.
  const bool long_sums = k > 16384;
  const std::vector<int64_t> rows = spread_indices(m, long_sums ? 8 : 16), cols = spread_indices(w, long_sums ? 16 : 32);
  // The sampled columns of B and each sampled row of A, contiguous in double: strided reads
  // (a transposed operand) once per element instead of once per checked entry.
  std::vector<double> b_cols(cols.size() * size_t(k)), a_row(static_cast<size_t>(k));
  for (size_t q = 0; q < cols.size(); ++q)
    for (int64_t p = 0; p < k; ++p) b_cols[q * size_t(k) + size_t(p)] = b.at(p, cols[q]);
  for (int64_t i : rows) {
    for (int64_t p = 0; p < k; ++p) a_row[size_t(p)] = a.at(i, p);
    for (size_t q = 0; q < cols.size(); ++q) {
      const auto [sum, mag] = dot_and_magnitude(a_row, b_cols.data() + q * size_t(k));
      if (!close_to_sum(c.at(i, cols[q]), sum, mag, k)) return false;
    }
  }
  return true;
}

}  // namespace tpu
