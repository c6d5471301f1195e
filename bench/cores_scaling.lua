-- Step time of the benchmark MLP (784-512-512-10 ReLU, Adam, global batch 256, in-memory
-- Fashion-MNIST) on 1 simulated core and on N cores (TPU{cores = N}, 256/N rows per core),
-- on the same host threads. Both models live in this one process and train in alternating
-- rounds of a few steps, so load from other processes hits both alike; a shared machine
-- still moves the absolute figures, the ratio much less.
--
--   tputrain --threads 2 bench/cores_scaling.lua [CORES [ROUNDS [STEPS [DATA]]]]   (8, 30, 10, memory)
--
-- DATA: memory (f32 batches sliced from tensors in memory: the step alone) or script (the
-- pipeline of scripts/fashion_mnist_mlp.lua: u8 images shuffled, batched and scaled by a
-- traced map each step, as an epoch of that script runs).
--
-- Prints ms/step for each (wall time, median over the rounds; CPU time of all threads, median)
-- and the ratio N cores / 1 core (each round's wall-time ratio: median and range).
local tpu = require "tpu"
local nn, optim, data, core = tpu.nn, tpu.optim, tpu.data, tpu.core

local cores = math.tointeger(tonumber(arg[1] or "8"))
local rounds = math.tointeger(tonumber(arg[2] or "30"))
local steps = math.tointeger(tonumber(arg[3] or "10"))
local source = arg[4] or "memory"
local batch = 256

local train
if source == "script" then
  local function scale(x, y) return x:reshape {-1, 784}:cast("f32") / 255, y end
  train = data.fashion_mnist("train"):shuffle(60000, {seed = 1}):batch(batch, {drop_remainder = true})
    :map(scale):cycle()
elseif source == "memory" then
  local x, y
  for bx, by in data.fashion_mnist("train"):batch(60000):iter() do
    x, y = bx:reshape {-1, 784}:cast("f32") / 255, by
  end
  train = data.from_tensors {x, y}:batch(batch, {drop_remainder = true}):cycle()
else
  error("DATA must be memory or script, got " .. source, 0)
end

local function mlp(strategy)
  local _ <close> = strategy:scope()
  local model = nn.Sequential {
    nn.Dense(512, {activation = "relu"}),
    nn.Dense(512, {activation = "relu"}),
    nn.Dense(10),
  }
  model:compile {optimizer = optim.Adam {lr = 1e-3}, loss = "sparse_categorical_crossentropy"}
  return model
end

-- Wall and CPU ms per step over n steps.
local function fit(model, n)
  local t0, c0 = core.now(), os.clock()
  model:fit(train, {epochs = 1, steps_per_epoch = n, verbose = 0})
  return (core.now() - t0) * 1000 / n, (os.clock() - c0) * 1000 / n
end

local function median(t)
  local s = {table.unpack(t)}
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

local models = {mlp(tpu.strategy.default()), mlp(tpu.strategy.TPU {cores = cores})}
for _, m in ipairs(models) do fit(m, 5) end  -- compiles the steps, warms the caches

local wall, cpu, ratio = {{}, {}}, {{}, {}}, {}
for r = 1, rounds do
  for i, m in ipairs(models) do wall[i][r], cpu[i][r] = fit(m, steps) end
  ratio[r] = wall[2][r] / wall[1][r]
end
for i, name in ipairs {"1 core", cores .. " cores"} do
  print(string.format("%-9s %7.2f ms/step (median of %d rounds of %d steps), cpu %7.2f ms/step", name,
    median(wall[i]), rounds, steps, median(cpu[i])))
end
print(string.format("ratio %d cores / 1 core: %.3f median, %.3f-%.3f over the rounds", cores, median(ratio),
  math.min(table.unpack(ratio)), math.max(table.unpack(ratio))))
