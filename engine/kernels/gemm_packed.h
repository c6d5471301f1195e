// f32 products computed by our own register-tiled kernel on packed operands, for CPUs where
// oneDNN's f32 matmul runs its pre-AVX-512 kernels: there oneDNN 2.6 reaches about 60% of the
// FMA peak on the bench models' products (bench/gemm.cpp), this kernel more.
//
// A tile of C is computed in blocks of the inner dimension (their depth fixed by K alone):
// each block's slice of B is copied into strips a register tile wide, and each group of rows
// of A into strips a register tile high, so the kernel's inner loop reads both operands
// contiguously from cache, whatever their transposition. A result element is one fixed
// sequence of fused multiply-adds, k in order, whatever the thread count.
//
//   gemm_f32_packed_tile(s, a, b, c, /*i0=*/0, /*h=*/s.m, /*j0=*/0, /*w=*/s.n);  // all of C
#pragma once
#include <cstdint>

#include "kernels/gemm.h"

namespace tpu {

// Whether gemm_f32 computes its tiles with this kernel (rather than oneDNN's or Eigen's):
// automatic where oneDNN runs below AVX-512 or is not in the build, or forced either way
// (tests and benchmarks).
enum class PackedGemm : uint8_t { automatic, always, never };
void set_packed_gemm(PackedGemm p);
bool packed_gemm_used();

// Rows [i0, i0 + h) and columns [j0, j0 + w) of C = op(A) op(B) for batch element 0 of `s`
// (a, b and c point at the element's operands).
void gemm_f32_packed_tile(const GemmShape& s, const float* a, const float* b, float* c, int64_t i0, int64_t h,
                          int64_t j0, int64_t w);

}  // namespace tpu
