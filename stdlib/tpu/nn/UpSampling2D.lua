-- Upsampling of NHWC images by whole factors, as Keras's UpSampling2D:
--   nn.UpSampling2D()                                  -- 2x2, nearest
--   nn.UpSampling2D(2, {interpolation = "bilinear"})
--   nn.UpSampling2D {size = {2, 3}}
-- "nearest" repeats each pixel size[1] x size[2] times (a broadcast and reshapes: no
-- arithmetic). "bilinear" interpolates as tf.image.resize (half-pixel centres, no
-- antialiasing, edges clamped): output row o reads input position (o + 0.5) / size - 0.5.
-- Its weights along each axis form a constant matrix [out, in] with two entries a row,
-- applied as one matmul per axis: no new engine op, the gradient is the transposed matmul,
-- and the work runs where a TPU runs it best (the MXU).
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local UpSampling2D = Module:extend("UpSampling2D")

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

-- The [n * s, n] matrix of bilinear weights along one axis (tf.image.resize's half-pixel
-- centres: output o reads position (o + 0.5) / s - 0.5 between its two nearest inputs).
local function bilinear_weights(n, s)
  local rows = {}
  for o = 0, n * s - 1 do
    local row = {}
    for i = 1, n do row[i] = 0 end
    local p = math.max((o + 0.5) / s - 0.5, 0)
    local lo = math.floor(p)
    local hi, t = math.min(lo + 1, n - 1), p - lo
    row[lo + 1] = row[lo + 1] + (1 - t)
    row[hi + 1] = row[hi + 1] + t
    rows[o + 1] = row
  end
  return rows
end

-- x[..., n, rest] along `axis` (2: height, 3: width) times the weights: moved to the front,
-- multiplied as a [n * s, n] x [n, everything else] matmul, moved back.
local function resize_axis(x, axis, s)
  local n = x.shape[axis]
  local perm, back = {2, 1, 3, 4}, {2, 1, 3, 4}
  if axis == 3 then perm, back = {3, 1, 2, 4}, {2, 3, 1, 4} end
  local front = x:transpose(perm)
  local rest = front.shape[2] * front.shape[3] * front.shape[4]
  local m = require("tpu").tensor(bilinear_weights(n, s), {dtype = x.dtype})
  local y = m:matmul(front:reshape {n, rest}):reshape {n * s, front.shape[2], front.shape[3], front.shape[4]}
  return y:transpose(back)
end

function UpSampling2D:call(x, _ctx)
  local b, h, w, c = table.unpack(x.shape)
  local sh, sw = self.size[1], self.size[2]
  if self.interpolation == "nearest" then
    local ones = require("tpu").ones({1, 1, sh, 1, sw, 1}, {dtype = x.dtype})
    return (x:reshape {b, h, 1, w, 1, c} * ones):reshape {b, h * sh, w * sw, c}
  end
  local xf = util.cast_float(x, self:compute_dtype())
  return resize_axis(resize_axis(xf, 2, sh), 3, sw)
end

function UpSampling2D:compute_output_shape(s)
  return {s[1], s[2] * self.size[1], s[3] * self.size[2], s[4]}
end

function UpSampling2D:repr()
  return string.format("nn.UpSampling2D(%dx%d, %s)", self.size[1], self.size[2], self.interpolation)
end

return UpSampling2D
