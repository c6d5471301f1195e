-- What the normalization layers share (BatchNorm, LayerNorm): epsilon, the learned scale
-- (gamma) and offset (beta), and how they apply: to the normalized values (apply, LayerNorm) or
-- folded into per-channel factors first (folded, BatchNorm).
local util = require "tpu.nn.util"

local M = {}

-- Checks opts' epsilon, center, scale and their initializers and sets them on the layer.
function M.init(layer, who, opts)
  layer.epsilon = util.check_positive(who, "epsilon", opts.epsilon or 1e-3)
  layer.center = util.flag(who, opts, "center", true)
  layer.scale = util.flag(who, opts, "scale", true)
  layer.beta_initializer = util.initializer(opts, who, "beta_initializer", "zeros")
  layer.gamma_initializer = util.initializer(opts, who, "gamma_initializer", "ones")
end

-- Adds "gamma" (with scale) and "beta" (with center), n values each.
function M.add_weights(layer, n)
  if layer.scale then layer:add_weight {name = "gamma", shape = {n}, initializer = layer.gamma_initializer} end
  if layer.center then layer:add_weight {name = "beta", shape = {n}, initializer = layer.beta_initializer} end
end

-- y (f32, normalized) scaled by gamma and shifted by beta, in the layer's output dtype.
function M.apply(layer, y)
  if layer.scale then y = y * util.cast_float(layer.gamma, "f32") end
  if layer.center then y = y + util.cast_float(layer.beta, "f32") end
  return util.cast_float(y, util.output_dtype(layer.dtype_policy))
end

-- x (f32) normalized by per-channel mean and inv = 1 / sqrt(var + epsilon), scaled and shifted,
-- as x * inv' + (beta - mean * inv') with inv' = inv * gamma (tf.nn.batch_normalization's form,
-- which Keras 3's BatchNormalization takes), in the layer's output dtype.
function M.folded(layer, x, mean, inv)
  if layer.scale then inv = inv * util.cast_float(layer.gamma, "f32") end
  local shift = -(mean * inv)
  if layer.center then shift = util.cast_float(layer.beta, "f32") + shift end
  return util.cast_float(x * inv + shift, util.output_dtype(layer.dtype_policy))
end

return M
