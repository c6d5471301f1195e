-- Upsampling of NHWC images by whole factors, as Keras's UpSampling2D:
--   nn.UpSampling2D()                                  -- 2x2, nearest
--   nn.UpSampling2D(2, {interpolation = "bilinear"})
--   nn.UpSampling2D {size = {2, 3}}
-- "nearest" repeats each pixel size[1] x size[2] times (a broadcast and reshapes: no
-- arithmetic). "bilinear" interpolates as tf.image.resize (half-pixel centres, no
-- antialiasing, edges clamped): output row o reads input position (o + 0.5) / size - 0.5.
-- That is tpu.image.resize: its weights along each axis form a constant matrix [out, in] with
-- two entries a row, applied as one matmul per axis: no new engine op, the gradient is the
-- transposed matmul, and the work runs where a TPU runs it best (the MXU).
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local UpSampling2D = Module:extend("UpSampling2D")
UpSampling2D.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local options = util.options {"size", "interpolation"}

-- (size, opts) or (opts): a first argument that is a number or a list {h, w} is the size.
function UpSampling2D:__init(a, b)
  local size, opts = a, b
  if a == nil or (type(a) == "table" and not util.is_tensor(a) and type(a[1]) ~= "number") then
    require("tpu.errors").none(2, self.__name, b)
    size, opts = nil, a
  end
  opts = opts or {}
  util.check_options(self, opts, options)
  if size ~= nil and opts.size ~= nil then
    util.fail("UpSampling2D: size given twice (%s and size = %s)", util.show(size), util.show(opts.size))
  end
  self:init_common(opts)
  self.size = util.pair(size or opts.size or 2, "UpSampling2D: size")
  self.interpolation = opts.interpolation or "nearest"
  if self.interpolation ~= "nearest" and self.interpolation ~= "bilinear" then
    util.fail("UpSampling2D: interpolation must be \"nearest\" or \"bilinear\", got %s", util.show(opts.interpolation))
  end
end

function UpSampling2D:build(input_shape)
  if #input_shape ~= 4 then
    util.fail("UpSampling2D '%s' expects NHWC input [batch, height, width, channels], got %s", self.name,
      util.shape_text(input_shape))
  end
  self.input_spec = {ndim = 4}
end

function UpSampling2D:call(x, _ctx)
  local b, h, w, c = table.unpack(x.shape)
  local sh, sw = self.size[1], self.size[2]
  if self.interpolation == "nearest" then
    local ones = require("tpu").ones({1, 1, sh, 1, sw, 1}, {dtype = x.dtype})
    return (x:reshape {b, h, 1, w, 1, c} * ones):reshape {b, h * sh, w * sw, c}
  end
  -- Growing: the resize's bilinear weights, whatever its antialias. In the output dtype (f32
  -- under mixed_bfloat16): interpolating in bf16 would round 1000.5 to 1000.
  return require("tpu.image").resize(util.cast_float(x, util.output_dtype(self.dtype_policy)), {h * sh, w * sw})
end

function UpSampling2D:compute_output_shape(s)
  local function scaled(n, k) return n < 0 and -1 or n * k end  -- unknown (None) stays unknown
  return {s[1], scaled(s[2], self.size[1]), scaled(s[3], self.size[2]), s[4]}
end

function UpSampling2D:repr()
  return string.format("nn.UpSampling2D(%dx%d, %s)", self.size[1], self.size[2], self.interpolation)
end

return UpSampling2D
