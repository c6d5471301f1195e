// The conv rows' graph-level helper that the interpreter shares, and the conv kernel with a
// reader per chunk for lock-step runs (ops/conv.cpp).
#pragma once
#include <functional>
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

// A filter gradient that its kernel computes as partial sums over fixed chunks of images,
// summed in chunk order (the few-taps kernel's, or oneDNN's f32 primitive's), in those pieces:
// for a caller that makes the output gradient chunk by chunk (ops/fusion.h run_after_scatter).
// part(t, p) writes chunk t's partial (the filter's size) on the calling thread; sum(parts,
// count, dw) adds them up: the kernel's bits.
struct ImageChunkedFilterGrad {
  int64_t images = 0, count = 0;  // images per chunk, chunks; 0: it is computed another way
  std::function<void(int64_t t, float* part)> part;
  std::function<void(const float* parts, int64_t count, float* dw)> sum;
};
// Whether the conv_filter_grad `node` (f32, x of shape xs) may be computed so, by shape.
bool filter_grad_in_image_chunks(const Node& node, const Shape& xs);
// Its pieces for operands `in` (f32: x, dy), which they read when called; no chunks where its
// kernel takes another way after all: oneDNN has no primitive, or x is exactly bf16 (the kernel
// then looks at dy too, which the caller has not made).
ImageChunkedFilterGrad image_chunked_filter_grad(const Node& node, std::span<const Tensor* const> in);

}  // namespace tpu
