-- Adds a list of tensors of one shape elementwise: nn.Add() {a, b, c} (residual connections).
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local Add = Module:extend("Add")

function Add:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, util.options {})
  self:init_common(opts)
end

local function same(a, b)
  if #a ~= #b then return false end
  for d = 2, #a do
    if a[d] ~= b[d] then return false end
  end
  return true
end

function Add:build(input_shape)
  util.merge_shapes(self, input_shape)
  for i = 2, #input_shape do
    if not same(input_shape[1], input_shape[i]) then
      util.fail("Add '%s' needs inputs of one shape, got %s", self.name, util.shapes_text(input_shape))
    end
  end
end

function Add:call(xs, _ctx)
  self:build(util.shape_of(xs))
  local y = xs[1]
  for i = 2, #xs do y = y + xs[i] end
  return y
end

function Add:compute_output_shape(input_shape)
  self:build(input_shape)
  return util.copy(input_shape[1])
end

return Add
