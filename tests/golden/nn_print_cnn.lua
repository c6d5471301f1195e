-- print(model) of a CNN: the indented tree before and after build (channel counts appear
-- once the input shape is known), with every image layer.
local tpu = require "tpu"
local nn = tpu.nn

local model = nn.Sequential {
  nn.Conv2D(32, 3, {activation = "relu", padding = "same"}),
  nn.BatchNorm(),
  nn.MaxPool2D(),
  nn.Conv2D(64, {5, 3}, {strides = 2, use_bias = false}),
  nn.AvgPool2D(3, {strides = 1, padding = "same"}),
  nn.Dropout(0.25),
  nn.Sequential {nn.Conv2D(16, 1), nn.Activation("relu")},
  nn.GlobalAvgPool2D(),
  nn.Reshape {4, 4},
  nn.Flatten(),
  nn.Dense(10),
}
print(model)
model:build({128, 28, 28, 1})
print(model)
