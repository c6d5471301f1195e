-- Multiplies a list of tensors elementwise: nn.Multiply() {a, b, c} (gates, squeeze-excitation).
-- As Keras's Multiply, the inputs share a rank and each size (batch aside) is equal or 1, which
-- broadcasts: a [batch, 1, 1, C] scale times a [batch, H, W, C] feature map.
--
--   local gated = nn.Multiply() {features, nn.Dense(64, {activation = "sigmoid"})(features)}
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local Multiply = Module:extend("Multiply")

function Multiply:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, util.options {})
  self:init_common(opts)
end

-- The broadcast shape of the inputs (NumPy's rule on the axes after the batch), or an error.
function Multiply:merged(shapes)
  util.merge_shapes(self, shapes)
  local out = util.copy(shapes[1])
  for i = 2, #shapes do
    local s = shapes[i]
    local ok = #s == #out
    for d = 2, ok and #s or 0 do
      if out[d] == 1 then out[d] = s[d] elseif s[d] ~= 1 and s[d] ~= out[d] then ok = false end
    end
    if not ok then
      util.fail("Multiply '%s' needs inputs of one rank whose sizes are equal or 1 on each axis, "
        .. "got %s", self.name, util.shapes_text(shapes))
    end
  end
  return out
end

function Multiply:build(input_shape)
  self:merged(input_shape)
end

function Multiply:call(xs, _ctx)
  self:merged(util.shape_of(xs))
  local y = xs[1]
  for i = 2, #xs do y = y * xs[i] end
  return y
end

function Multiply:compute_output_shape(input_shape)
  return self:merged(input_shape)
end

return Multiply
