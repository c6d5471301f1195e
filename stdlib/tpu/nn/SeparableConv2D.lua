-- Depthwise separable 2-D convolution, as Keras's SeparableConv2D: a depthwise conv (each
-- channel by its own depth_multiplier filters) then a pointwise 1x1 conv to `filters`:
--   y = activation(pointwise(depthwise(x)) + bias)
--
--   nn.SeparableConv2D(64, 3, {padding = "same", activation = "relu"})
-- Weights: depthwise_kernel (kh, kw, channels, depth_multiplier), pointwise_kernel (1, 1,
-- channels * depth_multiplier, filters) and bias (filters); on 32 channels SeparableConv2D(64, 3)
-- has 32*9 + 32*64 + 64 = 2,400 parameters.
local Module = require "tpu.nn.Module"
local DepthwiseConv2D = require "tpu.nn.DepthwiseConv2D"
local conv_util = require "tpu.nn.conv_util"
local util = require "tpu.nn.util"

local SeparableConv2D = Module:extend("SeparableConv2D")
SeparableConv2D.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local options = util.options {"strides", "padding", "depth_multiplier", "dilation_rate", "activation", "use_bias",
                              "depthwise_initializer", "pointwise_initializer", "bias_initializer",
                              "depthwise_regularizer", "pointwise_regularizer", "bias_regularizer"}

function SeparableConv2D:__init(filters, kernel_size, opts)
  self.filters = util.check_integer("SeparableConv2D", "filters", filters)
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  DepthwiseConv2D._init_depthwise(self, "SeparableConv2D", kernel_size, opts)
  DepthwiseConv2D._init_bias(self, "SeparableConv2D", opts)
  self.pointwise_initializer = util.initializer(opts, "SeparableConv2D", "pointwise_initializer", "glorot_uniform")
  self.pointwise_regularizer = util.regularizer(opts, "SeparableConv2D", "pointwise_regularizer")
end

function SeparableConv2D:build(input_shape)
  local c = DepthwiseConv2D._add_depthwise(self, input_shape)
  self:add_weight {name = "pointwise_kernel", shape = {1, 1, c * self.depth_multiplier, self.filters},
                   initializer = self.pointwise_initializer, regularizer = self.pointwise_regularizer}
  if self.use_bias then
    self:add_weight {name = "bias", shape = {self.filters}, initializer = self.bias_initializer,
                     regularizer = self.bias_regularizer}
  end
  self:compute_output_shape(input_shape)
end

function SeparableConv2D:call(x, _ctx)
  local xc, dk, pk = conv_util.operands(self, x, self.depthwise_kernel, self.pointwise_kernel)
  local mid = conv_util.operands(self, DepthwiseConv2D._depthwise(self, xc, dk))  -- rounded as an operand again
  return conv_util.finish(self, mid:conv2d(pk))
end

function SeparableConv2D:compute_output_shape(s)
  local h, w = DepthwiseConv2D._output_hw(self, s)
  return {s[1], h, w, self.filters}
end

function SeparableConv2D:repr()
  local c = self.built and tostring(self.depthwise_kernel.shape[3]) or "?"
  local parts = {string.format("%s -> %d", c, self.filters)}
  if self.depth_multiplier ~= 1 then parts[2] = "depth_multiplier " .. self.depth_multiplier end
  return conv_util.repr_parts(self, parts)
end

return SeparableConv2D
