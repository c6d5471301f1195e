// The shape-rule part shared by the windowed rows (conv, conv_filter_grad, reduce_window,
// select_and_scatter): the window attributes against the NHWC operand x.
#pragma once
#include <array>
#include <string>

#include "ops/kernel_util.h"

namespace tpu {

// "conv: the 3x3 window (dilated to 5x5) does not fit the 4x4 input f32[1,4,4,3] (padded to 4x6);
// use ..." — the text the user sees for tpu.conv2d.
inline std::string window_misfit(const Graph& g, const Node& n, const Node& x) {
  const Window2D w = n.window();
  auto pair = [](int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); };
  std::array<int64_t, 2> span, padded;
  for (int i = 0; i < 2; ++i) {
    span[size_t(i)] = (w.size[i] - 1) * w.rhs_dilation[i] + 1;
    padded[size_t(i)] = (x.shape[size_t(i) + 1] - 1) * w.lhs_dilation[i] + 1 + w.pad_lo[i] + w.pad_hi[i];
  }
  std::string s = std::string(op_name(n.op)) + ": the " + pair(w.size[0], w.size[1]) + " window";
  if (span[0] != w.size[0] || span[1] != w.size[1]) s += " (dilated to " + pair(span[0], span[1]) + ")";
  s += " does not fit the " + pair(x.shape[1], x.shape[2]) + " input " + type_of(g, n.in[0]);
  if (padded[0] != x.shape[1] || padded[1] != x.shape[2]) s += " (padded to " + pair(padded[0], padded[1]) + ")";
  return s + "; use padding = \"same\" or a smaller window";
}

// "" and the output's spatial size, or the problem for the user.
inline std::string check_window(const Graph& g, const Node& n, const Node& x, std::array<int64_t, 2>& out) {
  const std::string op(op_name(n.op));
  if (!window_ok(n.attrs)) return op + ": bad window attributes" + (n.attrs.window() ? " " + window_text(*n.attrs.window()) : "");
  const Window2D win = n.window();
  out = {win.output_size(0, x.shape[1]), win.output_size(1, x.shape[2])};
  if (out[0] < 1 || out[1] < 1) return window_misfit(g, n, x);
  return "";
}

}  // namespace tpu
