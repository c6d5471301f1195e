-- Keras's ELU layer: x where x > 0, alpha (exp(x) - 1) elsewhere.
--   nn.ELU()    nn.ELU(0.5)    nn.ELU {alpha = 0.5}
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local ELU = Module:extend("ELU")
ELU.token_wise = true  -- each position on its own: model:generate may run it a token at a time
ELU.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

function ELU:__init(a, b)
  local opts = util.leading_option(self, a, b, "alpha")
  util.check_options(self, opts, util.options {"alpha"})
  self:init_common(opts)
  local alpha = opts.alpha == nil and 1 or opts.alpha
  if not util.is_finite(alpha) then util.fail("ELU: alpha must be a number, got %s", util.show(alpha)) end
  self.alpha = alpha
end

function ELU:call(x, _ctx)
  return x:elu {alpha = self.alpha}
end

function ELU:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function ELU:repr()
  return string.format("nn.ELU(%g)", self.alpha)
end

return ELU
