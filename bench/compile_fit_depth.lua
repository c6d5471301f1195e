-- Compile time of a deep MLP through the user's path: N Dense(32, relu) layers in a Sequential,
-- Adam, compile, fit for one step on a batch of 8 random rows. Prints the train step's compile
-- time from the jit statistics. Run it once per size (the machine may be shared), with
-- TPUTRAIN_DEBUG=2 to see each pass's and each planner stage's time:
--
--   TPUTRAIN_DEBUG=2 build/tputrain --profile bench/compile_fit_depth.lua 1000
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data

local layers = tonumber(arg and arg[1]) or 1000
local stack = {}
for i = 1, layers do stack[i] = nn.Dense(32, {activation = "relu"}) end
local model = nn.Sequential(stack)
model:compile {optimizer = optim.Adam {lr = 1e-3}, loss = "mse"}

local k = tpu.random.key(1)
local x = tpu.random.normal(k, {8, 32})
local y = tpu.random.normal(k:split(2)[2], {8, 32})
local t0 = tpu.core.now()
model:fit(data.from_tensors {x, y}:batch(8), {epochs = 1, verbose = 0})
local wall = (tpu.core.now() - t0) * 1000
local step = model.compiled.steps.train
local stats, info = step:stats(), step.last.exe:info()
print(string.format("layers %d: compile %.1f ms (%d compiles), fit %.1f ms", layers, stats.compile_ms, stats.compiles, wall))
-- The plan itself, to compare before and after a change to the planner.
print(string.format("  plan: %d kernels, %d donated, %d bytes planned, %d bytes HBM", info.kernels, info.donated,
                    info.planned_bytes, info.hbm_bytes))
