-- The ONNX form of each exportable layer class, for model:export (tpu.nn.onnx): a table from
-- the class to emit(g, layer, x, out_shape) -> value, where g is the graph under construction,
-- x the input value (a list of values for merge layers) and out_shape tputrain's output shape.
-- Each emitter writes the same arithmetic as the layer's call in inference (opset 13 ops only:
-- GELU and LayerNorm are spelled out, as opset 13 has neither).
local onnx = require "tpu.nn.onnx"
local util = require "tpu.nn.util"

local nn = require("tpu").nn

local E = {}

local value, axis = onnx.value, onnx.axis

-- The value of a new node op_type(inputs), named after the layer, of tputrain shape `shape`
-- in `layout` (dtype: f32 unless given).
local function apply(g, layer, op_type, inputs, attrs, shape, layout, dtype)
  return value(g:op(op_type, inputs, attrs, layer.name), shape, dtype or "f32", layout)
end

-- The layer's weight `name` as an initializer (reshaped, then transposed by the 1-based perm).
local function weight(g, layer, name, reshape, perm)
  return g:weight(layer.name .. "/" .. name, layer[name], reshape, perm)
end

-- op_type(x, ...) keeping x's shape and layout.
local function same(g, layer, op_type, x, others, attrs)
  return apply(g, layer, op_type, {x.name, table.unpack(others or {})}, attrs, x.shape, x.layout)
end

---------------------------------------------------------------- activations

local activations = {
  linear = function(_, _, x) return x end,
  relu = function(g, layer, x) return same(g, layer, "Relu", x) end,
  sigmoid = function(g, layer, x) return same(g, layer, "Sigmoid", x) end,
  tanh = function(g, layer, x) return same(g, layer, "Tanh", x) end,
  softmax = function(g, layer, x) return same(g, layer, "Softmax", x, nil, {axis = axis(x, -1)}) end,
  relu6 = function(g, layer, x) return same(g, layer, "Clip", x, {g:scalar(0), g:scalar(6)}) end,
  -- Keras's hard_sigmoid: relu6(x + 3) / 6, which is ONNX's HardSigmoid with these constants
  hard_sigmoid = function(g, layer, x)
    return same(g, layer, "HardSigmoid", x, nil, {alpha = 1 / 6, beta = 0.5})
  end,
}
-- x * sigmoid(x) and x * hard_sigmoid(x)
for name, gate in pairs {swish = "sigmoid", hard_swish = "hard_sigmoid"} do
  activations[name] = function(g, layer, x)
    return same(g, layer, "Mul", x, {activations[gate](g, layer, x).name})
  end
end
activations.silu, activations.hard_silu = activations.swish, activations.hard_swish
-- the exact GELU: x / 2 * (1 + erf(x / sqrt 2)) (opset 13 has no Gelu)
function activations.gelu(g, layer, x)
  local e = same(g, layer, "Erf", same(g, layer, "Mul", x, {g:scalar(1 / math.sqrt(2))}))
  local half = same(g, layer, "Mul", x, {g:scalar(0.5)})
  return same(g, layer, "Mul", half, {same(g, layer, "Add", e, {g:scalar(1)}).name})
end

-- the tanh form: x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
function activations.gelu_approximate(g, layer, x)
  local cube = same(g, layer, "Mul", same(g, layer, "Mul", x, {x.name}), {x.name})
  local inner = same(g, layer, "Add", x, {same(g, layer, "Mul", cube, {g:scalar(0.044715)}).name})
  local t = same(g, layer, "Tanh", same(g, layer, "Mul", inner, {g:scalar(math.sqrt(2 / math.pi))}))
  local half = same(g, layer, "Mul", x, {g:scalar(0.5)})
  return same(g, layer, "Mul", half, {same(g, layer, "Add", t, {g:scalar(1)}).name})
end

