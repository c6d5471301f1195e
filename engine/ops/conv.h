// The conv rows' graph-level helper that the interpreter shares, and the conv kernel with a
// reader per chunk for lock-step runs (ops/conv.cpp).
#pragma once
#include <span>

#include "core/tensor.h"
#include "ir/graph.h"
#include "kernels/onednn_conv.h"

namespace tpu {

// The input gradient of conv(x, w, win, groups) for the output gradient dy, with x of shape
// xs: dy convolved with w reversed in space, its in/out channels swapped per group, over the
// transposed window (input_grad_window). It is also the transposed convolution of dy by w.
NodeId conv_input_grad(Graph& g, NodeId dy, NodeId w, const Window2D& win, const Shape& xs, int64_t groups);

// Runs the conv `node` (f32 operands) into out as its kernel does, calling `done` for each
// chunk of out's elements as soon as it is made, on the thread that made it, where that kernel
// makes it in chunks of images (kernels/onednn_conv.h). False, with nothing written, where
// it is another (the caller then runs the conv's kernel whole).
bool conv_in_chunks(const Node& node, std::span<const Tensor* const> in, Tensor& out, const ChunkDone& done);

}  // namespace tpu
