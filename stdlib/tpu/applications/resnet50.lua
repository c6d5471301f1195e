-- ResNet50 (He et al., 2015) as Keras builds it: a 7x7 stride-2 stem, then four stages of
-- bottleneck blocks (1x1, 3x3, 1x1 convolutions with biases, each followed by BatchNorm with
-- epsilon 1.001e-5) whose input is added back, a projection shortcut in each stage's first
-- block. 25,636,712 parameters at 224x224 with 1000 classes, 53,120 of them non-trainable
-- (the BatchNorm moving statistics); 23,587,712 without the top.
--
--   local model = tpu.applications.ResNet50 {input_shape = {32, 32, 3}, classes = 10}
local nn = require("tpu").nn
local common = require "tpu.applications.common"

local function bn(name) return nn.BatchNorm {epsilon = 1.001e-5, name = name} end

-- One bottleneck block: `filters` channels inside, 4 * filters out.
local function block(x, filters, stride, project, name)
  local shortcut = x
  if project then
    shortcut = nn.Conv2D(4 * filters, 1, {strides = stride, name = name .. "_0_conv"})(x)
    shortcut = bn(name .. "_0_bn")(shortcut)
  end
  x = nn.Conv2D(filters, 1, {strides = stride, name = name .. "_1_conv"})(x)
  x = nn.Activation("relu", {name = name .. "_1_relu"})(bn(name .. "_1_bn")(x))
  x = nn.Conv2D(filters, 3, {padding = "same", name = name .. "_2_conv"})(x)
  x = nn.Activation("relu", {name = name .. "_2_relu"})(bn(name .. "_2_bn")(x))
  x = nn.Conv2D(4 * filters, 1, {name = name .. "_3_conv"})(x)
  x = bn(name .. "_3_bn")(x)
  x = nn.Add {name = name .. "_add"} {shortcut, x}
  return nn.Activation("relu", {name = name .. "_out"})(x)
end

-- A stage of `blocks` blocks; the first projects the shortcut and strides by `stride`.
local function stage(x, filters, blocks, stride, name)
  x = block(x, filters, stride, true, name .. "_block1")
  for i = 2, blocks do x = block(x, filters, 1, false, name .. "_block" .. i) end
  return x
end

return function(opts, extra)
  local a = common.args("ResNet50", opts, {name = "resnet50", size = 224}, extra)
  local input = nn.Input {shape = a.input_shape}
  local x = nn.ZeroPadding2D {padding = {{3, 3}, {3, 3}}, name = "conv1_pad"}(input)
  x = nn.Conv2D(64, 7, {strides = 2, name = "conv1_conv"})(x)
  x = nn.Activation("relu", {name = "conv1_relu"})(bn("conv1_bn")(x))
  x = nn.ZeroPadding2D {padding = {{1, 1}, {1, 1}}, name = "pool1_pad"}(x)
  x = nn.MaxPool2D(3, {strides = 2, name = "pool1_pool"})(x)
  x = stage(x, 64, 3, 1, "conv2")
  x = stage(x, 128, 4, 2, "conv3")
  x = stage(x, 256, 6, 2, "conv4")
  x = stage(x, 512, 3, 2, "conv5")
  x = common.top(x, a, "avg_pool", true)
  return common.model(a, input, x)
end
