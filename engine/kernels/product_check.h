// Checks of a product a library computed against sums in double, at sampled entries: every new
// oneDNN primitive runs once on probe data and is used only if it passes (kernels/onednn_matmul.cpp,
// kernels/onednn_conv.cpp), since library implementations for some shapes and CPUs compute
// wrong results without any error.
//
//   MatrixView a{pa, k, 1}, b{pb, n, 1}, c{pc, n, 1};   // row-major A [m,k], B [k,n], C [m,n]
//   bool ok = product_matches_at_samples(a, b, c, m, k, n, Operands::any);
#pragma once
#include <cstdint>
#include <vector>

namespace tpu {

// f32 sums of k exact products are off by at most about k * 2^-24 of their magnitudes; a wrong
// layout is off by the size of the values themselves.
bool close_to_sum(double got, double sum, double magnitude, int64_t k);

// The same for products of probe operands, every value a multiple of 1/128 below 1 in magnitude
// (onednn::probe_value; exact in bf16 too): each product is a multiple of 2^-14, and so is every
// partial sum, in whatever order a library adds them. A partial sum's magnitude is at most
// `magnitude` (the sum of the products' magnitudes), so below 2^10 every one has at most 24
// significant bits and f32 holds it exactly: the result must be the sum, to the bit. Above,
// close_to_sum's bound. (With that bound alone, a term left out of a sum of thousands passed.)
bool close_to_probe_sum(double got, double sum, double magnitude, int64_t k);

// Up to `most` indices spread over [0, n), first and last included.
std::vector<int64_t> spread_indices(int64_t n, int64_t most);

// Element (i, j) of a matrix is data[i * row_stride + j * col_stride].
struct MatrixView {
  const float* data;
  int64_t row_stride, col_stride;
  float at(int64_t i, int64_t j) const { return data[i * row_stride + j * col_stride]; }
};

// What a product's operands hold: any values, or probe values (close_to_probe_sum).
enum class Operands : uint8_t { any, probe };

// Whether C = A B for A [m, k] and B [k, w] at up to 16 rows spread over m (8 where k > 16384),
// the first and last among them, times columns spread over w at most 16 apart (at least 32 of
// them), the first and last among them: a wrong layout, tail, or block of 16 columns shows
// there. Each checked entry is a whole sum over k, in double, compared as `operands` allows.
bool product_matches_at_samples(MatrixView a, MatrixView b, MatrixView c, int64_t m, int64_t k, int64_t w,
                                Operands operands);

}  // namespace tpu
