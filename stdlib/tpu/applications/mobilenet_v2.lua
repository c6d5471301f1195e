-- MobileNetV2 (Sandler et al., 2018) as Keras builds it with alpha = 1.0: a 3x3 stride-2 stem,
-- 17 inverted residual blocks (a 1x1 expansion by 6, a 3x3 depthwise convolution, a linear 1x1
-- projection; the input is added back when the shapes match), a 1x1 convolution to 1280
-- channels, global average pooling and the classifier. No convolution has a bias; each is
-- followed by BatchNorm (epsilon 1e-3, momentum 0.999), and relu6 except after the projection.
-- 3,538,984 parameters at 224x224 with 1000 classes, 34,112 of them non-trainable;
-- 2,257,984 without the top.
--
--   local model = tpu.applications.MobileNetV2 {input_shape = {96, 96, 3}, classes = 10}
local nn = require("tpu").nn
local common = require "tpu.applications.common"

local function bn(name) return nn.BatchNorm {epsilon = 1e-3, momentum = 0.999, name = name} end
local function relu6(name) return nn.Activation("relu6", {name = name}) end

-- One inverted residual block to `filters` channels; block 0 has no expansion and Keras's
-- prefix "expanded_conv_".
local function block(x, filters, stride, expansion, id)
  local input, channels = x, x.shape[4]
  local prefix = id == 0 and "expanded_conv_" or string.format("block_%d_", id)
  if id > 0 then
    x = nn.Conv2D(expansion * channels, 1, {padding = "same", use_bias = false, name = prefix .. "expand"})(x)
    x = relu6(prefix .. "expand_relu")(bn(prefix .. "expand_BN")(x))
  end
  if stride == 2 then
    x = nn.ZeroPadding2D {padding = common.correct_pad(x, 3), name = prefix .. "pad"}(x)
  end
  x = nn.DepthwiseConv2D(3, {strides = stride, use_bias = false, padding = stride == 1 and "same" or "valid",
                             name = prefix .. "depthwise"})(x)
  x = relu6(prefix .. "depthwise_relu")(bn(prefix .. "depthwise_BN")(x))
  x = nn.Conv2D(filters, 1, {padding = "same", use_bias = false, name = prefix .. "project"})(x)
  x = bn(prefix .. "project_BN")(x)
  if channels == filters and stride == 1 then x = nn.Add {name = prefix .. "add"} {input, x} end
  return x
end

-- {filters, stride of the first block, blocks, expansion}
local stages = {{16, 1, 1, 1}, {24, 2, 2, 6}, {32, 2, 3, 6}, {64, 2, 4, 6}, {96, 1, 3, 6},
                {160, 2, 3, 6}, {320, 1, 1, 6}}

return function(opts, extra)
  local a = common.args("MobileNetV2", opts, {name = "mobilenetv2_1.00", size = 224}, extra)
  if not (opts and opts.name) then a.name = string.format("mobilenetv2_1.00_%d", a.input_shape[1]) end
  local input = nn.Input {shape = a.input_shape}
  local x = nn.Conv2D(32, 3, {strides = 2, padding = "same", use_bias = false, name = "Conv1"})(input)
  x = relu6("Conv1_relu")(bn("bn_Conv1")(x))
  local id = 0
  for _, s in ipairs(stages) do
    for i = 1, s[3] do
      x = block(x, s[1], i == 1 and s[2] or 1, s[4], id)
      id = id + 1
    end
  end
  x = nn.Conv2D(1280, 1, {use_bias = false, name = "Conv_1"})(x)
  x = relu6("out_relu")(bn("Conv_1_bn")(x))
  x = common.top(x, a, "global_average_pooling2d")
  return common.model(a, input, x)
end
