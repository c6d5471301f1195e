-- model:export refuses what ONNX cannot hold, naming the layer, the line that built it and
-- the user's line of the export call; nothing is written.
local tpu = require "tpu"
local nn = tpu.nn

local Scale = nn.Module:extend("Scale")
function Scale:call(x, _ctx) return x * 2 end

local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or err)
end

local doubled = nn.Sequential {nn.Input {shape = {4}},
  nn.Dense(3, {activation = function(x) return x * 2 end, name = "doubled"})}
try(function() doubled:export("export_errors.onnx") end)
try(function() nn.Sequential {nn.Dense(3)}:export("export_errors.onnx") end)
try(function() doubled:export(nil) end)

local model = nn.Sequential {nn.Input {shape = {4}}, nn.Dense(3), Scale {name = "my_scale"}}
model:export("export_errors.onnx")
