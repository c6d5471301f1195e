-- What the convolution layers share (Conv2D, Conv1D, DepthwiseConv2D, SeparableConv2D,
-- Conv2DTranspose): input checks, output lengths, the operands in the compute type, bias and
-- activation, and the parts of their printed form.
local util = require "tpu.nn.util"

local M = {}

-- The input's rank is `rank` (4: NHWC images, 3: (batch, steps, channels) sequences).
function M.check_rank(layer, input_shape, rank)
  if #input_shape ~= rank then
    util.fail("%s '%s' expects %s, got %s", layer.__name, layer.name,
      rank == 4 and "NHWC input [batch, height, width, channels]" or "input [batch, steps, channels]",
      util.shape_text(input_shape))
  end
end

-- "a 3x3 kernel", or "a 3x3 kernel (dilated to 5x5)", for the errors of a window that does
-- not fit (sizes and dilations: pairs, or numbers for Conv1D's "a kernel of 3").
function M.kernel_text(size, dilation)
  local function span(i) return (size[i] - 1) * dilation[i] + 1 end
  if type(size) == "number" then
    local d = (size - 1) * dilation + 1
    return "a kernel of " .. size .. (d ~= size and " (dilated to " .. d .. ")" or "")
  end
  local s = string.format("a %dx%d kernel", size[1], size[2])
  if span(1) ~= size[1] or span(2) ~= size[2] then s = s .. string.format(" (dilated to %dx%d)", span(1), span(2)) end
  return s
end

-- Output length of a window of k taps dilated by d with stride s over n positions: "same"
-- ceil(n / s); "valid" only full windows (the dilated span (k - 1) * d + 1 fits).
function M.out_len(n, k, s, d, padding)
  if n < 0 then return -1 end  -- unknown (None) stays unknown
  if padding == "same" or padding == "causal" then return (n + s - 1) // s end
  return (n - ((k - 1) * d + 1)) // s + 1
end

-- The dilation option as a pair; Keras's name is dilation_rate.
function M.dilation(who, opts)
  return util.pair(opts.dilation_rate or 1, who .. ": dilation_rate")
end

-- groups: a positive integer dividing filters (Keras's rule); 1 when absent.
function M.groups(who, opts, filters)
  local groups = util.check_integer(who, "groups", opts.groups or 1)
  if filters % groups ~= 0 then
    util.fail("%s: filters (%d) must be divisible by groups (%d)", who, filters, groups)
  end
  return groups
end

-- The input channels c split into the layer's groups, or an error at build.
function M.check_channels(layer, input_shape, groups)
  local c = input_shape[#input_shape]
  if c % groups ~= 0 then
    util.fail("%s '%s': the input's %d channels must be divisible by groups (%d), got %s", layer.__name,
      layer.name, c, groups, util.shape_text(input_shape))
  end
  return c
end

-- x and the kernels in the layer's compute dtype. mixed_bfloat16: the operands are rounded to
-- bf16 and the products summed in f32 (the MXU's contract); products of bf16 values are exact
-- in f32, so the f32 conv of the rounded values is that computation, at the f32 conv's speed,
-- with the f32 result the layer wants.
function M.operands(layer, x, ...)
  local compute, out = layer:compute_dtype(), util.output_dtype(layer.dtype_policy)
  local list = {x, ...}
  for i, t in ipairs(list) do
    t = util.cast_float(t, compute)
    if compute ~= out then t = t:cast(out) end
    list[i] = t
  end
  return table.unpack(list)
end

-- activation(y + bias) (the bias when the layer has one).
function M.finish(layer, y)
  if layer.use_bias then y = y + util.cast_float(layer.bias, y.dtype) end
  return layer.activation(y)
end

-- The printed form from `parts` and the window: "3x3" (a number for Conv1D), then strides, dilation and groups when not 1,
-- the padding, the activation when not linear.
function M.repr_parts(layer, parts)
  local function pair(p) return type(p) == "number" and tostring(p) or string.format("%dx%d", p[1], p[2]) end
  local function one(p)
    if type(p) == "number" then return p == 1 end
    return p[1] == 1 and p[2] == 1
  end
  parts[#parts + 1] = pair(layer.kernel_size)
  if not one(layer.strides) then parts[#parts + 1] = "strides " .. pair(layer.strides) end
  if layer.dilation_rate and not one(layer.dilation_rate) then
    parts[#parts + 1] = "dilation " .. pair(layer.dilation_rate)
  end
  if layer.groups and layer.groups ~= 1 then parts[#parts + 1] = "groups " .. layer.groups end
  parts[#parts + 1] = layer.padding
  if layer.activation_name ~= "linear" then parts[#parts + 1] = layer.activation_name end
  return string.format("nn.%s(%s)", layer.__name, table.concat(parts, ", "))
end

return M
