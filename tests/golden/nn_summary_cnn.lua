-- model:summary() of the Fashion-MNIST CNN and of a CNN with BatchNorm (its moving statistics
-- are non-trainable parameters).
local tpu = require "tpu"
local nn = tpu.nn

local cnn = nn.Sequential {
  nn.Conv2D(32, 3, {activation = "relu"}),
  nn.MaxPool2D(),
  nn.Conv2D(64, 3, {activation = "relu"}),
  nn.MaxPool2D(),
  nn.Flatten(),
  nn.Dense(128, {activation = "relu"}),
  nn.Dense(10),
}
cnn:build({128, 28, 28, 1})
cnn:summary()

local bn = nn.Sequential {
  nn.Conv2D(8, 3, {padding = "same", use_bias = false}),
  nn.BatchNorm(),
  nn.Activation("relu"),
  nn.GlobalAvgPool2D(),
  nn.Dense(10),
}
bn:build({32, 16, 16, 3})
bn:summary()
