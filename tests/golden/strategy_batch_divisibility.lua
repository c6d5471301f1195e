-- A global batch that does not divide by the cores fails when fit starts, naming both
-- numbers and the nearest batch sizes that work.
local tpu = require "tpu"
local nn, data = tpu.nn, tpu.data

local strategy = tpu.strategy.TPU {cores = 8}
local model
do
  local _ <close> = strategy:scope()
  model = nn.Sequential {nn.Dense(4), nn.Dense(2)}
  model:compile {optimizer = "sgd", loss = "sparse_categorical_crossentropy"}
end
local x, y = tpu.zeros {300, 3}, tpu.zeros({300}, {dtype = "i32"})
model:fit(data.from_tensors {x, y}:batch(100, {drop_remainder = true}), {verbose = 0})
