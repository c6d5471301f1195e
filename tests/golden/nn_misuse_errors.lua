-- Misuses of layers and models that used to surface as raw Lua errors inside the library
-- (attempt to index a nil value, ...): each message names the layer, model or function, the
-- rule and the fix, at the user's line.
local tpu = require "tpu"
local nn = tpu.nn

local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or err)
end

local x, y = tpu.ones {8, 4}, tpu.zeros {8, 1}
local function model()
  local m = nn.Sequential {nn.Input {shape = {4}}, nn.Dense(3), nn.Dense(1)}
  m:compile {optimizer = "sgd", loss = "mse"}
  return m
end

-- fit's data and batch_size are checked before "Epoch 1/1" is printed
try(function() model():fit() end)
try(function() model():fit("data.csv") end)
try(function() model():fit(x, y, {batch_size = 0}) end)
try(function() model():evaluate(x, y, {batch_size = 2.5}) end)
try(function() model():predict(nil) end)

-- a loss function of the user's must return a scalar tensor
try(function()
  local m = nn.Sequential {nn.Input {shape = {4}}, nn.Dense(1)}
  m:compile {optimizer = "sgd", loss = function() return 1 end}
  m:fit(x, y, {verbose = 0})
end)

-- a layer's argument and its call's result
local NilLayer = nn.Module:extend("NilLayer")
function NilLayer:call(_x) end
try(function() nn.Sequential {nn.Input {shape = {4}}, NilLayer {name = "nothing"}, nn.Dense(1)} end)
try(function() nn.Dense(1)(NilLayer {name = "nothing_eager"}(x)) end)
try(function() nn.Dense(2, {name = "d"})(3) end)
try(function() nn.Dense(2, {name = "d"})() end)
try(function() nn.Dense(2, {name = "d"})({x, x}) end)
try(function() nn.Dense(2, {name = "d"})(x, 3) end)
try(function() nn.Add {name = "add"}({x, "y"}) end)
try(function() nn.Add {name = "add"}({}) end)

-- methods called with a dot instead of a colon
local m = model()
try(function() local d = nn.Dense(2); d(x); d.call(x) end)
local DotWeight = nn.Module:extend("DotWeight")
function DotWeight:build(s) self.add_weight {shape = {s[2], 2}} end
function DotWeight:call(v) return v:matmul(self.w) end
try(function() DotWeight()(x) end)
try(function() m.summary() end)
try(function() m.count_params() end)
try(function() m.parameters() end)
try(function() m.named_parameters() end)
try(function() m.each_weight(print) end)
try(function() m.set_parameters(m:parameters()) end)
try(function() m.add(nn.Dense(1)) end)
try(function() m.compile_stats() end)
try(function() m.fit(x, y) end)
try(function() nn.Dense:count_params() end)

-- weights: set_parameters, initializers, add_weight shapes
try(function() m:set_parameters(3) end)
try(function() nn.Dense(2, {name = "d", kernel_initializer = function() return 1 end})(x) end)
try(function() nn.Dense(2, {name = "d", kernel_initializer = function() return tpu.zeros {3, 3} end})(x) end)
local Unknown = nn.Module:extend("Unknown")
function Unknown:build(s) self:add_weight {name = "w", shape = {s[2], -1}} end
try(function() Unknown {name = "unknown"}(x) end)
try(function() nn.Dense(1e12, {name = "huge"})(tpu.zeros {2, 3}) end)

-- checkpoints and files
try(function() tpu.checkpoint.restore_training(model(), {}, nil) end)
try(function() tpu.checkpoint.restore_training(model()) end)
local path = dofile("../lua/files.lua").tmpname()  -- removed at exit
local f = assert(io.open(path, "wb"))
f:write("\x93NUMPY\1\0v\0{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", string.rep(" ", 52), "\n",
  string.rep("\0", 8))
f:close()
local function hide(text) return (text:gsub(path:gsub("%p", "%%%0"), "x.npy")) end
try(function()
  local ok, err = pcall(function() model():load(path) end)
  error(hide(err), 0)
end)
try(function()
  local ok, err = pcall(function() tpu.checkpoint.load(path) end)
  error(hide(err), 0)
end)
os.remove(path)
