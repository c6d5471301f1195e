// The pooling kernel image by image, for lock-step runs (ops/fusion.h run_after_conv).
#pragma once
#include <span>

#include "core/tensor.h"
#include "ir/graph.h"

namespace tpu {

// Images [b0, b1) of the reduce_window n's result, f32 operand and result, on the calling
// thread, as its kernel computes them (each image's windows on their own).
void reduce_window_images(const Node& n, std::span<const Tensor* const> in, Tensor& out, int64_t b0, int64_t b1);

}  // namespace tpu
