-- Trains a small MLP with BatchNorm and Dropout on 4 cores with Adam, a partial last batch
-- included, and prints the loss history and the weights with every bit (test_fit_strategy.lua
-- runs it with different --threads and compares the output; test_multi_worker.lua compares 2
-- MPI workers x 1 core, argument "multi", with 1 process x 2 cores, argument "2"; argument 2
-- "tensors" trains on the tensors, shuffled by fit, rather than a data set).
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data

nn.initializers.set_seed(1)
local k = tpu.random.key(2)
local x = tpu.random.normal(k, {100, 20})
local y = (x:sum(2):gt(0)):cast("i32")
local s = arg[1] == "multi" and tpu.strategy.multi_worker {cores = 1} or tpu.strategy.TPU {cores = tonumber(arg[1]) or 4}
local model
do
  local _ <close> = s:scope()
  model = nn.Sequential {nn.Dense(64, {activation = "relu"}), nn.BatchNorm(), nn.Dropout(0.2), nn.Dense(2)}
  model:compile {optimizer = optim.Adam {lr = 1e-2}, loss = "sparse_categorical_crossentropy", metrics = {"accuracy"}}
end
-- argument 2 "tensors": fit(x, y), which shuffles the rows each epoch
local h = arg[2] == "tensors" and model:fit(x, y, {batch_size = 32, epochs = 3, verbose = 0})
  or model:fit(data.from_tensors {x, y}:shuffle(100, {seed = 3}):batch(32), {epochs = 3, verbose = 0})
local out = {}
for _, l in ipairs(h.history.loss) do out[#out + 1] = string.format("%a", l) end
for _, p in ipairs(model:parameters()) do
  for _, v in ipairs(p:reshape {-1}:totable()) do out[#out + 1] = string.format("%a", v) end
end
print("weights " .. table.concat(out, " "))
