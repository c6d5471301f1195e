-- What the layers with a kernel and a bias share (Dense, Conv2D): their options (activation,
-- use_bias, the initializers and regularizers) and their weights.
local Activation = require "tpu.nn.Activation"
local util = require "tpu.nn.util"

local M = {}

-- Checks opts' kernel and bias options and sets them on the layer; who names it in errors.
function M.init(layer, who, opts)
  layer.activation_name = type(opts.activation) == "string" and opts.activation
                          or opts.activation and "custom" or "linear"
  layer.activation = Activation._get(opts.activation, who)
  layer.use_bias = util.flag(who, opts, "use_bias", true)
  layer.kernel_initializer = util.initializer(opts, who, "kernel_initializer", "glorot_uniform")
  layer.bias_initializer = util.initializer(opts, who, "bias_initializer", "zeros")
  layer.kernel_regularizer = util.regularizer(opts, who, "kernel_regularizer")
  layer.bias_regularizer = util.regularizer(opts, who, "bias_regularizer")
end

-- Adds the weights "kernel" and, with use_bias, "bias" of the given shapes.
function M.add_weights(layer, kernel_shape, bias_shape)
  layer:add_weight {name = "kernel", shape = kernel_shape, initializer = layer.kernel_initializer,
                    regularizer = layer.kernel_regularizer}
  if layer.use_bias then
    layer:add_weight {name = "bias", shape = bias_shape, initializer = layer.bias_initializer,
                      regularizer = layer.bias_regularizer}
  end
end

return M
