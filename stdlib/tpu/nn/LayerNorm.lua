-- Layer normalization over the last axis, per example:
--   y = (x - mean) / sqrt(var + epsilon) * gamma + beta
--
--   nn.LayerNorm()                       -- epsilon 1e-3 (the default)
--   nn.LayerNorm {epsilon = 1e-5, center = false}
local Module = require "tpu.nn.Module"
local scale_center = require "tpu.nn.scale_center"
local util = require "tpu.nn.util"

local LayerNorm = Module:extend("LayerNorm")
LayerNorm.token_wise = true  -- each position on its own: model:generate may run it a token at a time
LayerNorm.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local options = util.options {"epsilon", "center", "scale", "beta_initializer", "gamma_initializer"}

function LayerNorm:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  scale_center.init(self, "LayerNorm", opts)
end

function LayerNorm:build(input_shape)
  local n = input_shape[#input_shape]
  self.input_spec = {min_ndim = 1, axes = {[-1] = n}}
  scale_center.add_weights(self, n)
end

-- Statistics in f32 whatever the compute dtype.
function LayerNorm:call(x, _ctx)
  local xf = util.cast_float(x, "f32")
  local centered = xf - xf:mean(-1, true)
  return scale_center.apply(self, centered * (centered:square():mean(-1, true) + self.epsilon):rsqrt())
end

function LayerNorm:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function LayerNorm:repr()
  local shape = self.built and self.input_shape
  return string.format("nn.LayerNorm(%s)", shape and tostring(shape[#shape]) or "?")
end

return LayerNorm
