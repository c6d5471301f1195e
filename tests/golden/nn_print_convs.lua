-- print(model) and model:summary() of a model with every convolution layer: Conv2D with
-- dilation_rate and groups, DepthwiseConv2D, SeparableConv2D, Conv2DTranspose, UpSampling2D and Conv1D.
-- The parameter counts are Keras's for the same layers.
local tpu = require "tpu"
local nn = tpu.nn

local model = nn.Sequential {
  nn.Conv2D(32, 3, {padding = "same", activation = "relu"}),
  nn.DepthwiseConv2D(3, {padding = "same"}),
  nn.SeparableConv2D(64, 3, {strides = 2, padding = "same", activation = "relu"}),
  nn.Conv2D(64, 3, {dilation_rate = 2, groups = 4, padding = "same"}),
  nn.DepthwiseConv2D({3, 3}, {depth_multiplier = 2, use_bias = false}),
  nn.Conv2DTranspose(16, 3, {strides = 2, padding = "same", output_padding = 1}),
  nn.UpSampling2D(2, {interpolation = "bilinear"}),
  nn.GlobalAvgPool2D(),
  nn.Dense(10),
}
print(model)
model:build({8, 32, 32, 3})
print(model)
model:summary()

local seq = nn.Sequential {
  nn.Conv1D(32, 5, {padding = "causal", dilation_rate = 2, activation = "relu"}),
  nn.Conv1D(32, 3, {strides = 2, groups = 4}),
  nn.Flatten(),
  nn.Dense(1),
}
seq:build({4, 100, 16})
print(seq)
seq:summary()
