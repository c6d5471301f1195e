-- Xception (Chollet, 2017) as Keras builds it: an entry flow (two 3x3 convolutions, then three
-- blocks of two separable 3x3 convolutions ended by a 3x3 stride-2 max pooling, each added to
-- a strided 1x1 projection of its input), a middle flow of 8 blocks of three separable
-- convolutions of 728 channels added to their input, an exit flow (one more projected block,
-- separable convolutions to 1536 and 2048 channels), global average pooling and the
-- classifier. No convolution has a bias; each is followed by BatchNorm (Keras's defaults:
-- epsilon 1e-3, momentum 0.99). 22,910,480 parameters at 299x299 with 1000 classes, 54,528 of
-- them non-trainable; 20,861,480 without the top. The smallest input is 71x71. The layers
-- Keras leaves unnamed get the names a fresh Keras session gives them (conv2d_1, add_3, ...).
--
--   local model = tpu.applications.Xception {input_shape = {71, 71, 3}, classes = 10}
local nn = require("tpu").nn
local common = require "tpu.applications.common"

local function bn(name) return nn.BatchNorm {epsilon = 1e-3, name = name} end
local function relu(name) return nn.Activation("relu", {name = name}) end

-- Keras's name for the n-th (0-based) unnamed layer of a kind: conv2d, conv2d_1, ...
local function auto(kind, n) return n == 0 and kind or string.format("%s_%d", kind, n) end

local function sepconv(x, filters, name)
  x = nn.SeparableConv2D(filters, 3, {padding = "same", use_bias = false, name = name})(x)
  return bn(name .. "_bn")(x)
end

-- A block whose input is projected by a strided 1x1 convolution and added to two separable
-- convolutions (to `filters[1]` then `filters[2]` channels) and a stride-2 max pooling. The
-- first block's input is not passed through relu first.
local function projected_block(x, filters, b, n, relu_first)
  local residual = nn.Conv2D(filters[2], 1, {strides = 2, padding = "same", use_bias = false,
                                             name = auto("conv2d", n)})(x)
  residual = bn(auto("batch_normalization", n))(residual)
  local prefix = string.format("block%d_sepconv", b)
  if relu_first then x = relu(prefix .. "1_act")(x) end
  x = relu(prefix .. "2_act")(sepconv(x, filters[1], prefix .. "1"))
  x = sepconv(x, filters[2], prefix .. "2")
  x = nn.MaxPool2D(3, {strides = 2, padding = "same", name = string.format("block%d_pool", b)})(x)
  return nn.Add {name = auto("add", b - 2)} {x, residual}
end

return function(opts, extra)
  local a = common.args("Xception", opts, {name = "xception", size = 299, min_size = 71}, extra)
  local input = nn.Input {shape = a.input_shape}
  local x = nn.Conv2D(32, 3, {strides = 2, use_bias = false, name = "block1_conv1"})(input)
  x = relu("block1_conv1_act")(bn("block1_conv1_bn")(x))
  x = nn.Conv2D(64, 3, {use_bias = false, name = "block1_conv2"})(x)
  x = relu("block1_conv2_act")(bn("block1_conv2_bn")(x))
  x = projected_block(x, {128, 128}, 2, 0, false)
  x = projected_block(x, {256, 256}, 3, 1, true)
  x = projected_block(x, {728, 728}, 4, 2, true)
  for b = 5, 12 do
    local residual = x
    for i = 1, 3 do
      local prefix = string.format("block%d_sepconv%d", b, i)
      x = sepconv(relu(prefix .. "_act")(x), 728, prefix)
    end
    x = nn.Add {name = auto("add", b - 2)} {x, residual}
  end
  x = projected_block(x, {728, 1024}, 13, 3, true)
  x = relu("block14_sepconv1_act")(sepconv(x, 1536, "block14_sepconv1"))
  x = relu("block14_sepconv2_act")(sepconv(x, 2048, "block14_sepconv2"))
  x = common.top(x, a, "avg_pool")
  return common.model(a, input, x)
end
