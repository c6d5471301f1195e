// The conv rows' graph-level helper that the interpreter shares (ops/conv.cpp).
#pragma once
#include "ir/graph.h"

namespace tpu {

// The input gradient of conv(x, w, win, groups) for the output gradient dy, with x of shape
// xs: dy convolved with w reversed in space, its in/out channels swapped per group, over the
// transposed window (input_grad_window). It is also the transposed convolution of dy by w.
NodeId conv_input_grad(Graph& g, NodeId dy, NodeId w, const Window2D& win, const Shape& xs, int64_t groups);

}  // namespace tpu
