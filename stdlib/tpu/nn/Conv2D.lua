-- 2-D convolution over NHWC images with an HWIO kernel:
--   y = activation(conv2d(x, kernel, strides, padding, dilation_rate, groups) + bias)
--
--   nn.Conv2D(32, 3, {activation = "relu", padding = "same"})
--   nn.Conv2D(64, {5, 3}, {strides = 2, use_bias = false,
--                          kernel_regularizer = nn.regularizers.l2(1e-4)})
--   nn.Conv2D(64, 3, {dilation_rate = 2, groups = 4})
-- padding "valid" (the default) keeps only full windows; "same" pads so the output
-- has ceil(size / stride) positions. dilation_rate spaces the kernel's taps (an atrous
-- conv); groups splits the input channels and the filters into that many groups, each
-- filter reading only its group's channels: the kernel is (kh, kw, channels / groups,
-- filters), as Keras's.
local Module = require "tpu.nn.Module"
local conv_util = require "tpu.nn.conv_util"
local kernel_bias = require "tpu.nn.kernel_bias"
local util = require "tpu.nn.util"

local Conv2D = Module:extend("Conv2D")
Conv2D.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local options = util.options {"strides", "padding", "dilation_rate", "groups", "activation", "use_bias",
                              "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer"}

function Conv2D:__init(filters, kernel_size, opts)
  self.filters = util.check_integer("Conv2D", "filters", filters)
  self.kernel_size = util.pair(kernel_size, "Conv2D: kernel_size")
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  self.strides = util.pair(opts.strides or 1, "Conv2D: strides")
  self.padding = util.padding(opts.padding, "Conv2D")
  self.dilation_rate = conv_util.dilation("Conv2D", opts)
  self.groups = conv_util.groups("Conv2D", opts, self.filters)
  kernel_bias.init(self, "Conv2D", opts)
end

function Conv2D:build(input_shape)
  conv_util.check_rank(self, input_shape, 4)
  local c = conv_util.check_channels(self, input_shape, self.groups)
  self.input_spec = {ndim = 4, axes = {[-1] = c}}
  local kh, kw = self.kernel_size[1], self.kernel_size[2]
  kernel_bias.add_weights(self, {kh, kw, c // self.groups, self.filters}, {self.filters})
  self:compute_output_shape(input_shape)
end

function Conv2D:call(x, _ctx)
  local xc, k = conv_util.operands(self, x, self.kernel)
  local y = xc:conv2d(k, {strides = self.strides, padding = self.padding, dilation = self.dilation_rate,
                          groups = self.groups})
  return conv_util.finish(self, y)
end

function Conv2D:compute_output_shape(s)
  local h = conv_util.out_len(s[2], self.kernel_size[1], self.strides[1], self.dilation_rate[1], self.padding)
  local w = conv_util.out_len(s[3], self.kernel_size[2], self.strides[2], self.dilation_rate[2], self.padding)
  if (s[2] >= 0 and h < 1) or (s[3] >= 0 and w < 1) then
    util.fail("Conv2D '%s': %s does not fit input %s with padding \"%s\"",
      self.name, conv_util.kernel_text(self.kernel_size, self.dilation_rate), util.shape_text(s), self.padding)
  end
  return {s[1], h, w, self.filters}
end

function Conv2D:repr()
  local c = self.built and tostring(self.kernel.shape[3] * self.groups) or "?"
  return conv_util.repr_parts(self, {string.format("%s -> %d", c, self.filters)})
end

return Conv2D
