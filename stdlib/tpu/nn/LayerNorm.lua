-- Layer normalization over the last axis, per example:
--   y = (x - mean) / sqrt(var + epsilon) * gamma + beta
--
--   nn.LayerNorm()                       -- epsilon 1e-3 (the default)
--   nn.LayerNorm {epsilon = 1e-5, center = false}
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local LayerNorm = Module:extend("LayerNorm")

local options = util.options {"epsilon", "center", "scale", "beta_initializer", "gamma_initializer"}

function LayerNorm:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  self.epsilon = util.check_positive("LayerNorm", "epsilon", opts.epsilon or 1e-3)
  self.center = util.flag("LayerNorm", opts, "center", true)
  self.scale = util.flag("LayerNorm", opts, "scale", true)
  self.beta_initializer = util.initializer(opts, "LayerNorm", "beta_initializer", "zeros")
  self.gamma_initializer = util.initializer(opts, "LayerNorm", "gamma_initializer", "ones")
end

function LayerNorm:build(input_shape)
  local n = input_shape[#input_shape]
  self.input_spec = {min_ndim = 1, axes = {[-1] = n}}
  if self.scale then
    self:add_weight {name = "gamma", shape = {n}, initializer = self.gamma_initializer}
  end
  if self.center then
    self:add_weight {name = "beta", shape = {n}, initializer = self.beta_initializer}
  end
end

-- Statistics in f32 whatever the compute dtype.
function LayerNorm:call(x, _ctx)
  local xf = util.cast_float(x, "f32")
  local centered = xf - xf:mean(-1, true)
  local y = centered * (centered:square():mean(-1, true) + self.epsilon):rsqrt()
  if self.scale then y = y * util.cast_float(self.gamma, "f32") end
  if self.center then y = y + util.cast_float(self.beta, "f32") end
  return util.cast_float(y, util.output_dtype(self.dtype_policy))
end

function LayerNorm:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function LayerNorm:repr()
  local shape = self.built and self.input_shape
  return string.format("nn.LayerNorm(%s)", shape and tostring(shape[#shape]) or "?")
end

return LayerNorm
