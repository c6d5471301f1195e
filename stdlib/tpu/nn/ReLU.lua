-- Keras's ReLU layer: nn.ReLU(), nn.ReLU {max_value = 6}, nn.ReLU {negative_slope = 0.1, threshold = 1}.
--   f(x) = x where x > threshold, else 0; clipped to [0, max_value] when max_value is given;
--          minus negative_slope * max(threshold - x, 0)
-- (keras.activations.relu: with threshold 0 and no max_value it is leaky_relu(x, negative_slope)).
-- A number first is max_value, as Keras's first argument: nn.ReLU(6).
local core = require "tpu.core"
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local ReLU = Module:extend("ReLU")
ReLU.token_wise = true  -- each position on its own: model:generate may run it a token at a time
ReLU.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local function number(name, v, default, lo)
  if v == nil then return default end
  if not util.is_finite(v) or (lo and v < lo) then
    util.fail("ReLU: %s must be a %snumber, got %s", name, lo and "non-negative " or "", util.show(v))
  end
  return v
end

function ReLU:__init(a, b)
  local opts = util.leading_option(self, a, b, "max_value")
  util.check_options(self, opts, util.options {"max_value", "negative_slope", "threshold"})
  self:init_common(opts)
  self.max_value = number("max_value", opts.max_value, nil, 0)
  self.negative_slope = number("negative_slope", opts.negative_slope, 0, 0)
  self.threshold = number("threshold", opts.threshold, 0)
end

-- keras.activations.relu(x, negative_slope, max_value, threshold), step by step as Keras computes it.
function ReLU:call(x, _ctx)
  local slope, max_value, threshold = self.negative_slope, self.max_value, self.threshold
  if slope ~= 0 and max_value == nil and threshold == 0 then
    return x:leaky_relu {negative_slope = slope}
  end
  local y = threshold ~= 0 and core.where(x:gt(threshold), x, 0) or x:relu()
  if max_value then y = y:maximum(0):minimum(max_value) end
  if slope ~= 0 then y = y - (threshold - x):relu() * slope end
  return y
end

function ReLU:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function ReLU:repr()
  local parts = {}
  if self.max_value then parts[#parts + 1] = string.format("max_value %g", self.max_value) end
  if self.negative_slope ~= 0 then parts[#parts + 1] = string.format("negative_slope %g", self.negative_slope) end
  if self.threshold ~= 0 then parts[#parts + 1] = string.format("threshold %g", self.threshold) end
  return "nn.ReLU(" .. table.concat(parts, ", ") .. ")"
end

return ReLU
