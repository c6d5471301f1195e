-- model:summary() of a small MLP: output shapes and parameter counts per layer.
local tpu = require "tpu"
local nn = tpu.nn

local model = nn.Sequential {
  nn.Flatten(),
  nn.Dense(64, {activation = "relu"}),
  nn.Dense(32, {activation = "relu", trainable = false}),
  nn.Dense(10),
}
model(tpu.zeros({8, 28, 28}))
model:summary()
