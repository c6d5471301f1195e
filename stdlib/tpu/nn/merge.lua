-- Keras's merge layers (Add, Multiply): a list of inputs of one rank whose sizes, batch aside,
-- are equal or 1 on each axis, combined elementwise with broadcasting (a [batch, 1, 1, C] gate
-- times a [batch, H, W, C] feature map). Each layer is one file naming its combining function.
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local M = {}

-- A new layer class called `name` that folds its inputs with combine(a, b).
function M.layer(name, combine)
  local Layer = Module:extend(name)
  Layer.token_wise = true  -- elementwise: model:generate may run it a token at a time

  function Layer:__init(opts)
    opts = opts or {}
    util.check_options(self, opts, util.options {})
    self:init_common(opts)
  end

  -- The broadcast shape of the inputs (NumPy's rule on the axes after the batch), or an error.
  function Layer:_merged(shapes)
    util.merge_shapes(self, shapes)
    local out = util.copy(shapes[1])
    for i = 2, #shapes do
      local s = shapes[i]
      local ok = #s == #out
      for d = 2, ok and #s or 0 do
        if out[d] == 1 then out[d] = s[d] elseif s[d] ~= 1 and s[d] ~= out[d] then ok = false end
      end
      if not ok then
        util.fail("%s '%s' needs inputs of one rank whose sizes are equal or 1 on each axis, got %s",
          name, self.name, util.shapes_text(shapes))
      end
    end
    return out
  end

  function Layer:build(input_shape)
    self:_merged(input_shape)
  end

  function Layer:call(xs, _ctx)
    self:_merged(util.shape_of(xs))
    local y = xs[1]
    for i = 2, #xs do y = combine(y, xs[i]) end
    return y
  end

  function Layer:compute_output_shape(input_shape)
    return self:_merged(input_shape)
  end

  return Layer
end

return M
