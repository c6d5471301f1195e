// oneDNN's convolution primitives for ops/conv.cpp: the forward conv, the filter gradient and
// the input gradient of NHWC images with HWIO filters, f32 results of f32 or bf16 operands.
// The batch is cut into fixed chunks (by the shapes alone), each run by one single-threaded
// primitive on one of the pool's threads, and the chunks' filter-gradient partials are summed
// in chunk order: results do not depend on the thread count. Primitives are made once per
// chunk shape and cached (thread-safe); each one is checked on probe data against sums in
// double before it is used.
//
//   ConvShape s{.n = 128, .h = 14, .w = 14, .ci = 32, .kh = 3, .kw = 3, .co = 64, .ho = 14, .wo = 14,
//               .stride = {1, 1}, .pad_lo = {1, 1}, .pad_hi = {1, 1}, .dilation = {1, 1}};
//   if (!onednn_conv(s, x, f, y)) ...  // no oneDNN, or no checked primitive: use another kernel
#pragma once
#include <array>
#include <cstdint>
#include <functional>

#include "kernels/onednn.h"

namespace tpu {

// Output position o along spatial dim d reads input o * stride[d] - pad_lo[d] + k * dilation[d]
// for filter tap k (dilation 1: a dense filter); the padding is never negative. With `groups`
// G the filter is [Kh,Kw,Ci/G,Co] and output channel m reads input channels of group m/(Co/G)
// only (G = Ci: depthwise, which oneDNN runs with kernels of its own).
struct ConvShape {
  int64_t n = 0, h = 0, w = 0, ci = 0, kh = 0, kw = 0, co = 0, ho = 0, wo = 0;
  std::array<int64_t, 2> stride{1, 1}, pad_lo{0, 0}, pad_hi{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  // The forward conv's filter is stored [Kh,Kw,Co,Ci] instead (groups 1): an input gradient's
  // channel-swapped filter, read in place (the primitive's filter reorder reads either layout).
  bool filter_oi = false;
  auto operator<=>(const ConvShape&) const = default;
};

// Called with each chunk's range [begin, end) of the result's elements as soon as the chunk is
// made, on the thread that made it (so a reader of the chunk finds it in cache). Chunks start
// at multiples of conv_chunk_images images.
using ChunkDone = std::function<void(int64_t begin, int64_t end)>;

// y[N,Ho,Wo,Co] = x[N,H,W,Ci] convolved with f[Kh,Kw,Ci/groups,Co], with `done` (if any) called
// for each chunk of y. False, with nothing written and `done` not called, when oneDNN is not in
// the build or has no checked primitive for the shape.
bool onednn_conv(const ConvShape& s, const float* x, const float* f, float* y, const ChunkDone& done = {});
// The same conv of bf16 operands (f32 result) with the CPU's bf16 dot-product instructions:
// the products are exact in f32 and summed in f32. False also without such instructions.
bool onednn_conv_bf16(const ConvShape& s, const uint16_t* x, const uint16_t* f, float* y, const ChunkDone& done = {});
// df[Kh,Kw,Ci/groups,Co] = the sum over the batch of each tap's input times the output gradient
// dy[N,Ho,Wo,Co]. False as above.
bool onednn_conv_filter_grad(const ConvShape& s, const float* x, const float* dy, float* df);
// The same for bf16 operands, as onednn_conv_bf16.
bool onednn_conv_filter_grad_bf16(const ConvShape& s, const uint16_t* x, const uint16_t* dy, float* df);

// The f32 filter gradient in the pieces onednn_conv_filter_grad runs, for a caller that makes dy
// chunk by chunk (ops/fusion.h run_after_scatter): its chunks (`images` each, `count` of them;
// none where it would return false), chunk t's partial into part (the filter's size) on the
// calling thread, then the partials summed in chunk order into df: that call's bits.
struct FilterGradChunks {
  int64_t images = 0, count = 0;
};
FilterGradChunks onednn_filter_grad_chunks(const ConvShape& s);
void onednn_filter_grad_chunk(const ConvShape& s, const float* x, const float* dy, int64_t t, float* part);
void onednn_filter_grad_sum(const ConvShape& s, const float* parts, int64_t count, float* df);

// dx[N,H,W,Ci] = the gradient of the conv s's input for the output gradient dy[N,Ho,Wo,Co] and
// the filter f[Kh,Kw,Ci/groups,Co] the conv read (the input gradient of a strided conv, which
// as a conv of its own reads a dilated dy that oneDNN's forward conv has no form for). False
// as above.
bool onednn_conv_data_grad(const ConvShape& s, const float* dy, const float* f, float* dx);
bool onednn_conv_data_grad_bf16(const ConvShape& s, const uint16_t* dy, const uint16_t* f, float* dx);

// Images per chunk of a batch of n images of `positions` output positions each (by the shape
// alone): about 2048 positions a chunk, at least four chunks where the batch allows, and a
// chunk count that 2 and 4 threads share as evenly as sizes down to half that allow (128 images
// of 14x14: 16 chunks of 8, not 13 of 10).
int64_t conv_chunk_images(int64_t n, int64_t positions);

// Off: all return false, so the conv rows use their other kernels (tests and benchmarks of
// those). On by default.
void set_onednn_conv_enabled(bool on);

}  // namespace tpu
