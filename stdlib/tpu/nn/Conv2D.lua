-- 2-D convolution over NHWC images with an HWIO kernel:
--   y = activation(conv2d(x, kernel, strides, padding) + bias)
--
--   nn.Conv2D(32, 3, {activation = "relu", padding = "same"})
--   nn.Conv2D(64, {5, 3}, {strides = 2, use_bias = false,
--                          kernel_regularizer = nn.regularizers.l2(1e-4)})
-- padding "valid" (the default) keeps only full windows; "same" pads so the output
-- has ceil(size / stride) positions.
local Module = require "tpu.nn.Module"
local kernel_bias = require "tpu.nn.kernel_bias"
local util = require "tpu.nn.util"

local Conv2D = Module:extend("Conv2D")

local options = util.options {"strides", "padding", "activation", "use_bias", "kernel_initializer",
                              "bias_initializer", "kernel_regularizer", "bias_regularizer"}

function Conv2D:__init(filters, kernel_size, opts)
  self.filters = util.check_integer("Conv2D", "filters", filters)
  self.kernel_size = util.pair(kernel_size, "Conv2D: kernel_size")
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  self.strides = util.pair(opts.strides or 1, "Conv2D: strides")
  self.padding = util.padding(opts.padding, "Conv2D")
  kernel_bias.init(self, "Conv2D", opts)
end

function Conv2D:build(input_shape)
  if #input_shape ~= 4 then
    util.fail("Conv2D '%s' expects NHWC input [batch, height, width, channels], got %s",
      self.name, util.shape_text(input_shape))
  end
  local c = input_shape[4]
  self.input_spec = {ndim = 4, axes = {[-1] = c}}
  local kh, kw = self.kernel_size[1], self.kernel_size[2]
  kernel_bias.add_weights(self, {kh, kw, c, self.filters}, {self.filters})
  self:compute_output_shape(input_shape)
end

function Conv2D:call(x, _ctx)
  local compute, out = self:compute_dtype(), util.output_dtype(self.dtype_policy)
  local xc, k = util.cast_float(x, compute), util.cast_float(self.kernel, compute)
  -- mixed_bfloat16: the operands are rounded to bf16 and the products summed in f32 (the MXU's
  -- contract); products of bf16 values are exact in f32, so the f32 conv of the rounded values
  -- is that computation, at the f32 conv's speed, with the f32 result the layer wants.
  if compute ~= out then xc, k = xc:cast(out), k:cast(out) end
  local y = xc:conv2d(k, {strides = self.strides, padding = self.padding})
  if self.use_bias then y = y + util.cast_float(self.bias, y.dtype) end
  return self.activation(y)
end

function Conv2D:compute_output_shape(s)
  local h = util.window_out(s[2], self.kernel_size[1], self.strides[1], self.padding)
  local w = util.window_out(s[3], self.kernel_size[2], self.strides[2], self.padding)
  if h < 1 or w < 1 then
    util.fail("Conv2D '%s': a %dx%d kernel does not fit input %s with padding \"valid\"",
      self.name, self.kernel_size[1], self.kernel_size[2], util.shape_text(s))
  end
  return {s[1], h, w, self.filters}
end

function Conv2D:repr()
  local c = self.built and tostring(self.kernel.shape[3]) or "?"
  local parts = {string.format("%s -> %d", c, self.filters),
                 string.format("%dx%d", self.kernel_size[1], self.kernel_size[2])}
  if self.strides[1] ~= 1 or self.strides[2] ~= 1 then
    parts[#parts + 1] = string.format("strides %dx%d", self.strides[1], self.strides[2])
  end
  parts[#parts + 1] = self.padding
  if self.activation_name ~= "linear" then parts[#parts + 1] = self.activation_name end
  return "nn.Conv2D(" .. table.concat(parts, ", ") .. ")"
end

return Conv2D
