// Convs over small images that ops/conv.cpp runs as products of patch matrices (im2col), in
// f32 and, for operands that are exactly bf16 values, in bf16: shared by the tests of both
// (test_bf16.cpp, test_ops.cpp), which compare them with the plain reference kernels.
#pragma once
#include <array>
#include <vector>

#include "ir/graph.h"
#include "ops/conv.h"

namespace tpu {

// The convs' graph; shapes gets its parameters' shapes, in order.
inline Graph small_image_convs(std::vector<Shape>& shapes) {
  auto window = [](std::array<int64_t, 2> size, std::array<int64_t, 2> stride, std::array<int64_t, 2> lo,
                   std::array<int64_t, 2> hi) {
    Window2D w;
    w.size = size, w.stride = stride, w.pad_lo = lo, w.pad_hi = hi;
    return w;
  };
  const Window2D same = window({3, 3}, {1, 1}, {1, 1}, {1, 1}), pointwise = window({1, 1}, {1, 1}, {0, 0}, {0, 0});
  const Window2D strided = window({1, 1}, {2, 2}, {0, 0}, {0, 0}), strided3 = window({3, 3}, {2, 2}, {1, 1}, {1, 1});
  const Window2D uneven = window({3, 3}, {1, 1}, {1, 0}, {0, 1});  // pad_lo != pad_hi
  Window2D dilated = window({2, 2}, {1, 1}, {1, 1}, {1, 1});
  dilated.rhs_dilation = {2, 2};
  shapes = {{6, 2, 2, 32},  {3, 3, 32, 24}, {6, 2, 2, 24},  {5, 4, 4, 16}, {1, 1, 16, 40}, {5, 4, 4, 40},
            {3, 9, 9, 8},   {3, 9, 9, 16},  {5, 2, 2, 40},  {2, 2, 32, 8}, {5, 60, 60, 8}, {5, 60, 60, 12},
            {5, 2, 2, 16},  {3, 9, 9, 16},  {3, 5, 5, 24},  {4, 3, 3, 16}, {3, 3, 16, 24}, {4, 2, 2, 24},
            {4, 7, 7, 16},  {4, 4, 4, 24},  {3, 3, 3, 17},  {3, 3, 17, 13}, {3, 2, 2, 13}, {3, 5, 7, 17},
            {3, 3, 4, 13}};
  Graph g;
  std::vector<NodeId> p;
  for (const Shape& s : shapes) p.push_back(g.parameter(DType::f32, s));
  g.outputs = {
      g.conv(p[0], p[1], same),                // 3x3 at 2x2 outputs
      g.conv_filter_grad(p[0], p[2], same),    // and its filter gradient
      g.conv(p[3], p[4], pointwise),           // 1x1 at 4x4 (oneDNN's in bf16)
      g.conv_filter_grad(p[3], p[5], pointwise),
      g.conv_filter_grad(p[6], p[7], pointwise),                  // 1x1 over 9x9 images
      conv_input_grad(g, p[8], p[4], strided, {5, 4, 4, 16}, 1),  // strided 1x1: products placed
      g.conv(p[0], p[9], dilated),                                // a dilated filter
      g.conv_filter_grad(p[10], p[11], pointwise),  // 18000 output positions: parts of 8192, the last shorter
      g.conv(p[12], p[4], pointwise),               // 1x1 at 2x2 outputs: the pointwise branch
      g.conv_filter_grad(p[13], p[14], strided),    // 1x1 stride 2 over 9x9 inputs
      g.conv(p[15], p[16], strided3),               // 3x3 stride 2 at 2x2 outputs
      g.conv_filter_grad(p[15], p[17], strided3),
      g.conv_filter_grad(p[18], p[19], strided3),   // 3x3 stride 2 at 4x4 outputs
      g.conv(p[20], p[21], uneven),                 // pad_lo != pad_hi, odd channel counts
      g.conv_filter_grad(p[20], p[22], uneven),
      g.conv(p[23], p[21], strided3),               // 5x7 images, 3x4 outputs
      g.conv_filter_grad(p[23], p[24], strided3),
  };
  return g;
}

}  // namespace tpu
