-- 1-D convolution over sequences (batch, steps, channels), as Keras's Conv1D:
--   y = activation(conv1d(x, kernel, strides, padding, dilation_rate, groups) + bias)
--
--   nn.Conv1D(64, 5, {activation = "relu", padding = "causal"})
-- The kernel is (kernel_size, channels / groups, filters). padding "valid", "same", or
-- "causal" (output t sees inputs up to t only: (kernel_size - 1) * dilation_rate zeros in
-- front). It runs as the 2-D conv of a one-row image.
local Module = require "tpu.nn.Module"
local conv_util = require "tpu.nn.conv_util"
local kernel_bias = require "tpu.nn.kernel_bias"
local util = require "tpu.nn.util"

local Conv1D = Module:extend("Conv1D")
Conv1D.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local options = util.options {"strides", "padding", "dilation_rate", "groups", "activation", "use_bias",
                              "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer"}

function Conv1D:__init(filters, kernel_size, opts)
  self.filters = util.check_integer("Conv1D", "filters", filters)
  self.kernel_size = util.check_integer("Conv1D", "kernel_size", kernel_size)
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  self.strides = util.check_integer("Conv1D", "strides", opts.strides or 1)
  self.dilation_rate = util.check_integer("Conv1D", "dilation_rate", opts.dilation_rate or 1)
  if opts.padding ~= nil and opts.padding ~= "valid" and opts.padding ~= "same" and opts.padding ~= "causal" then
    util.fail("Conv1D: padding must be \"valid\", \"same\" or \"causal\", got %s", util.show(opts.padding))
  end
  self.padding = opts.padding or "valid"
  self.groups = conv_util.groups("Conv1D", opts, self.filters)
  kernel_bias.init(self, "Conv1D", opts)
end

function Conv1D:build(input_shape)
  conv_util.check_rank(self, input_shape, 3)
  local c = conv_util.check_channels(self, input_shape, self.groups)
  self.input_spec = {ndim = 3, axes = {[-1] = c}}
  kernel_bias.add_weights(self, {self.kernel_size, c // self.groups, self.filters}, {self.filters})
  self:compute_output_shape(input_shape)
end

function Conv1D:call(x, _ctx)
  local xc, k = conv_util.operands(self, x, self.kernel)
  local b, steps, c = table.unpack(xc.shape)
  local padding = self.padding
  if padding == "causal" then padding = {{0, 0}, {(self.kernel_size - 1) * self.dilation_rate, 0}} end
  local y = xc:reshape {b, 1, steps, c}:conv2d(k:reshape {1, table.unpack(k.shape)},
    {strides = {1, self.strides}, padding = padding, dilation = {1, self.dilation_rate}, groups = self.groups})
  return conv_util.finish(self, y:reshape {b, y.shape[3], self.filters})
end

function Conv1D:compute_output_shape(s)
  local n = conv_util.out_len(s[2], self.kernel_size, self.strides, self.dilation_rate, self.padding)
  if s[2] >= 0 and n < 1 then
    util.fail("Conv1D '%s': %s does not fit input %s with padding \"%s\"", self.name,
      conv_util.kernel_text(self.kernel_size, self.dilation_rate), util.shape_text(s), self.padding)
  end
  return {s[1], n, self.filters}
end

function Conv1D:repr()
  local c = self.built and tostring(self.kernel.shape[2] * self.groups) or "?"
  return conv_util.repr_parts(self, {string.format("%s -> %d", c, self.filters)})
end

return Conv1D
