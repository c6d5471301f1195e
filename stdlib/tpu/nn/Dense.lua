-- Fully connected layer: y = activation(x @ kernel + bias) on the last axis.
--
--   nn.Dense(512, {activation = "relu"})
--   nn.Dense(10, {use_bias = false, kernel_initializer = "he_normal", dtype = "f32"})
--   nn.Dense(64, {kernel_regularizer = nn.regularizers.l2(1e-4)})
local Module = require "tpu.nn.Module"
local kernel_bias = require "tpu.nn.kernel_bias"
local util = require "tpu.nn.util"

local Dense = Module:extend("Dense")
Dense.token_wise = true  -- each position on its own: model:generate may run it a token at a time
Dense.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local options = util.options {"activation", "use_bias", "kernel_initializer", "bias_initializer",
                              "kernel_regularizer", "bias_regularizer"}

function Dense:__init(units, opts)
  opts = opts or {}
  if not util.is_positive_integer(units) then
    util.fail("Dense: units must be a positive integer, got %s", util.show(units))
  end
  util.check_options(self, opts, options)
  self:init_common(opts)
  self.units = math.tointeger(units)
  kernel_bias.init(self, "Dense", opts)
end

function Dense:build(input_shape)
  local n_in = input_shape[#input_shape]
  if n_in == nil or n_in < 0 then
    util.fail("Dense '%s' needs the size of its input's last dimension, got %s (a Flatten over "
      .. "sizes not known yet, say)", self.name, util.shape_text(input_shape))
  end
  self.input_spec = {min_ndim = 2, axes = {[-1] = n_in}}
  kernel_bias.add_weights(self, {n_in, self.units}, {self.units})
end

function Dense:call(x, _ctx)
  local y = util.policy_matmul(x, self.kernel, self.dtype_policy)
  if self.use_bias then y = y + util.cast_float(self.bias, y.dtype) end
  return self.activation(y)
end

function Dense:compute_output_shape(input_shape)
  local out = util.copy(input_shape)
  out[#out] = self.units
  return out
end

function Dense:repr()
  local n_in = self.built and tostring(self.kernel.shape[1]) or "?"
  local extra = self.activation_name ~= "linear" and ", " .. self.activation_name or ""
  return string.format("nn.Dense(%s -> %d%s)", n_in, self.units, extra)
end

return Dense
