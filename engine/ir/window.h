// Helpers for the windowed ops' Window2D and the kinds of the windowed and random ops.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "ir/op.h"

namespace tpu {

// Window2D (ir/op.h) is kept whole in a node's attributes (Attrs::window).
// The window that maps an output gradient back to the input (for conv with the filter
// reversed and its channels swapped): stride and lhs dilation trade places, and the padding
// makes the result exactly `in` elements long per spatial dim.
Window2D input_grad_window(const Window2D& w, std::array<int64_t, 2> in, std::array<int64_t, 2> out);

// Bound on every window attribute (size, stride, dilations, |padding|): with dims up to
// kMaxElements (core/shape.h) the window arithmetic above stays within int64.
constexpr int64_t kMaxWindowAttr = int64_t(1) << 20;

// There is a window, its sizes, strides and dilations in [1, kMaxWindowAttr], |padding| at
// most kMaxWindowAttr.
bool window_ok(const Attrs& a);
Window2D window_of(const Attrs& a);  // shape rules check window_ok first
// "size=3x3 stride=2x2 pad=1_1x1_1" (pads low_high per dim), dilations when not 1:
// " lhs_dilation=2x1 rhs_dilation=1x2"; the IR text's form (ir/text.cpp).
std::string window_text(const Window2D& w);

enum class WindowKind : uint8_t { sum, max, argmax };  // reduce_window's kind
// rng's kind: uniform f32 in [0,1); normal f32; normal truncated to |z| <= 2 by
// resampling; bits: raw i32; fold: a derived key i32[...,2] per element of an i32 data operand;
// bernoulli: bool, the uniform draw's element below an f32 scalar operand p (a dropout mask at a
// byte an element, where the draw and its comparison stored four).
enum class RngKind : uint8_t { uniform, normal, truncated_normal, bits, fold, bernoulli };

}  // namespace tpu
