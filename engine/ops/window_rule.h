// The shape-rule part shared by the windowed rows (conv, conv_filter_grad, reduce_window,
// select_and_scatter): the window attributes against the NHWC operand x.
#pragma once
#include <array>
#include <string>

#include "ops/kernel_util.h"

namespace tpu {

// "" and the output's spatial size, or the problem for the user.
inline std::string check_window(const Graph& g, const Node& n, const Node& x, std::array<int64_t, 2>& out) {
  const std::string op(op_name(n.op));
  if (!window_ok(n.attrs)) return op + ": bad window attributes" + (n.attrs.window() ? " " + window_text(*n.attrs.window()) : "");
  const Window2D win = n.window();
  out = {win.output_size(0, x.shape[1]), win.output_size(1, x.shape[2])};
  if (out[0] < 1 || out[1] < 1)
    return op + ": the " + std::to_string(win.size[0]) + "x" + std::to_string(win.size[1]) +
           " window does not fit the padded input " + type_of(g, n.in[0]);
  return "";
}

}  // namespace tpu
