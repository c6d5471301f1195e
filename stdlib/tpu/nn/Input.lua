-- nn.Input{shape=, dtype=, name=}: an input of a functional model, a symbolic tensor whose
-- shape leaves out the batch dimension (-1 for a size known only at run time).
--
--   local tokens = nn.Input {shape = {-1}, dtype = "i32"}      -- variable-length sequences
--   local image = nn.Input {shape = {28, 28, 1}}
local Node = require "tpu.nn.Node"
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local counter = 0
local dtypes = {f32 = true, bf16 = true, i32 = true, u8 = true, bool = true}

local function check_shape(shape)
  local ok = type(shape) == "table" and not util.is_tensor(shape)
  for _, d in ipairs(ok and shape or {}) do
    ok = ok and (util.is_positive_integer(d) or d == -1)
  end
  if not ok or next(shape, #shape > 0 and #shape or nil) ~= nil then
    util.fail("Input: shape must be a list of sizes without the batch dimension (-1 for a size "
      .. "known only at run time), e.g. {28, 28, 1}; got %s", util.show(shape))
  end
  local out = {-1}
  for i, d in ipairs(shape) do out[i + 1] = math.tointeger(d) end
  return out
end

return function(spec, extra)
  errors.none(2, "Input", extra)
  util.check_options({__name = "Input"}, spec or {}, {"shape", "dtype", "name"})
  spec = spec or {}
  local shape = check_shape(spec.shape)
  local dtype = spec.dtype or "f32"
  if not dtypes[dtype] then
    util.fail("Input: dtype must be one of f32, bf16, i32, u8, bool; got %s", util.show(dtype))
  end
  if spec.name ~= nil and type(spec.name) ~= "string" then
    util.fail("Input: name must be a string, got %s", util.show(spec.name))
  end
  counter = counter + 1
  return Node {shape = shape, dtype = dtype, name = spec.name or ("input_" .. counter)}
end
