-- Compile time against depth. Two generated train steps (forward, backward, SGD update), each
-- traced and compiled once through f:info:
--   mlp:  N dense layers, h = tanh(h @ w + c) (about 17 graph nodes a layer), N = 100, 1000, 10000
--   conv: N conv layers in NASNet-like residual cells, h = relu(h + conv(relu(conv(h))))
--         (two convs a cell), N = 1000
-- Compile time must grow linearly: the 10000/1000 ratio should stay near 10 (at most 12), and
-- 1000 layers of either kind must compile in under 1 s. Times are the best of `repeats` runs,
-- each in a fresh process (wall clock; the machine may be busy) and, in brackets, the CPU time
-- of that run.
--
--   build/tputrain bench/compile_time.lua [max_layers] [repeats]
local tpu = require "tpu"

local function sgd(params, loss)
  local l, grads = tpu.value_and_grad(loss)(params)
  local new = {}
  for i, w in ipairs(params) do new[i] = w - 0.01 * grads[i] end
  return new, l
end

local function mlp_step(params, x)
  return sgd(params, function(ps)
    local h = x
    for i, w in ipairs(ps) do h = (h:matmul(w) + 0.1 * i):tanh() end
    return (h * h):mean()
  end)
end

local function conv_step(params, x)
  return sgd(params, function(ps)
    local h = x
    for c = 1, #ps // 2 do
      local y = h:conv2d(ps[2 * c - 1], {padding = "same"}):relu()
      h = (h + y:conv2d(ps[2 * c], {padding = "same"})):relu()
    end
    return (h * h):mean()
  end)
end

local kinds = {
  mlp = {step = mlp_step, weight = {32, 32}, input = {8, 32}},
  conv = {step = conv_step, weight = {3, 3, 8, 8}, input = {2, 8, 8, 8}},
}

-- Wall and CPU milliseconds of one trace + compile, and the compiled graph's node count.
local function measure(kind, layers)
  local k = kinds[kind]
  local params = {}
  for i = 1, layers do params[i] = tpu.zeros(k.weight) end
  local x = tpu.ones(k.input)
  local f = tpu.jit(k.step, {name = kind .. layers})
  collectgarbage()
  local t0, c0 = tpu.core.now(), os.clock()
  local info = f:info(params, x)
  return (tpu.core.now() - t0) * 1000, (os.clock() - c0) * 1000, info.nodes
end

-- Child mode: one measurement, printed for the parent.
if arg and arg[1] == "--measure" then
  print(string.format("%.3f %.3f %d", measure(arg[2], tonumber(arg[3]))))
  return
end

-- Each measurement runs in a fresh process (as a script compiling its model would), so one
-- size does not inherit the heap of the sizes before it; the best of `repeats` is kept.
local script = debug.getinfo(1, "S").source:match("^@(.*)$")
local function best_of(repeats, kind, layers)
  local wall, cpu, nodes = math.huge, 0, 0
  for _ = 1, repeats do
    local p = assert(io.popen(string.format("%s %s --measure %s %d", arg[-1] or "tputrain", script, kind, layers)))
    local w, c, n = p:read("n", "n", "n")
    p:close()
    assert(w, "the measuring process failed")
    if w < wall then wall, cpu, nodes = w, c, n end
  end
  return wall, cpu, nodes
end

local max_layers = tonumber(arg and arg[1]) or 10000
local repeats = tonumber(arg and arg[2]) or 3
local wall = {}
print(string.format("%-6s %8s %10s %14s %12s %12s", "graph", "layers", "nodes", "compile ms", "(cpu ms)", "us/layer"))
for _, run in ipairs {{"mlp", 100}, {"mlp", 1000}, {"mlp", 10000}, {"conv", 1000}} do
  local kind, n = run[1], run[2]
  if n <= max_layers then
    local ms, cpu, nodes = best_of(repeats, kind, n)
    wall[kind .. n] = ms
    print(string.format("%-6s %8d %10d %14.1f %12s %12.1f", kind, n, nodes, ms, string.format("(%.0f)", cpu),
      ms * 1000 / n))
  end
end
if wall.mlp1000 and wall.mlp10000 then
  print(string.format("ratio mlp 10000/1000: %.2f (linear = 10, target <= 12)", wall.mlp10000 / wall.mlp1000))
end
