// The pooling kernels image by image, for lock-step runs (ops/fusion.h run_after_conv and
// run_after_scatter), and
// where the pool's gradient may write over its input (the memory plan).
#pragma once
#include <span>

#include "core/tensor.h"
#include "ir/graph.h"

namespace tpu {

// Images [b0, b1) of the reduce_window n's result, f32 operand and result, on the calling
// thread, as its kernel computes them (each image's windows on their own).
void reduce_window_images(const Node& n, std::span<const Tensor* const> in, Tensor& out, int64_t b0, int64_t b1);

// Image b of the select_and_scatter n's result, f32 operands and result, on the calling thread,
// as its kernel computes it (each image's windows on their own).
void select_and_scatter_image(const Node& n, std::span<const Tensor* const> in, Tensor& out, int64_t b);

// The select_and_scatter n computes each window from its first operand (the pooled input) and
// writes the window's gradient over the same elements after it has read them (2x2 windows that
// tile the image, the vector kernel): n may take that operand's storage.
bool scatter_may_write_over_input(const Graph& g, const Node& n);

}  // namespace tpu
