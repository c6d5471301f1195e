// Attributes of the windowed and random ops (conv, reduce_window, rng), kept in the generic
// Attrs fields so the IR text form and the passes need nothing new.
#pragma once
#include <array>
#include <cstdint>

#include "ir/op.h"

namespace tpu {

// The spatial window of conv and reduce_window over dims 1 and 2 (H, W) of NHWC tensors,
// one entry per spatial dim: window size, stride, lhs (input) dilation, rhs (window)
// dilation, and padding before and after the dilated input (negative padding crops).
// Window element k of output position o reads padded-dilated position o*stride +
// k*rhs_dilation - pad_lo, which is input element p/lhs_dilation when p % lhs_dilation == 0.
// Stored in Attrs as dims = [size, stride, lhs_dilation, rhs_dilation] (h then w for each)
// and dims2 = [pad_lo_h, pad_hi_h, pad_lo_w, pad_hi_w].
struct Window2D {
  std::array<int64_t, 2> size{1, 1}, stride{1, 1}, lhs_dilation{1, 1}, rhs_dilation{1, 1};
  std::array<int64_t, 2> pad_lo{0, 0}, pad_hi{0, 0};
  // Output extent along spatial dim i (0 = h, 1 = w) for an input extent `in`; < 1: no fit.
  int64_t output_size(int i, int64_t in) const;
  // Input element read by window element k at output position o along dim i, or -1 (padding).
  int64_t source(int i, int64_t o, int64_t k, int64_t in) const;
};
// The window that maps an output gradient back to the input (for conv with the filter
// reversed and its channels swapped): stride and lhs dilation trade places, and the padding
// makes the result exactly `in` elements long per spatial dim.
Window2D input_grad_window(const Window2D& w, std::array<int64_t, 2> in, std::array<int64_t, 2> out);

// Bound on every window attribute (size, stride, dilations, |padding|): with dims up to
// kMaxElements (ir/graph.h) the window arithmetic above stays within int64.
constexpr int64_t kMaxWindowAttr = int64_t(1) << 20;

void set_window(Attrs& a, const Window2D& w);
bool window_ok(const Attrs& a);      // dims and dims2 have the layout above, sizes in [1, kMaxWindowAttr]
Window2D window_of(const Attrs& a);  // shape rules check window_ok first

enum class WindowKind : uint8_t { sum, max, argmax };  // reduce_window's attrs.axis
// rng's attrs.axis: uniform f32 in [0,1); normal f32; normal truncated to |z| <= 2 by
// resampling; bits: raw i32; fold: a derived key i32[...,2] per element of an i32 data operand.
enum class RngKind : uint8_t { uniform, normal, truncated_normal, bits, fold };

}  // namespace tpu
