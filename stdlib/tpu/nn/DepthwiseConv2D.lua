-- Depthwise 2-D convolution: each input channel convolved with its own depth_multiplier
-- filters (no mixing across channels), as Keras's DepthwiseConv2D:
--   y = activation(depthwise(x, depthwise_kernel) + bias)
--
--   nn.DepthwiseConv2D(3, {padding = "same", use_bias = false})
--   nn.DepthwiseConv2D({5, 5}, {strides = 2, depth_multiplier = 2, activation = "relu"})
-- depthwise_kernel is (kh, kw, channels, depth_multiplier) and the bias has channels *
-- depth_multiplier entries (output channel c * depth_multiplier + m is input channel c's
-- filter m). It runs as one conv with a feature group per channel.
local Module = require "tpu.nn.Module"
local Activation = require "tpu.nn.Activation"
local conv_util = require "tpu.nn.conv_util"
local util = require "tpu.nn.util"

local DepthwiseConv2D = Module:extend("DepthwiseConv2D")
DepthwiseConv2D.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local options = util.options {"strides", "padding", "depth_multiplier", "dilation_rate", "activation", "use_bias",
                              "depthwise_initializer", "bias_initializer", "depthwise_regularizer",
                              "bias_regularizer"}

-- The depthwise options shared with SeparableConv2D: kernel_size, strides, padding,
-- depth_multiplier, dilation_rate, the depthwise kernel's initializer and regularizer.
function DepthwiseConv2D._init_depthwise(layer, who, kernel_size, opts)
  layer.kernel_size = util.pair(kernel_size, who .. ": kernel_size")
  layer.strides = util.pair(opts.strides or 1, who .. ": strides")
  layer.padding = util.padding(opts.padding, who)
  layer.depth_multiplier = util.check_integer(who, "depth_multiplier", opts.depth_multiplier or 1)
  layer.dilation_rate = conv_util.dilation(who, opts)
  layer.depthwise_initializer = util.initializer(opts, who, "depthwise_initializer", "glorot_uniform")
  layer.depthwise_regularizer = util.regularizer(opts, who, "depthwise_regularizer")
end

-- Activation, use_bias and the bias's initializer and regularizer.
function DepthwiseConv2D._init_bias(layer, who, opts)
  layer.activation_name = type(opts.activation) == "string" and opts.activation
                          or opts.activation and "custom" or "linear"
  layer.activation = Activation._get(opts.activation, who)
  layer.use_bias = util.flag(who, opts, "use_bias", true)
  layer.bias_initializer = util.initializer(opts, who, "bias_initializer", "zeros")
  layer.bias_regularizer = util.regularizer(opts, who, "bias_regularizer")
end

function DepthwiseConv2D:__init(kernel_size, opts)
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  DepthwiseConv2D._init_depthwise(self, "DepthwiseConv2D", kernel_size, opts)
  DepthwiseConv2D._init_bias(self, "DepthwiseConv2D", opts)
end

-- Adds depthwise_kernel (kh, kw, c, depth_multiplier) for c input channels.
function DepthwiseConv2D._add_depthwise(layer, input_shape)
  conv_util.check_rank(layer, input_shape, 4)
  local c = input_shape[4]
  layer.input_spec = {ndim = 4, axes = {[-1] = c}}
  layer:add_weight {name = "depthwise_kernel", initializer = layer.depthwise_initializer,
                    shape = {layer.kernel_size[1], layer.kernel_size[2], c, layer.depth_multiplier},
                    regularizer = layer.depthwise_regularizer}
  return c
end

function DepthwiseConv2D:build(input_shape)
  local c = DepthwiseConv2D._add_depthwise(self, input_shape)
  if self.use_bias then
    self:add_weight {name = "bias", shape = {c * self.depth_multiplier}, initializer = self.bias_initializer,
                     regularizer = self.bias_regularizer}
  end
  self:compute_output_shape(input_shape)
end

-- The depthwise conv of x (already in the compute type) by kernel (kh, kw, c, m): one conv in
-- c groups with the filter (kh, kw, 1, c * m).
function DepthwiseConv2D._depthwise(layer, x, kernel)
  local kh, kw, c, m = table.unpack(kernel.shape)
  return x:conv2d(kernel:reshape {kh, kw, 1, c * m}, {strides = layer.strides, padding = layer.padding,
                                                       dilation = layer.dilation_rate, groups = c})
end

function DepthwiseConv2D:call(x, _ctx)
  local xc, k = conv_util.operands(self, x, self.depthwise_kernel)
  return conv_util.finish(self, DepthwiseConv2D._depthwise(self, xc, k))
end

-- The spatial output size, or an error naming the layer.
function DepthwiseConv2D._output_hw(layer, s)
  local h = conv_util.out_len(s[2], layer.kernel_size[1], layer.strides[1], layer.dilation_rate[1], layer.padding)
  local w = conv_util.out_len(s[3], layer.kernel_size[2], layer.strides[2], layer.dilation_rate[2], layer.padding)
  if (s[2] >= 0 and h < 1) or (s[3] >= 0 and w < 1) then
    util.fail("%s '%s': %s does not fit input %s with padding \"%s\"", layer.__name, layer.name,
      conv_util.kernel_text(layer.kernel_size, layer.dilation_rate), util.shape_text(s), layer.padding)
  end
  return h, w
end

function DepthwiseConv2D:compute_output_shape(s)
  local h, w = DepthwiseConv2D._output_hw(self, s)
  return {s[1], h, w, s[4] * self.depth_multiplier}
end

function DepthwiseConv2D:repr()
  local c = self.built and self.depthwise_kernel.shape[3]
  local parts = {c and string.format("%d -> %d", c, c * self.depth_multiplier) or "?"}
  if self.depth_multiplier ~= 1 then parts[2] = "depth_multiplier " .. self.depth_multiplier end
  return conv_util.repr_parts(self, parts)
end

return DepthwiseConv2D
