-- Rescales its input: y = x * scale + offset, as Keras's Rescaling (pixel values 0..255 to 0..1
-- with nn.Rescaling(1 / 255), to -1..1 with nn.Rescaling(1 / 127.5, {offset = -1})). No weights.
-- scale and offset are numbers, or lists with one number per channel (the last axis). The
-- output is floating (an integer input is cast to the layer's compute dtype).
--
--   nn.Rescaling(1 / 255)      nn.Rescaling({0.5, 1, 2}, {offset = -1})
local core = require "tpu.core"
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local Rescaling = Module:extend("Rescaling")
Rescaling.token_wise = true  -- each position on its own: model:generate may run it a token at a time
Rescaling.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

-- A number, or a non-empty list of numbers (one per channel) as a constant.
local function factor(name, v)
  if type(v) == "number" then return v end
  local ok = type(v) == "table" and not util.is_tensor(v) and #v > 0
  for i = 1, ok and #v or 0 do ok = ok and type(v[i]) == "number" end
  if not ok then util.fail("Rescaling: %s must be a number or a list of numbers, got %s", name, util.show(v)) end
  return util.copy(v)
end

function Rescaling:__init(scale, opts)
  opts = opts or {}
  util.check_options(self, opts, util.options {"offset"})
  self:init_common(opts)
  self.scale = factor("scale", scale)
  self.offset = factor("offset", opts.offset or 0)
end

function Rescaling:build(input_shape)
  local c = input_shape[#input_shape]
  for _, name in ipairs {"scale", "offset"} do
    local v = self[name]
    if type(v) == "table" and #v ~= c then
      util.fail("Rescaling '%s': %s has %d entries for %d channels (input %s)", self.name, name, #v, c,
        util.shape_text(input_shape))
    end
  end
end

local function constant(v, dtype)
  return type(v) == "table" and core.tensor(v, {dtype = dtype}) or v
end

-- In the layer's output dtype: f32 under mixed_bfloat16 (only matmuls and convolutions take
-- bf16 operands there), so an offset of thousands keeps its fraction.
function Rescaling:call(x, _ctx)
  local dtype = util.output_dtype(self.dtype_policy)
  local xf = x.dtype == dtype and x or x:cast(dtype)
  return xf * constant(self.scale, dtype) + constant(self.offset, dtype)
end

function Rescaling:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function Rescaling:repr()
  return string.format("nn.Rescaling(%s)", util.show(self.scale))
end

return Rescaling
