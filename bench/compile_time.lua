-- Compile time against depth: a generated N-layer MLP train step (forward, backward, SGD
-- update: about 25 graph nodes a layer), traced and compiled for N = 100, 1000, 10000.
-- Compile time must grow linearly: the 10000/1000 ratio should stay near 10.
--
--   build/tputrain bench/compile_time.lua [max_layers]
local tpu = require "tpu"

local function train_step(params, x)
  local function loss(ps)
    local h = x
    for i, w in ipairs(ps) do
      h = (h:matmul(w) + 0.1 * i):tanh()
    end
    return (h * h):mean()
  end
  local l, grads = tpu.value_and_grad(loss)(params)
  local new = {}
  for i, w in ipairs(params) do new[i] = w - 0.01 * grads[i] end
  return new, l
end

local function measure(layers)
  local params = {}
  for i = 1, layers do params[i] = tpu.zeros {32, 32} end
  local x = tpu.ones {8, 32}
  local f = tpu.jit(train_step, {name = "mlp" .. layers})
  local t0 = tpu.core.now()
  local info = f:info(params, x)
  local ms = (tpu.core.now() - t0) * 1000
  return ms, info.nodes
end

local max_layers = tonumber(arg and arg[1]) or 10000
local results = {}
print(string.format("%8s %10s %14s %12s", "layers", "nodes", "compile ms", "us/layer"))
for _, n in ipairs {100, 1000, 10000} do
  if n <= max_layers then
    local ms, nodes = measure(n)
    results[n] = ms
    print(string.format("%8d %10d %14.1f %12.1f", n, nodes, ms, ms * 1000 / n))
  end
end
if results[1000] and results[10000] then
  print(string.format("ratio 10000/1000: %.2f (linear = 10)", results[10000] / results[1000]))
end
