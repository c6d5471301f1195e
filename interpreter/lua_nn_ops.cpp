// Convolution and pooling as Lua methods (NHWC inputs, HWIO filters):
//   tpu.conv2d(x, w, {strides = 1, padding = "valid", dilation = 1, groups = 1}) or x:conv2d(w, opts)
//   tpu.conv2d_transpose(x, w, {strides = 1, padding = "valid", output_padding = nil, dilation = 1}),
//     w [height, width, out_channels, in_channels] as Keras's Conv2DTranspose kernel
//   x:max_pool2d{pool_size = 2, strides = pool_size, padding = "valid"}, x:avg_pool2d{...}
// Sizes, strides and dilations are a number or a pair {height, width}. padding is "valid",
// "same" (output = ceil(input / stride), the extra row/column at the end) or
// explicit {{top, bottom}, {left, right}}.
//   core.attention(q, k, v, keep, scale, causal, bias): nn.MultiHeadAttention's fused attention
#include <algorithm>
#include <array>
#include <optional>

#include "core/error.h"
#include "lua_internal.h"
#include "ops/conv.h"

namespace tpu {

namespace {

using Pair = std::array<int64_t, 2>;

constexpr const char* kExplicitPadding =
    ": explicit padding must be {{top, bottom}, {left, right}} of non-negative integers";

std::string pair_str(const Pair& p) { return std::to_string(p[0]) + "x" + std::to_string(p[1]); }

// The value at idx as the user wrote it: {1, 0} for a list, else tostring.
std::string value_str(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  std::string r;
  if (lua_istable(L, idx)) {
    for (lua_Integer i = 1; i <= luaL_len(L, idx); ++i) {
      lua_geti(L, idx, i);
      r += (i > 1 ? ", " : "") + value_str(L, -1);
      lua_pop(L, 1);
    }
    return "{" + r + "}";
  }
  r = luaL_tolstring(L, idx, nullptr);
  lua_pop(L, 1);
  return r;
}

// opts[name]: a positive integer or a pair of them; `def` when absent.
Pair opt_pair(lua_State* L, int opts, const char* op, const char* name, Pair def) {
  if (!lua_istable(L, opts)) return def;
  lua_getfield(L, opts, name);
  Pair p = def;
  bool ok = true;
  if (lua_isinteger(L, -1)) {
    p = {lua_tointeger(L, -1), lua_tointeger(L, -1)};
  } else if (lua_istable(L, -1) && luaL_len(L, -1) == 2) {
    for (int i = 0; i < 2; ++i) {
      lua_geti(L, -1, i + 1);
      ok = ok && lua_isinteger(L, -1);
      p[size_t(i)] = lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
  } else {
    ok = lua_isnil(L, -1);
  }
  ok = ok && p[0] >= 1 && p[1] >= 1;
  if (!ok)
    throw Error(std::string(op) + ": " + name + " must be a positive integer or a pair of them, got " + value_str(L, -1));
  lua_pop(L, 1);
  return p;
}

// The explicit padding table on top of the stack, {{top, bottom}, {left, right}}, into win.
void read_explicit_padding(lua_State* L, const char* op, Window2D& win) {
  for (int i = 0; i < 2; ++i) {
    lua_geti(L, -1, i + 1);
    if (!lua_istable(L, -1)) throw Error(std::string(op) + kExplicitPadding);
    lua_geti(L, -1, 1);
    lua_geti(L, -2, 2);
    int ok_lo = 0, ok_hi = 0;
    win.pad_lo[size_t(i)] = lua_tointegerx(L, -2, &ok_lo);
    win.pad_hi[size_t(i)] = lua_tointegerx(L, -1, &ok_hi);
    if (!ok_lo || !ok_hi || win.pad_lo[size_t(i)] < 0 || win.pad_hi[size_t(i)] < 0)
      throw Error(std::string(op) + kExplicitPadding);
    lua_pop(L, 3);
  }
}

// opts.padding: "valid" (the default), "same", or "explicit" after reading the table into win.
std::string padding_mode(lua_State* L, int opts, const char* op, Window2D& win) {
  if (!lua_istable(L, opts)) return "valid";
  lua_getfield(L, opts, "padding");
  std::string mode = "valid";
  if (lua_istable(L, -1)) read_explicit_padding(L, op, win), mode = "explicit";
  else if (!lua_isnil(L, -1)) mode = luaL_tolstring(L, -1, nullptr), lua_pop(L, 1);
  lua_pop(L, 1);
  if (mode != "valid" && mode != "same" && mode != "explicit")
    throw Error(std::string(op) + ": padding must be \"valid\", \"same\" or {{top, bottom}, {left, right}}, got \"" +
                            mode + "\"");
  return mode;
}

// Sets win's padding from opts.padding for an input of `in` rows and columns ("same": the
// output has ceil(in / stride) elements, the odd padding element at the end). Returns the mode.
std::string set_padding(lua_State* L, int opts, const char* op, Window2D& win, const Pair& in) {
  const std::string mode = padding_mode(L, opts, op, win);
  for (int i = 0; i < 2 && mode == "same"; ++i) {
    const int64_t span = (win.size[i] - 1) * win.rhs_dilation[i] + 1, s = win.stride[i], n = in[size_t(i)];
    const int64_t total = std::max<int64_t>(((n + s - 1) / s - 1) * s + span - n, 0);
    win.pad_lo[i] = total / 2;
    win.pad_hi[i] = total - total / 2;
  }
  return mode;
}

// A pool's window must fit its input. (conv2d leaves this to conv's shape rule; reduce_window's
// rule would name the op, not the pool the user called.)
void check_pool_fit(const char* op, const Window2D& win, const Pair& in, const std::string& mode) {
  for (int i = 0; i < 2; ++i)
    if (in[size_t(i)] + win.pad_lo[i] + win.pad_hi[i] < win.size[i])
      throw Error(std::string(op) + ": the " + pair_str(win.size) + " window does not fit the " + pair_str(in) +
                  " input " + (mode == "explicit" ? "with the given padding" : "with padding \"" + mode + "\"") +
                  "; use padding = \"same\" or a smaller window");
}

void check_nhwc(const char* op, LuaTensor* x) {
  if (x->shape().size() != 4)
    throw Error(std::string(op) + ": the input must be a rank-4 NHWC tensor [batch, height, width, channels], got " +
                            type_str(x->dtype(), x->shape()));
}

DType float_type(DType a, DType b) { return a == b && is_float(a) ? a : DType::f32; }

// opts.groups: a positive integer that splits the input's c channels and the filter's (rank 4)
// so that the filter holds c / groups input channels per group (1 when absent).
int64_t conv_groups(lua_State* L, int opts, const Shape& xs, LuaTensor* w) {
  const Shape ws = w->shape();
  int64_t groups = 1;
  if (lua_istable(L, opts)) {
    lua_getfield(L, opts, "groups");
    int ok = 1;
    if (!lua_isnil(L, -1)) groups = lua_tointegerx(L, -1, &ok);
    if (!ok || groups < 1) throw Error("conv2d: groups must be a positive integer, got " + value_str(L, -1));
    lua_pop(L, 1);
  }
  if (groups == 1) return 1;  // the conv's own shape rule names a channel mismatch
  const std::string g = std::to_string(groups), c = std::to_string(xs[3]);
  if (xs[3] % groups != 0 || groups > xs[3]) throw Error("conv2d: the input's " + c + " channels do not split into groups = " + g);
  if (ws[2] * groups != xs[3])
    throw Error("conv2d: the filter must have " + std::to_string(xs[3] / groups) + " input channels (" + c +
                " channels in " + g + " groups), got " + type_str(w->dtype(), ws));
  if (ws[3] % groups != 0)
    throw Error("conv2d: the filter's " + std::to_string(ws[3]) + " output channels do not split into groups = " + g);
  return groups;
}

int l_conv2d(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  LuaTensor* w = check_tensor(L, 2);
  check_options(L, 3, {"strides", "dilation", "padding", "groups"});
  check_no_more(L, 3);
  check_nhwc("conv2d", x);
  const Shape xs = x->shape(), ws = w->shape();
  if (ws.size() != 4)
    throw Error("conv2d: the filter must be a rank-4 HWIO tensor [height, width, in_channels, out_channels], got " +
                            type_str(w->dtype(), ws));
  const int64_t groups = conv_groups(L, 3, xs, w);
  Window2D win;
  win.size = {ws[0], ws[1]};
  win.stride = opt_pair(L, 3, "conv2d", "strides", {1, 1});
  win.rhs_dilation = opt_pair(L, 3, "conv2d", "dilation", {1, 1});
  set_padding(L, 3, "conv2d", win, {xs[1], xs[2]});
  const DType t = float_type(x->dtype(), w->dtype());
  return apply_op(L, {{x, 0}, {w, 0}}, DType::f32, [win, t, groups](Graph& g, const std::vector<NodeId>& in) {
    return g.conv(g.convert(in[0], t), g.convert(in[1], t), win, groups);
  });
}

// opts.output_padding: absent, or a non-negative integer or pair of them below the strides.
std::optional<Pair> output_padding(lua_State* L, int opts, const Pair& strides) {
  if (!lua_istable(L, opts)) return std::nullopt;
  lua_getfield(L, opts, "output_padding");
  if (lua_isnil(L, -1)) return lua_pop(L, 1), std::nullopt;
  Pair p{-1, -1};  // -1: not an integer
  if (lua_isinteger(L, -1)) p = {lua_tointeger(L, -1), lua_tointeger(L, -1)};
  else if (lua_istable(L, -1) && luaL_len(L, -1) == 2)
    for (int i = 0; i < 2; ++i) {
      lua_geti(L, -1, i + 1);
      p[size_t(i)] = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : -1;
      lua_pop(L, 1);
    }
  for (int i = 0; i < 2; ++i)
    if (p[size_t(i)] < 0 || p[size_t(i)] >= strides[size_t(i)])
      throw Error("conv2d_transpose: output_padding must be a non-negative integer or pair of them below the strides (" +
                  pair_str(strides) + "), got " + value_str(L, -1));
  lua_pop(L, 1);
  return p;
}

// The transposed conv's output length along one dim, as Keras's Conv2DTranspose computes it.
int64_t transposed_length(int64_t in, int64_t span, int64_t stride, bool same, std::optional<int64_t> extra) {
  if (!extra) return same ? in * stride : in * stride + std::max<int64_t>(span - stride, 0);
  return (in - 1) * stride + span - (same ? 2 * (span / 2) : 0) + *extra;
}

// The transposed convolution: the input gradient of the conv (strides, padding, dilation) that
// maps the output's shape to x's, applied to x. w is that conv's filter, [Kh,Kw,O,C].
int l_conv2d_transpose(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  LuaTensor* w = check_tensor(L, 2);
  check_options(L, 3, {"strides", "dilation", "padding", "output_padding"});
  check_no_more(L, 3);
  check_nhwc("conv2d_transpose", x);
  const Shape xs = x->shape(), ws = w->shape();
  if (ws.size() != 4 || ws[3] != xs[3])
    throw Error("conv2d_transpose: the filter must be a rank-4 tensor [height, width, out_channels, in_channels] "
                "with the input's " + std::to_string(xs[3]) + " channels last, got " + type_str(w->dtype(), ws));
  Window2D win;
  win.size = {ws[0], ws[1]};
  win.stride = opt_pair(L, 3, "conv2d_transpose", "strides", {1, 1});
  win.rhs_dilation = opt_pair(L, 3, "conv2d_transpose", "dilation", {1, 1});
  for (int i = 0; i < 2; ++i)  // keeps the output length arithmetic below within int64
    if (std::max({win.size[i], win.stride[i], win.rhs_dilation[i]}) > kMaxWindowAttr)
      throw Error("conv2d_transpose: kernel sizes, strides and dilations must be at most " + std::to_string(kMaxWindowAttr));
  const std::optional<Pair> extra = output_padding(L, 3, win.stride);
  const std::string mode = padding_mode(L, 3, "conv2d_transpose", win);
  if (mode == "explicit") throw Error("conv2d_transpose: padding must be \"valid\" or \"same\"");
  const bool same = mode == "same";
  Shape out = {xs[0], 0, 0, ws[2]};
  for (int i = 0; i < 2; ++i) {
    const int64_t span = (win.size[i] - 1) * win.rhs_dilation[i] + 1, s = win.stride[i];
    const int64_t n = transposed_length(xs[size_t(i + 1)], span, s, same,
                                        extra ? std::optional<int64_t>((*extra)[size_t(i)]) : std::nullopt);
    out[size_t(i + 1)] = n;
    if (same) {
      const int64_t total = std::max<int64_t>(((n + s - 1) / s - 1) * s + span - n, 0);
      win.pad_lo[i] = total / 2, win.pad_hi[i] = total - total / 2;
    }
    if (n < 1 || win.output_size(i, n) != xs[size_t(i + 1)])
      throw Error("conv2d_transpose: the " + pair_str(win.size) + " window with strides " + pair_str(win.stride) +
                  " has no output of " + std::to_string(n) + (i == 0 ? " rows" : " columns") + " that maps to the input's " +
                  std::to_string(xs[size_t(i + 1)]) + "; change output_padding");
  }
  const DType t = float_type(x->dtype(), w->dtype());
  return apply_op(L, {{x, 0}, {w, 0}}, DType::f32, [win, t, out](Graph& g, const std::vector<NodeId>& in) {
    return conv_input_grad(g, g.convert(in[0], t), g.convert(in[1], t), win, out, 1);
  });
}

// The pool window from opts (pool_size default 2, strides default pool_size).
Window2D pool_window(lua_State* L, const char* op, LuaTensor* x) {
  check_options(L, 2, {"pool_size", "strides", "padding"});
  check_no_more(L, 2);
  check_nhwc(op, x);
  Window2D win;
  win.size = opt_pair(L, 2, op, "pool_size", {2, 2});
  win.stride = opt_pair(L, 2, op, "strides", win.size);
  const Pair in = {x->shape()[1], x->shape()[2]};
  check_pool_fit(op, win, in, set_padding(L, 2, op, win, in));
  return win;
}

int l_max_pool2d(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const Window2D win = pool_window(L, "max_pool2d", x);
  return apply_op(L, {{x, 0}}, DType::f32, [win](Graph& g, const std::vector<NodeId>& in) {
    return g.reduce_window(in[0], WindowKind::max, win);
  });
}

// The window sums divided by the number of input elements each window covers (padding is
// not counted).
int l_avg_pool2d(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const Window2D win = pool_window(L, "avg_pool2d", x);
  return apply_op(L, {{x, 0}}, DType::f32, [win](Graph& g, const std::vector<NodeId>& in) {
    NodeId v = in[0];
    if (!is_float(g.at(v).dtype)) v = g.convert(v, DType::f32);
    const DType t = g.at(v).dtype;
    const Shape xs = g.at(v).shape;
    NodeId sum = g.reduce_window(v, WindowKind::sum, win);
    const Shape ys = g.at(sum).shape;
    bool padded = false;
    for (int i = 0; i < 2; ++i) padded = padded || win.pad_lo[i] != 0 || win.pad_hi[i] != 0;
    NodeId count = padded ? g.reduce_window(g.full(t, {1, xs[1], xs[2], 1}, 1), WindowKind::sum, win)
                          : g.scalar(t, double(win.size[0] * win.size[1]));
    return g.binary(Op::div, sum, g.broadcast_to(count, ys));
  });
}

// core.attention(q, k, v, keep, scale, causal, bias) -> softmax(q k^T + bias) v over the last two
// dims in one op (Graph::attention), for nn.MultiHeadAttention: keep (a bool mask [..., T, S], or
// nil) and scale make the dropout on the probabilities, causal (a boolean) the lower-triangular
// mask, bias (f32 [..., T or 1, S] broadcast, or nil) the padding mask as 0 / -1e9.
int l_attention(lua_State* L) {
  LuaTensor* q = check_tensor(L, 1);
  LuaTensor* k = check_tensor(L, 2);
  LuaTensor* v = check_tensor(L, 3);
  LuaTensor* keep = lua_isnoneornil(L, 4) ? nullptr : check_tensor(L, 4);
  const double scale = luaL_optnumber(L, 5, 1);
  const bool causal = lua_toboolean(L, 6);
  LuaTensor* bias = lua_isnoneornil(L, 7) ? nullptr : check_tensor(L, 7);
  check_no_more(L, 7);
  std::vector<Operand> operands = {{q, 0}, {k, 0}, {v, 0}};
  if (keep) operands.push_back({keep, 0});
  if (bias) operands.push_back({bias, 0});
  const bool has_keep = keep != nullptr;
  return apply_op(L, operands, DType::f32, [scale, causal, has_keep](Graph& g, const std::vector<NodeId>& in) {
    auto at = [&](size_t i) { return i < in.size() ? std::optional<NodeId>(in[i]) : std::nullopt; };
    return g.attention(in[0], in[1], in[2], has_keep ? at(3) : std::nullopt, scale, causal, at(has_keep ? 4 : 3));
  });
}

const LuaFunction kFunctions[] = {fn<l_attention>("attention")};

const LuaFunction kMethods[] = {
    fn<l_conv2d>("conv2d"), fn<l_conv2d_transpose>("conv2d_transpose"),
    fn<l_max_pool2d>("max_pool2d"), fn<l_avg_pool2d>("avg_pool2d")};

}  // namespace

void register_nn_ops(lua_State* L, int methods, int core) {
  lua_pushvalue(L, methods);
  set_functions(L, -1, kMethods);
  lua_pop(L, 1);
  lua_pushvalue(L, core);
  set_functions(L, -1, kFunctions);
  lua_pop(L, 1);
}

}  // namespace tpu