-- elu (alpha 1), selu (the constants of tensor.lua's selu), leaky_relu (slope 0.2), as ONNX's
-- ops of those names
local selu_alpha, selu_scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
function activations.elu(g, layer, x) return same(g, layer, "Elu", x, nil, {alpha = 1.0}) end
function activations.selu(g, layer, x)
  return same(g, layer, "Selu", x, nil, {alpha = selu_alpha, gamma = selu_scale})
end
function activations.leaky_relu(g, layer, x) return same(g, layer, "LeakyRelu", x, nil, {alpha = 0.2}) end
function activations.softplus(g, layer, x) return same(g, layer, "Softplus", x) end
function activations.softsign(g, layer, x) return same(g, layer, "Softsign", x) end
function activations.exponential(g, layer, x) return same(g, layer, "Exp", x) end
-- x * tanh(softplus(x)) (opset 13 has no Mish)
function activations.mish(g, layer, x)
  return same(g, layer, "Mul", x, {same(g, layer, "Tanh", activations.softplus(g, layer, x)).name})
end
function activations.log_softmax(g, layer, x)
  return same(g, layer, "LogSoftmax", x, nil, {axis = axis(x, -1)})
end

local function activation_names()
  local names = {}
  for k in pairs(activations) do names[#names + 1] = k end
  table.sort(names)
  return names
end

-- x through the activation called `name`, or the export error naming the layer.
local function activate(g, layer, name, x)
  local f = activations[name]
  if not f then
    onnx.fail(layer, "has %s activation, which has no ONNX form; the exportable activations are %s",
      name == "custom" and "a custom (function)" or "the '" .. tostring(name) .. "'",
      table.concat(activation_names(), ", "))
  end
  return f(g, layer, x)
end

E[nn.Activation] = function(g, layer, x) return activate(g, layer, layer.activation, x) end

E[nn.ELU] = function(g, layer, x) return same(g, layer, "Elu", x, nil, {alpha = layer.alpha + 0.0}) end

E[nn.LeakyReLU] = function(g, layer, x)
  return same(g, layer, "LeakyRelu", x, nil, {alpha = layer.negative_slope + 0.0})
end

-- Keras's relu(x, negative_slope, max_value, threshold) in the steps of nn.ReLU's call: x where
-- x > threshold else 0, clipped to [0, max_value], minus negative_slope * relu(threshold - x).
E[nn.ReLU] = function(g, layer, x)
  local slope, max_value, threshold = layer.negative_slope, layer.max_value, layer.threshold
  if slope ~= 0 and max_value == nil and threshold == 0 then
    return same(g, layer, "LeakyRelu", x, nil, {alpha = slope + 0.0})
  end
  local y
  if threshold ~= 0 then
    local above = apply(g, layer, "Greater", {x.name, g:scalar(threshold)}, nil, x.shape, x.layout, "bool")
    y = apply(g, layer, "Where", {above.name, x.name, g:scalar(0)}, nil, x.shape, x.layout)
  else
    y = same(g, layer, "Relu", x)
  end
  if max_value then y = same(g, layer, "Clip", y, {g:scalar(0), g:scalar(max_value)}) end
  if slope ~= 0 then
    local below = apply(g, layer, "Sub", {g:scalar(threshold), x.name}, nil, x.shape, x.layout)
    local leak = same(g, layer, "Mul", same(g, layer, "Relu", below), {g:scalar(slope)})
    y = same(g, layer, "Sub", y, {leak.name})
  end
  return y
end

-- over the layer's axis (1-based over tputrain's shape, the batch first)
E[nn.Softmax] = function(g, layer, x)
  return same(g, layer, "Softmax", x, nil, {axis = axis(x, util.axis(layer.axis, #x.shape) - 1)})
end

-- x + bias (when the layer has one), then the layer's activation.
local function finish(g, layer, x, bias)
  if bias then x = same(g, layer, "Add", x, {bias}) end
  return activate(g, layer, layer.activation_name, x)
end

---------------------------------------------------------------- dense and convolutions

E[nn.Dense] = function(g, layer, x, shape)
  x = g:as_layout(x, "last")
  local kernel = weight(g, layer, "kernel")
  local y = apply(g, layer, "MatMul", {x.name, kernel}, nil, shape, "last")
  return finish(g, layer, y, layer.use_bias and weight(g, layer, "bias"))
end

-- {before, after} padding of one spatial axis of n positions for a window of k taps, stride
-- s, dilation d, as tputrain pads: "same" puts the odd element after; "causal" all before.
local function pads_of(n, k, s, d, padding, layer)
  local span = (k - 1) * d + 1
  if padding == "causal" then return span - 1, 0 end
  if padding ~= "same" then return 0, 0 end
  if n < 0 then onnx.fail(layer, "has padding \"same\" over an axis of unknown size") end
  local total = math.max(((n + s - 1) // s - 1) * s + span - n, 0)
  return total // 2, total - total // 2
end

-- The Conv/pool attribute pads = {begins..., ends...} for the spatial axes of x (tputrain shape).
local function spatial_pads(layer, x, kernel, strides, dilation, padding)
  local begins, ends = {}, {}
  for i = 1, #kernel do
    begins[i], ends[i] = pads_of(x.shape[i + 1], kernel[i], strides[i], dilation[i], padding, layer)
  end
  return table.move(ends, 1, #ends, #begins + 1, begins)
end

-- Conv of x (channels first) by the ONNX-layout kernel `w` (O, I / groups, window...).
local function conv(g, layer, x, w, bias, shape, opts)
  local attrs = {kernel_shape = opts.kernel, strides = opts.strides, dilations = opts.dilation,
                 group = opts.groups or 1,
                 pads = spatial_pads(layer, x, opts.kernel, opts.strides, opts.dilation, opts.padding)}
  local inputs = {x.name, w, bias}
  return apply(g, layer, "Conv", inputs, attrs, shape, "first")
end

local function bias_of(g, layer)
  return layer.use_bias and weight(g, layer, "bias") or nil
end

local function conv2d_opts(layer, groups)
  return {kernel = layer.kernel_size, strides = layer.strides, dilation = layer.dilation_rate,
          padding = layer.padding, groups = groups}
end

E[nn.Conv2D] = function(g, layer, x, shape)
  x = g:as_layout(x, "first")
  local w = weight(g, layer, "kernel", nil, {4, 3, 1, 2})  -- HWIO -> OIHW
  local y = conv(g, layer, x, w, bias_of(g, layer), shape, conv2d_opts(layer, layer.groups))
  return activate(g, layer, layer.activation_name, y)
end

E[nn.Conv1D] = function(g, layer, x, shape)
  x = g:as_layout(x, "first")
  local w = weight(g, layer, "kernel", nil, {3, 2, 1})  -- (k, I, O) -> (O, I, k)
  local opts = {kernel = {layer.kernel_size}, strides = {layer.strides}, dilation = {layer.dilation_rate},
                padding = layer.padding, groups = layer.groups}
  local y = conv(g, layer, x, w, bias_of(g, layer), shape, opts)
  return activate(g, layer, layer.activation_name, y)
end

-- The depthwise conv of x (channels first): one group per input channel, each with its
-- depth_multiplier filters, the kernel (kh, kw, c, m) as (c * m, 1, kh, kw).
local function depthwise(g, layer, x, shape, bias)
  local kh, kw, c, m = table.unpack(layer.depthwise_kernel.shape)
  local w = weight(g, layer, "depthwise_kernel", {kh, kw, 1, c * m}, {4, 3, 1, 2})
  return conv(g, layer, x, w, bias, shape, conv2d_opts(layer, c))
end

E[nn.DepthwiseConv2D] = function(g, layer, x, shape)
  local y = depthwise(g, layer, g:as_layout(x, "first"), shape, bias_of(g, layer))
  return activate(g, layer, layer.activation_name, y)
end

E[nn.SeparableConv2D] = function(g, layer, x, shape)
  local mid_shape = util.copy(shape)
  mid_shape[4] = layer.pointwise_kernel.shape[3]
  local mid = depthwise(g, layer, g:as_layout(x, "first"), mid_shape)
  local w = weight(g, layer, "pointwise_kernel", nil, {4, 3, 1, 2})
  local y = conv(g, layer, mid, w, bias_of(g, layer), shape,
    {kernel = {1, 1}, strides = {1, 1}, dilation = {1, 1}, padding = "valid"})
  return activate(g, layer, layer.activation_name, y)
end

-- ConvTranspose's pads and output_padding for the output sizes tputrain computes: ONNX's
-- output is s * (n - 1) + output_padding + span - begin - end; begin is the forward conv's.
local function transpose_pads(layer, x, shape)
  local begins, ends, extra = {}, {}, {}
  for i = 1, 2 do
    local n, out, s, d = x.shape[i + 1], shape[i + 1], layer.strides[i], layer.dilation_rate[i]
    local span = (layer.kernel_size[i] - 1) * d + 1
    begins[i] = pads_of(out, layer.kernel_size[i], s, d, layer.padding, layer)
    local rest = s * (n - 1) + span - begins[i] - out
    ends[i], extra[i] = math.max(rest, 0), math.max(-rest, 0)
  end
  return table.move(ends, 1, 2, 3, begins), extra
end

E[nn.Conv2DTranspose] = function(g, layer, x, shape)
  x = g:as_layout(x, "first")
  local w = weight(g, layer, "kernel", nil, {4, 3, 1, 2})  -- (kh, kw, O, I) -> (I, O, kh, kw)
  local pads, extra = transpose_pads(layer, x, shape)
  local y = apply(g, layer, "ConvTranspose", {x.name, w, bias_of(g, layer)},
    {kernel_shape = layer.kernel_size, strides = layer.strides, dilations = layer.dilation_rate,
     pads = pads, output_padding = extra}, shape, "first")
  return activate(g, layer, layer.activation_name, y)
end

---------------------------------------------------------------- pooling

local function pool(op_type, extra)
  return function(g, layer, x, shape)
    x = g:as_layout(x, "first")
    local attrs = {kernel_shape = layer.pool_size, strides = layer.strides,
                   pads = spatial_pads(layer, x, layer.pool_size, layer.strides, {1, 1}, layer.padding)}
    for k, v in pairs(extra) do attrs[k] = v end
    return apply(g, layer, op_type, {x.name}, attrs, shape, "first")
  end
end
E[nn.MaxPool2D] = pool("MaxPool", {})
E[nn.AvgPool2D] = pool("AveragePool", {count_include_pad = 0})  -- as tputrain: padding not counted

local function global_pool(op_type)
  return function(g, layer, x, shape)
    local attrs = {axes = {axis(x, 1), axis(x, 2)}, keepdims = layer.keepdims and 1 or 0}
    return apply(g, layer, op_type, {x.name}, attrs, shape, x.layout)
  end
end
E[nn.GlobalAvgPool2D] = global_pool("ReduceMean")
E[nn.GlobalMaxPool2D] = global_pool("ReduceMax")

---------------------------------------------------------------- normalization

-- A per-channel constant or weight as a value that broadcasts against x: [C] channels last,
-- [C, 1, ...] channels first.
local function per_channel(g, base, list_or_tensor, x)
  local t = list_or_tensor
  local n = util.is_tensor(t) and t.shape[1] or #t
  local dims = {n}
  for i = 1, x.layout == "first" and #x.shape - 2 or 0 do dims[i + 1] = 1 end
  if util.is_tensor(t) then return g:weight(base, t, dims) end
  return g:floats(base, t, dims)
end

E[nn.BatchNorm] = function(g, layer, x)
  x = g:as_layout(x, "first")
  local c = layer.moving_mean.shape[1]
  local function param(name, fill)
    if layer[name] and util.is_tensor(layer[name]) then return weight(g, layer, name) end
    local list = {}
    for i = 1, c do list[i] = fill end
    return g:floats(layer.name .. "/" .. name, list, {c})
  end
  local stats = {param("gamma", 1), param("beta", 0), param("moving_mean"), param("moving_variance")}
  return same(g, layer, "BatchNormalization", x, stats, {epsilon = layer.epsilon + 0.0})
end

-- (x - mean) * (var + eps)^(-1/2) * gamma + beta over the last axis (opset 13 has no
-- LayerNormalization).
E[nn.LayerNorm] = function(g, layer, x)
  x = g:as_layout(x, "last")
  local function mean(v)
    return same(g, layer, "ReduceMean", v, nil, {axes = {-1}, keepdims = 1})
  end
  local centered = same(g, layer, "Sub", x, {mean(x).name})
  local var = mean(same(g, layer, "Mul", centered, {centered.name}))
  local std = same(g, layer, "Sqrt", same(g, layer, "Add", var, {g:scalar(layer.epsilon)}))
  local y = same(g, layer, "Mul", centered, {same(g, layer, "Reciprocal", std).name})
  if layer.scale then y = same(g, layer, "Mul", y, {weight(g, layer, "gamma")}) end
  if layer.center then y = same(g, layer, "Add", y, {weight(g, layer, "beta")}) end
  return y
end

-- (x - mean) / max(sqrt(variance), 1e-7), the statistics broadcast along the layer's axis.
E[nn.Normalization] = function(g, layer, x)
  x = g:as_layout(x, "last")
  local function stat(name)
    local v = layer[name .. "_value"]
    if type(v) == "number" then return g:scalar(v) end
    if v then return g:floats(layer.name .. "/" .. name, v, layer.broadcast) end
    return weight(g, layer, name, layer.broadcast)
  end
  local root = apply(g, layer, "Sqrt", {stat("variance")}, nil, x.shape, "last")
  local std = same(g, layer, "Max", root, {g:scalar(1e-7)})
  return same(g, layer, "Div", same(g, layer, "Sub", x, {stat("mean")}), {std.name})
end

---------------------------------------------------------------- shapes and merges

E[nn.Flatten] = function(g, layer, x, shape)
  return apply(g, layer, "Flatten", {g:as_layout(x, "last").name}, {axis = 1}, shape, "last", x.dtype)
end

E[nn.Reshape] = function(g, layer, x, shape)
  local target = {0}  -- 0: the input's size (the batch)
  for i, d in ipairs(layer.target_shape) do target[i + 1] = d end
  local dims = g:int64s(layer.name .. "/shape", target)
  return apply(g, layer, "Reshape", {g:as_layout(x, "last").name, dims}, nil, shape, "last", x.dtype)
end

E[nn.Dropout] = function(_, _, x) return x end

E[nn.Rescaling] = function(g, layer, x)
  if x.dtype ~= "f32" then x = same(g, layer, "Cast", x, nil, {to = 1}) end  -- 1: FLOAT
  local function factor(name, v)
    return type(v) == "number" and g:scalar(v) or per_channel(g, layer.name .. "/" .. name, v, x)
  end
  local y = same(g, layer, "Mul", x, {factor("scale", layer.scale)})
  if layer.offset ~= 0 then y = same(g, layer, "Add", y, {factor("offset", layer.offset)}) end
  return y
end

-- The inputs of a merge layer in the first one's layout.
local function aligned(g, xs)
  local list = {}
  for i, x in ipairs(xs) do list[i] = g:as_layout(x, xs[1].layout) end
  return list
end

local function fold(op_type)
  return function(g, layer, xs, shape)
    xs = aligned(g, xs)
    local y = xs[1]
    for i = 2, #xs do y = apply(g, layer, op_type, {y.name, xs[i].name}, nil, shape, xs[1].layout) end
    return y
  end
end
E[nn.Add] = fold("Add")
E[nn.Multiply] = fold("Mul")

E[nn.Concatenate] = function(g, layer, xs, shape)
  xs = aligned(g, xs)
  local names = {}
  for i, x in ipairs(xs) do names[i] = x.name end
  local a = util.axis(layer.axis, #shape) - 1
  return apply(g, layer, "Concat", names, {axis = axis(xs[1], a)}, shape, xs[1].layout, xs[1].dtype)
end

---------------------------------------------------------------- image borders and resizing

-- The int64 pads of Pad for x: {begins..., ends...} over x's axes in its layout, `m` the
-- layer's {{top, bottom}, {left, right}}.
local function border_pads(x, m)
  local r, pads = #x.shape, {}
  for i = 1, 2 * r do pads[i] = 0 end
  for i = 1, 2 do
    local a = axis(x, i)
    pads[a + 1], pads[r + a + 1] = m[i][1], m[i][2]
  end
  return pads
end

E[nn.ZeroPadding2D] = function(g, layer, x, shape)
  local pads = g:int64s(layer.name .. "/pads", border_pads(x, layer.padding))
  return apply(g, layer, "Pad", {x.name, pads}, nil, shape, x.layout)
end

E[nn.Cropping2D] = function(g, layer, x, shape)
  local c, s = layer.cropping, x.shape
  local starts = g:int64s(layer.name .. "/starts", {c[1][1], c[2][1]})
  local ends = g:int64s(layer.name .. "/ends", {s[2] - c[1][2], s[3] - c[2][2]})
  local axes = g:int64s(layer.name .. "/axes", {axis(x, 1), axis(x, 2)})
  return apply(g, layer, "Slice", {x.name, starts, ends, axes}, nil, shape, x.layout)
end

-- nearest: output o reads input floor(o / size); bilinear: half-pixel centres with the edges
-- clamped, as tf.image.resize and tputrain's UpSampling2D.
E[nn.UpSampling2D] = function(g, layer, x, shape)
  x = g:as_layout(x, "first")
  local scales = g:floats(layer.name .. "/scales", {1, 1, layer.size[1], layer.size[2]}, {4})
  local attrs = layer.interpolation == "nearest"
    and {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"}
    or {mode = "linear", coordinate_transformation_mode = "half_pixel"}
  return apply(g, layer, "Resize", {x.name, "", scales}, attrs, shape, "first")
end

---------------------------------------------------------------- embeddings

E[nn.Embedding] = function(g, layer, ids, shape)
  if ids.dtype ~= "i32" then ids = apply(g, layer, "Cast", {ids.name}, {to = 6}, ids.shape, "last", "i32") end
  local table_ = weight(g, layer, "embeddings")
  return apply(g, layer, "Gather", {table_, ids.name}, {axis = 0}, shape, "last")
end

---------------------------------------------------------------- attention

-- [batch, length, features] @ kernel (+ bias) -> [batch, heads, length, dim]
local function heads(g, layer, x, name, dim)
  local b, len, h = x.shape[1], x.shape[2], layer.num_heads
  x = g:as_layout(x, "last")
  local w = weight(g, layer, name .. "_kernel")
  local y = apply(g, layer, "MatMul", {x.name, w}, nil, {b, len, h * dim}, "last")
  if layer.use_bias then y = same(g, layer, "Add", y, {weight(g, layer, name .. "_bias")}) end
  local split = g:int64s(layer.name .. "/" .. name .. "_heads", {0, 0, h, dim})  -- 0: the input's size
  y = apply(g, layer, "Reshape", {y.name, split}, nil, {b, len, h, dim}, "last")
  return apply(g, layer, "Transpose", {y.name}, {perm = {0, 2, 1, 3}}, {b, h, len, dim}, "last")
end

-- scores + (1 - mask) * -1e9, the mask [batch, S] or [batch, T, S] (nonzero or true: attend)
-- broadcast over the heads (and the queries).
local function masked(g, layer, scores, mask)
  local m = mask  -- 9: BOOL (nonzero is true)
  if m.dtype ~= "bool" then m = apply(g, layer, "Cast", {m.name}, {to = 9}, m.shape, "last", "bool") end
  m = apply(g, layer, "Cast", {m.name}, {to = 1}, mask.shape, "last")  -- 1: FLOAT
  local axes = g:int64s(layer.name .. "/mask_axes", #mask.shape == 2 and {1, 2} or {1})
  m = apply(g, layer, "Unsqueeze", {m.name, axes}, nil, scores.shape, "last")
  local drop = apply(g, layer, "Sub", {g:scalar(1), m.name}, nil, scores.shape, "last")
  return same(g, layer, "Add", scores, {same(g, layer, "Mul", drop, {g:scalar(-1e9)}).name})
end

-- The [T, S] f32 mask, 1 where key s comes after query t, for lengths known only when the
-- graph runs: Range over each length from the scores' shape, compared.
local function later_keys(g, layer, scores)
  local dims = apply(g, layer, "Shape", {scores.name}, nil, {4}, "last", "i64")
  local zero, one = g:int64(0), g:int64(1)
  local function positions(a, n)  -- 0 .. n - 1 along axis `a` of the scores
    local len = apply(g, layer, "Gather", {dims.name, g:int64(a)}, {axis = 0}, {}, "last", "i64")
    return apply(g, layer, "Range", {zero, len.name, one}, nil, {n}, "last", "i64")
  end
  local t, s = scores.shape[3], scores.shape[4]
  local row_axis = g:int64s(layer.name .. "/row_axis", {1})
  local rows = apply(g, layer, "Unsqueeze", {positions(2, t).name, row_axis}, nil, {t, 1}, "last", "i64")
  local cols = positions(3, s)
  local later = apply(g, layer, "Greater", {cols.name, rows.name}, nil, {t, s}, "last", "bool")
  return apply(g, layer, "Cast", {later.name}, {to = 1}, {t, s}, "last")  -- 1: FLOAT
end

-- scores + -1e9 where key s comes after query t: a constant for fixed lengths, else computed
-- from the lengths the graph runs with.
local function causal(g, layer, scores)
  local t, s = scores.shape[3], scores.shape[4]
  local mask
  if t >= 0 and s >= 0 then
    local later = {}
    for i = 1, t do
      for j = 1, s do later[#later + 1] = j > i and -1e9 or 0 end
    end
    mask = g:floats(layer.name .. "/causal_mask", later, {1, 1, t, s})
  else
    mask = same(g, layer, "Mul", later_keys(g, layer, scores), {g:scalar(-1e9)}).name
  end
  return same(g, layer, "Add", scores, {mask})
end

-- query, value, key, mask and use_causal_mask of a call: self-attention on a value, or the
-- list {query, value, key, mask=, use_causal_mask=}, as the layer's call reads them.
local function attention_parts(x)
  if x.name then return x, x, x, nil, false end
  local v = x[2] or x[1]
  return x[1], v, x[3] or v, x.mask, x.use_causal_mask
end

-- softmax((q / sqrt(key_dim)) k^T + masks) over the keys: [batch, heads, T, S].
local function attention_weights(g, layer, qh, kh, mask, use_causal)
  local b, h, t, d = table.unpack(qh.shape)
  local s = kh.shape[3]
  local kt = apply(g, layer, "Transpose", {kh.name}, {perm = {0, 1, 3, 2}}, {b, h, d, s}, "last")
  qh = same(g, layer, "Mul", qh, {g:scalar(1 / math.sqrt(layer.key_dim))})  -- the query scaled, as the layer does
  local scores = apply(g, layer, "MatMul", {qh.name, kt.name}, nil, {b, h, t, s}, "last")
  if mask then scores = masked(g, layer, scores, mask) end
  if use_causal then scores = causal(g, layer, scores) end
  return same(g, layer, "Softmax", scores, nil, {axis = 3})
end

-- [batch, heads, T, value_dim] -> [batch, T, heads * value_dim] @ output_kernel (+ bias).
local function merge_heads(g, layer, out, shape)
  local b, h, t, d = table.unpack(out.shape)
  out = apply(g, layer, "Transpose", {out.name}, {perm = {0, 2, 1, 3}}, {b, t, h, d}, "last")
  local merged = g:int64s(layer.name .. "/merge_heads", {0, 0, h * d})
  out = apply(g, layer, "Reshape", {out.name, merged}, nil, {b, t, h * d}, "last")
  local y = apply(g, layer, "MatMul", {out.name, weight(g, layer, "output_kernel")}, nil, shape, "last")
  if layer.use_bias then y = same(g, layer, "Add", y, {weight(g, layer, "output_bias")}) end
  return y
end

E[nn.MultiHeadAttention] = function(g, layer, x, shape)
  local q, v, k, mask, use_causal = attention_parts(x)
  local qh, kh = heads(g, layer, q, "query", layer.key_dim), heads(g, layer, k, "key", layer.key_dim)
  local vh = heads(g, layer, v, "value", layer.value_dim)
  local weights = attention_weights(g, layer, qh, kh, mask, use_causal)
  local b, h, t = table.unpack(weights.shape)
  local out = apply(g, layer, "MatMul", {weights.name, vh.name}, nil, {b, h, t, layer.value_dim}, "last")
  return merge_heads(g, layer, out, shape)
end

-- The first `length` rows of the table (length: the input's, known when the graph runs for
-- sequences of any length) broadcast to the input's shape.
E[nn.PositionEmbedding] = function(g, layer, x, shape)
  x = g:as_layout(x, "last")
  local r = #x.shape
  local dims = apply(g, layer, "Shape", {x.name}, nil, {r}, "last", "i64")
  local len = x.shape[r - 1]
  local rows
  if len >= 0 then
    rows = g:weight(layer.name .. "/embeddings", layer.embeddings:slice {{1, len}})
  else
    local at = function(i) return g:int64s(layer.name .. "/index", {i}) end
    local n = apply(g, layer, "Slice", {dims.name, at(r - 2), at(r - 1)}, nil, {1}, "last", "i64")
    rows = g:op("Slice", {weight(g, layer, "embeddings"), at(0), n.name}, nil, layer.name)
  end
  return apply(g, layer, "Expand", {rows, dims.name}, nil, shape, "last")
end

-- x + the residual branch's value, normalized after unless the layer normalizes first.
local function residual(g, layer, norm, x, branch)
  local first = layer.normalize_first
  local h = branch(first and E[nn.LayerNorm](g, norm, x) or x)
  h = apply(g, layer, "Add", {h.name, x.name}, nil, x.shape, "last")
  return first and h or E[nn.LayerNorm](g, norm, h)
end

-- The feed-forward branch of a transformer block, Dense to intermediate_dim then back.
local function ffn(g, layer, x)
  local mid = util.copy(x.shape)
  mid[3] = layer.intermediate_dim
  return E[nn.Dense](g, layer.ffn_out, E[nn.Dense](g, layer.ffn_in, x, mid), x.shape)
end

E[nn.TransformerEncoder] = function(g, layer, x)
  local seq, mask = x, nil
  if not x.name then seq, mask = x[1], x.mask end
  seq = g:as_layout(seq, "last")
  local h = residual(g, layer, layer.attention_norm, seq, function(q)
    return E[nn.MultiHeadAttention](g, layer.attention, {q, mask = mask}, q.shape)
  end)
  return residual(g, layer, layer.ffn_norm, h, function(f) return ffn(g, layer, f) end)
end

E[nn.TransformerDecoder] = function(g, layer, x)
  local seq, encoder, o = x, nil, {}
  if not x.name then seq, encoder, o = x[1], x[2], x end
  seq = g:as_layout(seq, "last")
  local h = residual(g, layer, layer.self_attention_norm, seq, function(q)
    return E[nn.MultiHeadAttention](g, layer.self_attention,
      {q, mask = o.decoder_padding_mask, use_causal_mask = o.use_causal_mask ~= false}, q.shape)
  end)
  if encoder then
    h = residual(g, layer, layer.cross_attention_norm, h, function(q)
      return E[nn.MultiHeadAttention](g, layer.cross_attention,
        {q, g:as_layout(encoder, "last"), mask = o.encoder_padding_mask}, q.shape)
    end)
  end
  return residual(g, layer, layer.ffn_norm, h, function(f) return ffn(g, layer, f) end)
end

-- The names of the exportable layer classes, for the error about one that is not.
function E.names()
  local names = {"Sequential", "Model"}
  for cls in pairs(E) do
    if type(cls) == "table" then names[#names + 1] = cls.__name end
  end
  table.sort(names)
  return names
end

return E
