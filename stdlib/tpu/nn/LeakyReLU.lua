-- Keras's LeakyReLU layer: x where x >= 0, negative_slope * x elsewhere. The layer's default
-- slope is 0.3 (keras.layers.LeakyReLU), unlike the "leaky_relu" activation's 0.2.
--   nn.LeakyReLU()    nn.LeakyReLU(0.1)    nn.LeakyReLU {negative_slope = 0.1}
-- Keras 2's name of the option, alpha, is taken too.
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local LeakyReLU = Module:extend("LeakyReLU")
LeakyReLU.token_wise = true  -- each position on its own: model:generate may run it a token at a time
LeakyReLU.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

function LeakyReLU:__init(a, b)
  local opts = util.leading_option(self, a, b, "negative_slope")
  util.check_options(self, opts, util.options {"negative_slope", "alpha"})
  if opts.alpha ~= nil and opts.negative_slope ~= nil then
    util.fail("LeakyReLU: give negative_slope or its Keras 2 name alpha, not both")
  end
  self:init_common(opts)
  local slope = opts.negative_slope
  if slope == nil then slope = opts.alpha end
  if slope == nil then slope = 0.3 end
  if not util.is_finite(slope) or slope < 0 then
    util.fail("LeakyReLU: negative_slope must be a non-negative number, got %s", util.show(slope))
  end
  self.negative_slope = slope
end

function LeakyReLU:call(x, _ctx)
  return x:leaky_relu {negative_slope = self.negative_slope}
end

function LeakyReLU:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function LeakyReLU:repr()
  return string.format("nn.LeakyReLU(%g)", self.negative_slope)
end

return LeakyReLU
