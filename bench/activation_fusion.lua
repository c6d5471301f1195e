-- Kernel level: an activation over a BERT feed-forward's [32, 128, 1024] and its gradient, as a
-- training step runs them (y = act(x + b) cast to bf16 for the next matmul; the gradient of
-- sum(y * dy) for x), compiled once, timed over STEPS calls per round: ms per call, the best of
-- ROUNDS rounds and each round's. Alternate two builds in the same minutes to compare them.
--
--   tputrain --threads 2 bench/activation_fusion.lua [ACTIVATION [STEPS [ROUNDS]]]
--
-- ACTIVATION any nn.Activation name (gelu, the default; gelu_approximate, swish, tanh, ...).
local tpu = require "tpu"
local nn, random, core = tpu.nn, tpu.random, tpu.core

local name = arg[1] or "gelu"
local steps, rounds = math.tointeger(tonumber(arg[2] or "20")), math.tointeger(tonumber(arg[3] or "5"))
local shape = {32, 128, 1024}
local x, dy = random.normal(random.key(1), shape), random.normal(random.key(3), shape)
local b = random.normal(random.key(2), {shape[3]})
local act = nn.Activation(name)
local value_and_grad = tpu.value_and_grad(function(x, b, dy)
  local y = act(x + b)
  return (y * dy):sum(), y:cast("bf16")
end, {has_aux = true})
local step = tpu.jit(function(x, b, dy)
  local _, y, g = value_and_grad(x, b, dy)
  return y, g
end)
local _, g = step(x, b, dy)  -- compiles
local best, times = math.huge, {}
for _ = 1, rounds do
  local t0 = core.now()
  for _ = 1, steps do _, g = step(x, b, dy) end
  g:sum():item()  -- waits for the last call
  local ms = (core.now() - t0) * 1000 / steps
  times[#times + 1] = string.format("%.2f", ms)
  best = math.min(best, ms)
end
print(string.format("%s forward and gradient over 32x128x1024: best %.2f ms a call (rounds: %s)", name, best,
  table.concat(times, " ")))
