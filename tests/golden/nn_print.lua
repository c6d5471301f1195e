-- print(model) shows the layer tree; input sizes appear once the model is built.
local tpu = require "tpu"
local nn = tpu.nn

local model = nn.Sequential {
  nn.Flatten(),
  nn.Dense(512, {activation = "relu"}),
  nn.Dense(512, {activation = "relu"}),
  nn.Dense(10),
}
print(model)
model:build({32, 28, 28})
print(model)
print(nn.Sequential {nn.Sequential {nn.Dense(4, {activation = "tanh"})}, nn.Activation("softmax")})
