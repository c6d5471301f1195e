-- Calling a built Dense layer with the wrong feature size names the layer, the expected
-- size and the received shape, at the user's line.
local tpu = require "tpu"
local nn = tpu.nn

local model = nn.Sequential {nn.Dense(512, {activation = "relu"}), nn.Dense(10)}
model(tpu.zeros({32, 784}))
print("built")
model(tpu.zeros({32, 100}))
print("not reached")
