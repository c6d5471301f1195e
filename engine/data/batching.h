// Building batches from host tensors: the gather of a shuffled batch and the padded stack of
// variable-length elements (tpu.data's batch and padded_batch, and the BatchPrefetcher).
//
//   Tensor b = gather_rows(images, {7, 3, 9});              // u8[3,28,28]: rows 7, 3, 9
//   Tensor p = pad_stack({a, b}, {8}, 0);                   // i32[5], i32[3] -> i32[2,8]
#pragma once
#include <span>

#include "core/tensor.h"

namespace tpu {

// Row i of the result is row indices[i] of t (0-based, along the first dimension). Consecutive
// indices (a batch of unshuffled data) give a view of t's buffer instead of a copy.
Tensor gather_rows(const Tensor& t, std::span<const int64_t> indices);

// Stacks tensors of one dtype and rank into [items, shape...]; each is placed at the start of
// every dimension and the rest is filled with `value`. Throws tpu::Error if an item does not fit.
Tensor pad_stack(std::span<const Tensor> items, const Shape& shape, double value);

}  // namespace tpu
