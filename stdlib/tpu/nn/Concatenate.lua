-- Joins a list of tensors along one axis: nn.Concatenate {axis = -1} {a, b}. The axis is
-- 1-based like every axis in tpu (1 is the batch axis, -1 the last; the default).
local core = require "tpu.core"
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local Concatenate = Module:extend("Concatenate")

function Concatenate:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, util.options {"axis"})
  self:init_common(opts)
  local axis = opts.axis or -1
  if math.type(axis) ~= "integer" or axis == 0 then
    util.fail("Concatenate: axis must be a non-zero integer (1-based; -1 is the last axis), got %s",
      util.show(axis))
  end
  self.axis = axis
end

-- Shapes must agree except on the axis; returns the output shape.
function Concatenate:_merged(shapes)
  util.merge_shapes(self, shapes)
  local n = #shapes[1]
  local axis = util.axis(self.axis, n)
  local out = util.copy(shapes[1])
  local ok = axis >= 1 and axis <= n
  for i = 2, #shapes do
    local s = shapes[i]
    ok = ok and #s == n
    for d = 1, ok and n or 0 do
      if d ~= axis and s[d] ~= out[d] and d > 1 then ok = false end
    end
    if ok then out[axis] = out[axis] + s[axis] end
  end
  if not ok then
    util.fail("Concatenate '%s' (axis %d) needs inputs of one rank whose sizes match except on "
      .. "that axis, got %s", self.name, self.axis, util.shapes_text(shapes))
  end
  return out
end

function Concatenate:build(input_shape)
  self:_merged(input_shape)
end

function Concatenate:call(xs, _ctx)
  self:_merged(util.shape_of(xs))
  return core.concat(xs, util.axis(self.axis, xs[1].ndim))
end

function Concatenate:compute_output_shape(input_shape)
  return self:_merged(input_shape)
end

function Concatenate:repr()
  return string.format("nn.Concatenate(axis %d)", self.axis)
end

return Concatenate
