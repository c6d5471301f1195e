-- NASNet-A (Zoph et al., 2018) as Keras builds it: NASNetMobile and NASNetLarge. A 3x3 stride-2
-- stem, two reduction cells, then three runs of `blocks` normal cells separated by reduction
-- cells, relu, global average pooling and the classifier. A cell combines its input and the
-- previous cell's output (adjusted to its shape) through separable convolutions (each relu,
-- SeparableConv2D, BatchNorm twice), poolings and additions, and concatenates the results.
-- BatchNorm has epsilon 1e-3 and momentum 0.9997; no convolution has a bias.
--   NASNetMobile: 224x224, 1056 penultimate filters, 4 cells per run: 5,326,716 parameters
--     (36,738 non-trainable), 4,269,716 without the top.
--   NASNetLarge: 331x331, 4032 filters, 6 cells per run, each cell after a reduction reads the
--     cell before it: 88,949,818 parameters (196,668 non-trainable), 84,916,818 without the top.
-- The layers Keras leaves unnamed get the names a fresh Keras session gives them
-- (activation_12, zero_padding2d_1, ...), so weight names match Keras's.
--
--   local model = tpu.applications.NASNetMobile {input_shape = {32, 32, 3}, classes = 10}
local nn = require("tpu").nn
local common = require "tpu.applications.common"

local M = {}

local counts  -- per kind, the unnamed layers made so far by the model being built

-- Keras's name for the next unnamed layer of a kind: activation, activation_1, ...
local function auto(kind)
  local n = counts[kind] or 0
  counts[kind] = n + 1
  return n == 0 and kind or string.format("%s_%d", kind, n)
end

local function bn(name) return nn.BatchNorm {epsilon = 1e-3, momentum = 0.9997, name = name} end
local function relu(name) return nn.Activation("relu", {name = name or auto("activation")}) end
local function add(a, b, name) return nn.Add {name = name or auto("add")} {a, b} end
-- Every 1x1 convolution (a cell's squeeze, the adjust block's) has Keras's he_normal kernels. The
-- separable convolutions keep glorot_uniform on purpose, which is what Keras initializes them
-- with: tf.keras 2's nasnet.py passes kernel_initializer='he_normal' to SeparableConv2D, but
-- SeparableConv hands it on to Conv.__init__, which stores it in kernel_initializer, an
-- attribute its build never reads (it uses depthwise_initializer and pointwise_initializer,
-- both glorot_uniform by default); Keras 3's nasnet.py no longer passes it.
local function conv1x1(filters, name)
  return nn.Conv2D(filters, 1, {padding = "same", use_bias = false, kernel_initializer = "he_normal",
                                name = name})
end
local function avg_pool(size, stride, padding, name)
  return nn.AvgPool2D(size, {strides = stride, padding = padding, name = name})
end

-- relu, SeparableConv2D, BatchNorm twice; the first convolution strides by `stride`.
local function separable(x, filters, kernel, stride, id)
  x = relu()(x)
  local padding = "same"
  if stride == 2 then
    x = nn.ZeroPadding2D {padding = common.correct_pad(x, kernel), name = "separable_conv_1_pad_" .. id}(x)
    padding = "valid"
  end
  x = nn.SeparableConv2D(filters, kernel, {strides = stride, padding = padding, use_bias = false,
                                           name = "separable_conv_1_" .. id})(x)
  x = relu()(bn("separable_conv_1_bn_" .. id)(x))
  x = nn.SeparableConv2D(filters, kernel, {padding = "same", use_bias = false, name = "separable_conv_2_" .. id})(x)
  return bn("separable_conv_2_bn_" .. id)(x)
end

