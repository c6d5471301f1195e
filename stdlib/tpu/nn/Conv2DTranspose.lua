-- Transposed 2-D convolution (a "deconvolution"), as Keras's Conv2DTranspose: the gradient of a
-- Conv2D with these strides and padding, applied to x, so that it upsamples by the strides:
--   y = activation(conv2d_transpose(x, kernel, strides, padding, output_padding) + bias)
--
--   nn.Conv2DTranspose(32, 3, {strides = 2, padding = "same"})  -- 7x7 -> 14x14
-- The kernel is (kh, kw, filters, channels) as Keras's. Output size per spatial dim, for an
-- input of n, kernel span k = (kernel - 1) * dilation + 1 and stride s: "same" n * s, "valid"
-- n * s + max(k - s, 0); with output_padding p (< s): (n - 1) * s + k + p, less 2 * (k // 2)
-- for "same".
local Module = require "tpu.nn.Module"
local conv_util = require "tpu.nn.conv_util"
local kernel_bias = require "tpu.nn.kernel_bias"
local util = require "tpu.nn.util"

local Conv2DTranspose = Module:extend("Conv2DTranspose")
Conv2DTranspose.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local options = util.options {"strides", "padding", "output_padding", "dilation_rate", "activation", "use_bias",
                              "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer"}

-- nil, or a pair of non-negative integers each below its stride.
local function output_padding(v, strides)
  if v == nil then return nil end
  local p = type(v) == "table" and v or {v, v}
  for i = 1, 2 do
    if math.type(p[i]) ~= "integer" or p[i] < 0 or p[i] >= strides[i] or #p ~= 2 then
      util.fail("Conv2DTranspose: output_padding must be a non-negative integer or a pair {h, w} of them "
        .. "below the strides (%dx%d), got %s", strides[1], strides[2], util.show(v))
    end
  end
  return {p[1], p[2]}
end

function Conv2DTranspose:__init(filters, kernel_size, opts)
  self.filters = util.check_integer("Conv2DTranspose", "filters", filters)
  self.kernel_size = util.pair(kernel_size, "Conv2DTranspose: kernel_size")
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  self.strides = util.pair(opts.strides or 1, "Conv2DTranspose: strides")
  self.padding = util.padding(opts.padding, "Conv2DTranspose")
  self.dilation_rate = conv_util.dilation("Conv2DTranspose", opts)
  self.output_padding = output_padding(opts.output_padding, self.strides)
  kernel_bias.init(self, "Conv2DTranspose", opts)
end

function Conv2DTranspose:build(input_shape)
  conv_util.check_rank(self, input_shape, 4)
  local c = input_shape[4]
  self.input_spec = {ndim = 4, axes = {[-1] = c}}
  kernel_bias.add_weights(self, {self.kernel_size[1], self.kernel_size[2], self.filters, c}, {self.filters})
end

function Conv2DTranspose:call(x, _ctx)
  local xc, k = conv_util.operands(self, x, self.kernel)
  local y = xc:conv2d_transpose(k, {strides = self.strides, padding = self.padding, dilation = self.dilation_rate,
                                    output_padding = self.output_padding})
  return conv_util.finish(self, y)
end

function Conv2DTranspose:compute_output_shape(s)
  local out = {s[1], 0, 0, self.filters}
  for i = 1, 2 do
    local n, st = s[i + 1], self.strides[i]
    local k = (self.kernel_size[i] - 1) * self.dilation_rate[i] + 1
    local same = self.padding == "same"
    if n < 0 then
      out[i + 1] = -1  -- unknown (None) stays unknown
    elseif self.output_padding then
      out[i + 1] = (n - 1) * st + k - (same and 2 * (k // 2) or 0) + self.output_padding[i]
    else
      out[i + 1] = same and n * st or n * st + math.max(k - st, 0)
    end
  end
  return out
end

function Conv2DTranspose:repr()
  local c = self.built and tostring(self.kernel.shape[4]) or "?"
  local parts = {string.format("%s -> %d", c, self.filters)}
  local s = conv_util.repr_parts(self, parts)
  if self.output_padding then
    s = s:sub(1, -2) .. string.format(", output_padding %dx%d)", self.output_padding[1], self.output_padding[2])
  end
  return s
end

return Conv2DTranspose
