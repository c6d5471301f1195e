-- Keras's Softmax layer: exp(x) / sum(exp(x)) along `axis` (the last by default).
--   nn.Softmax()    nn.Softmax(2)    nn.Softmax {axis = 2}
-- Over the last axis its output is the "softmax" activation's: a loss given by name reads the
-- logits behind it, as Keras's does; over another axis it reads the output as probabilities.
local Module = require "tpu.nn.Module"
local Activation = require "tpu.nn.Activation"
local util = require "tpu.nn.util"

local Softmax = Module:extend("Softmax")
Softmax.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

function Softmax:__init(a, b)
  local opts = util.leading_option(self, a, b, "axis")
  util.check_options(self, opts, util.options {"axis"})
  self:init_common(opts)
  local axis = opts.axis == nil and -1 or opts.axis
  if math.type(axis) ~= "integer" or axis == 0 then
    util.fail("Softmax: axis must be a non-zero integer (1-based, or negative from the end), got %s",
      util.show(axis))
  end
  self.axis = axis
  -- over the last axis each position is on its own (model:generate may run it a token at a time)
  self.token_wise = axis == -1
end

function Softmax:build(input_shape)
  local n = #input_shape
  if util.axis(self.axis, n) < 1 or util.axis(self.axis, n) > n then
    util.fail("Softmax '%s': axis %d is out of range for input %s", self.name, self.axis,
      util.shape_text(input_shape))
  end
end

function Softmax:call(x, _ctx)
  if util.axis(self.axis, #x.shape) == #x.shape then return Activation.functions.softmax(x) end
  -- Over another axis: probabilities without logits for the last axis, which a loss by name
  -- normalizes there, as Keras's losses do with any probabilities.
  local y = x:softmax(self.axis)
  Activation._mark_probabilities(y, "softmax")
  return y
end

function Softmax:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function Softmax:repr()
  return string.format("nn.Softmax(axis %d)", self.axis)
end

return Softmax