-- The previous cell's output p made to match ip: halved in size (two strided 1x1 paths, the
-- second shifted by a pixel, concatenated) or projected to `filters` channels.
local function adjust(p, ip, filters, id)
  if p == nil then return ip end
  if p.shape[3] ~= ip.shape[3] then
    p = relu("adjust_relu_1_" .. id)(p)
    local p1 = avg_pool(1, 2, "valid", "adjust_avg_pool_1_" .. id)(p)
    p1 = conv1x1(filters // 2, "adjust_conv_1_" .. id)(p1)
    local p2 = nn.ZeroPadding2D {padding = {{0, 1}, {0, 1}}, name = auto("zero_padding2d")}(p)
    p2 = nn.Cropping2D {cropping = {{1, 0}, {1, 0}}, name = auto("cropping2d")}(p2)
    p2 = avg_pool(1, 2, "valid", "adjust_avg_pool_2_" .. id)(p2)
    p2 = conv1x1(filters // 2, "adjust_conv_2_" .. id)(p2)
    p = nn.Concatenate {axis = -1, name = auto("concatenate")} {p1, p2}
    return bn("adjust_bn_" .. id)(p)
  elseif p.shape[4] ~= filters then
    p = conv1x1(filters, "adjust_conv_projection_" .. id)(relu()(p))
    return bn("adjust_bn_" .. id)(p)
  end
  return p
end

-- relu, 1x1 convolution to `filters`, BatchNorm: the cell's view of its input.
local function squeeze(ip, filters, kind, id)
  local h = conv1x1(filters, kind .. "_conv_1_" .. id)(relu()(ip))
  return bn(kind .. "_bn_1_" .. id)(h)
end

-- A normal cell (same size): returns its output and its input (the next cell's p).
local function normal_cell(ip, p, filters, id)
  p = adjust(p, ip, filters, id)
  local h = squeeze(ip, filters, "normal", id)
  local x1 = add(separable(h, filters, 5, 1, "normal_left1_" .. id), separable(p, filters, 3, 1, "normal_right1_" .. id),
                 "normal_add_1_" .. id)
  local x2 = add(separable(p, filters, 5, 1, "normal_left2_" .. id), separable(p, filters, 3, 1, "normal_right2_" .. id),
                 "normal_add_2_" .. id)
  local x3 = add(avg_pool(3, 1, "same", "normal_left3_" .. id)(h), p, "normal_add_3_" .. id)
  local x4 = add(avg_pool(3, 1, "same", "normal_left4_" .. id)(p), avg_pool(3, 1, "same", "normal_right4_" .. id)(p),
                 "normal_add_4_" .. id)
  local x5 = add(separable(h, filters, 3, 1, "normal_left5_" .. id), h, "normal_add_5_" .. id)
  return nn.Concatenate {axis = -1, name = "normal_concat_" .. id} {p, x1, x2, x3, x4, x5}, ip
end

-- A reduction cell (half the size): returns its output and its input.
local function reduction_cell(ip, p, filters, id)
  p = adjust(p, ip, filters, id)
  local h = squeeze(ip, filters, "reduction", id)
  local h3 = nn.ZeroPadding2D {padding = common.correct_pad(h, 3), name = "reduction_pad_1_" .. id}(h)
  local function max_pool(name) return nn.MaxPool2D(3, {strides = 2, name = name .. id})(h3) end
  local x1 = add(separable(h, filters, 5, 2, "reduction_left1_" .. id), separable(p, filters, 7, 2, "reduction_right1_" .. id),
                 "reduction_add_1_" .. id)
  local x2 = add(max_pool("reduction_left2_"), separable(p, filters, 7, 2, "reduction_right2_" .. id),
                 "reduction_add_2_" .. id)
  local x3 = add(avg_pool(3, 2, "valid", "reduction_left3_" .. id)(h3),
                 separable(p, filters, 5, 2, "reduction_right3_" .. id), "reduction_add3_" .. id)
  local x4 = add(x2, avg_pool(3, 1, "same", "reduction_left4_" .. id)(x1))
  local x5 = add(separable(x1, filters, 3, 1, "reduction_left4_" .. id), max_pool("reduction_right5_"),
                 "reduction_add4_" .. id)
  return nn.Concatenate {axis = -1, name = "reduction_concat_" .. id} {x2, x3, x4, x5}, ip
end

-- The network: c = {penultimate filters, blocks, stem filters, skip_reduction}.
local function build(a, c)
  counts = {}
  local filters, blocks, stem, skip_reduction = c[1] // 24, c[2], c[3], c[4]
  local input = nn.Input {shape = a.input_shape}
  local x = nn.Conv2D(stem, 3, {strides = 2, use_bias = false, kernel_initializer = "he_normal",
                                name = "stem_conv1"})(input)
  x = bn("stem_bn1")(x)
  local p, p0
  x, p = reduction_cell(x, nil, filters // 4, "stem_1")
  x, p = reduction_cell(x, p, filters // 2, "stem_2")
  for run = 0, 2 do
    if run > 0 then
      x, p0 = reduction_cell(x, p, filters << run, "reduce_" .. run * blocks)
      if not skip_reduction then p = p0 end
    end
    for i = 1, blocks do
      x, p = normal_cell(x, p, filters << run, tostring(run == 0 and i - 1 or run * blocks + i))
    end
  end
  x = relu()(x)
  if a.include_top then
    x = nn.GlobalAveragePooling2D {name = auto("global_average_pooling2d")}(x)
    x = nn.Dense(a.classes, {activation = a.classifier_activation, name = "predictions"})(x)
  else
    x = common.pool(x, a.pooling)
  end
  return common.model(a, input, x)
end

function M.NASNetMobile(opts, extra)
  return build(common.args("NASNetMobile", opts, {name = "nasnet_mobile", size = 224}, extra), {1056, 4, 32, false})
end

function M.NASNetLarge(opts, extra)
  return build(common.args("NASNetLarge", opts, {name = "nasnet_large", size = 331}, extra), {4032, 6, 96, true})
end

return M
