// Products with a short inner dimension and the left operand transposed: C = A^T B with A
// [K, M] and B [K, N] (GemmShape ta, not tb), K at most kSmallK and N at least a tile: the
// weight gradient of a replica's few rows. Results accumulate over k in register tiles, and a sum over parts
// (the replicas of an all_reduce) adds each part's tile while it is still in registers, so
// no part's product is ever written to memory. Each result element is one fixed sequence of
// arithmetic (k in order, then the parts in order), whatever the thread count and whether
// it is computed alone or in a sum: a sum of parts has the bits of each part's product added
// in part order.
#pragma once
#include <span>

#include "kernels/gemm.h"

namespace tpu {

constexpr int64_t kSmallK = 64;

bool small_k_gemm_applies(const GemmShape& s);
// c = sum over parts p of a[p]^T b[p] (batched as s says), parts added in order.
void small_k_gemm_sum(const GemmShape& s, std::span<const float* const> a, std::span<const float* const> b, float* c);

}  // namespace tpu
