-- The convolution layers and UpSampling2D check their arguments at construction and build: each message names
-- the layer and the argument, says what was expected and echoes what was received, at the
-- user's line.
local tpu = require "tpu"
local nn = tpu.nn

local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or err)
end

try(function() nn.Conv2D(32, 3, {dilation_rate = 0}) end)
try(function() nn.Conv2D(30, 3, {groups = 4}) end)
try(function() nn.Conv2D(32, 3, {groups = 0}) end)
try(function() nn.Conv2D(32, 3, {groups = 4})(tpu.zeros({1, 8, 8, 6})) end)
try(function() nn.Conv2D(32, 3, {dilation_rate = 3})(tpu.zeros({1, 6, 6, 1})) end)
try(function() nn.DepthwiseConv2D(0) end)
try(function() nn.DepthwiseConv2D(3, {depth_multiplier = 0}) end)
try(function() nn.DepthwiseConv2D(3, {kernel_initializer = "zeros"}) end)
try(function() nn.DepthwiseConv2D(3, {depthwise_initializer = "zeroes"}) end)
try(function() nn.DepthwiseConv2D(3)(tpu.zeros({1, 8, 8})) end)
try(function() nn.DepthwiseConv2D(5)(tpu.zeros({1, 4, 4, 2})) end)
try(function() nn.SeparableConv2D(0, 3) end)
try(function() nn.SeparableConv2D(8, 3, {padding = "causal"}) end)
try(function() nn.SeparableConv2D(8, 3, {pointwise_regularizer = "l3"}) end)
try(function() nn.Conv2DTranspose(8, 3, {strides = 2, output_padding = 2}) end)
try(function() nn.Conv2DTranspose(8, 3, {output_padding = -1}) end)
try(function() nn.Conv2DTranspose(8, {3, 0}) end)
try(function() nn.Conv2DTranspose(8, 3)(tpu.zeros({1, 8, 8})) end)
try(function() nn.Conv1D(8, {3, 3}) end)
try(function() nn.Conv1D(8, 3, {padding = "full"}) end)
try(function() nn.Conv1D(8, 3, {groups = 3}) end)
try(function() nn.Conv1D(8, 3)(tpu.zeros({1, 8, 8, 1})) end)
try(function() nn.Conv1D(8, 5)(tpu.zeros({1, 4, 2})) end)
try(function() nn.Conv1D(8, 3, {dilation_rate = 2})(tpu.zeros({1, 4, 2})) end)
try(function() nn.UpSampling2D(0) end)
try(function() nn.UpSampling2D(2, {size = 3}) end)
try(function() nn.UpSampling2D {interpolation = "bicubic"} end)
try(function() nn.UpSampling2D()(tpu.zeros({1, 8, 8})) end)
