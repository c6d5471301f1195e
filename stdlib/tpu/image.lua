-- tpu.image: resizing and augmenting images, and reading and writing image files.
--
--   local train = data.image_folder("pets", {image_size = {72, 72}}):batch(32)
--     :map(function(x, y, key)
--       local k1, k2 = table.unpack(key:split(2))
--       x = image.random_crop(x, {64, 64}, k1)
--       return image.random_flip_left_right(x, k2) / 255, y
--     end, {seed = 1})
--
-- Images are [height, width, channels] or batches [n, height, width, channels] (NHWC). The
-- functions are tensor operations, so they trace inside data.map and tpu.jit and run compiled
-- with the batch. The random ones take a stateless key (tpu.random.key; map {seed =} hands one
-- per element) and draw per image: the same key gives the same result, bitwise.
-- Resizing: bilinear with half-pixel centres; with antialias (the default), shrinking averages
-- every input pixel an output covers (engine/data/image.h, shared with data.image_folder).
local errors = require "tpu.errors"
local random = require "tpu.random"

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

local M = {}

local fail = errors.fail

-- x as a batch [n, h, w, c], and the function that gives a result x's rank back.
local function as_batch(x, fname)
  if not tpu.is_tensor(x) or (x.ndim ~= 3 and x.ndim ~= 4) then
    fail("image.%s: expected an image [height, width, channels] or a batch [n, height, width, "
      .. "channels], got %s", fname, errors.show(x))
  end
  if x.ndim == 4 then return x, function(y) return y end end
  return x:reshape {1, table.unpack(x.shape)}, function(y)
    local s = y.shape
    table.remove(s, 1)
    return y:reshape(s)
  end
end

local function float_of(x)
  if x.dtype == "f32" or x.dtype == "bf16" then return x end
  return x:cast("f32")
end

local function check_size(size, fname, what)
  if type(size) ~= "table" or #size ~= 2 or math.type(size[1]) ~= "integer"
      or math.type(size[2]) ~= "integer" or size[1] < 1 or size[2] < 1 then
    fail("image.%s: %s must be {height, width} (positive integers), got %s", fname, what, errors.show(size))
  end
  return size[1], size[2]
end

local function check_key(key, fname)
  if not random.is_key(key) then
    fail("image.%s: expected a key from tpu.random.key(seed) (or the key data.map {seed =} hands "
      .. "the function), got %s", fname, errors.show(key))
  end
end

---------------------------------------------------------------- resize

-- x [n, h, w, c] with `axis` (2 or 3) resized to `out` samples: the axis moved to the front and
-- multiplied by the [out, in] resize matrix.
local function resize_axis(x, axis, out, antialias)
  local n = x.shape[axis]
  if n == out then return x end
  local perm, back = {2, 1, 3, 4}, {2, 1, 3, 4}
  if axis == 3 then perm, back = {3, 1, 2, 4}, {2, 3, 1, 4} end
  local front = x:transpose(perm)
  local s = front.shape
  local m = tpu.core.resize_matrix(n, out, antialias)
  if x.dtype ~= "f32" then m = m:cast(x.dtype) end
  return m:matmul(front:reshape {n, s[2] * s[3] * s[4]}):reshape({out, s[2], s[3], s[4]}):transpose(back)
end

-- images resized to size = {height, width}; float results (f32 unless bf16 came in).
function M.resize(images, size, opts, extra)
  errors.none(4, "resize", extra)
  local x, restore = as_batch(images, "resize")
  local h, w = check_size(size, "resize", "size")
  local o = errors.options(3, "resize", opts, {"antialias"})
  local antialias = o.antialias == nil or o.antialias
  x = float_of(x)
  return restore(resize_axis(resize_axis(x, 2, h, antialias), 3, w, antialias))
end

---------------------------------------------------------------- crops and flips

-- x [n, h, w, c] at rows[i, :] and cols[i, :] of each image i (i32 [n, h'] and [n, w']): one
-- gather of pixels, so every image may take its own rows and columns.
local function pixels_at(x, rows, cols)
  local n, h, w, c = table.unpack(x.shape)
  local image = (tpu.arange(n) * h):reshape {n, 1}
  local flat_rows = ((rows + image) * w):reshape {n, rows.shape[2], 1}
  local index = flat_rows + cols:reshape {n, 1, cols.shape[2]}
  return x:reshape({n * h * w, c}):take(index)
end

local function positions(n, count, offset)
  local base = tpu.arange(count):reshape {1, count}
  if offset == nil then return base + tpu.zeros({n, 1}, {dtype = "i32"}) end
  return base + offset:reshape {n, 1}
end

-- One uniform integer in [0, limit] per image.
local function offsets(key, n, limit)
  if limit == 0 then return tpu.zeros({n}, {dtype = "i32"}) end
  local u = random.uniform(key, {n}) * (limit + 1)
  return u:cast("i32"):minimum(limit)
end

local function flip(images, key, fname, axis)
  check_key(key, fname)
  local x, restore = as_batch(images, fname)
  local n, h, w = table.unpack(x.shape)
  local size = axis == 2 and h or w
  local flipped = random.bernoulli(key, 0.5, {n}):reshape {n, 1}
  local forward = positions(n, size)
  local along = tpu.where(flipped, forward * -1 + (size - 1), forward)
  if axis == 2 then return restore(pixels_at(x, along, positions(n, w))) end
  return restore(pixels_at(x, positions(n, h), along))
end

-- Each image mirrored left to right with probability 1/2.
function M.random_flip_left_right(images, key, extra)
  errors.none(3, "random_flip_left_right", extra)
  return flip(images, key, "random_flip_left_right", 3)
end

-- Each image mirrored top to bottom with probability 1/2.
function M.random_flip_up_down(images, key, extra)
  errors.none(3, "random_flip_up_down", extra)
  return flip(images, key, "random_flip_up_down", 2)
end

-- A size = {height, width} window of each image, at a uniformly random place per image.
function M.random_crop(images, size, key, extra)
  errors.none(4, "random_crop", extra)
  check_key(key, "random_crop")
  local x, restore = as_batch(images, "random_crop")
  local ch, cw = check_size(size, "random_crop", "size")
  local n, h, w = table.unpack(x.shape)
  if ch > h or cw > w then
    fail("image.random_crop: the crop %dx%d is larger than the images (%dx%d)", ch, cw, h, w)
  end
  local k1, k2 = table.unpack(key:split(2))
  return restore(pixels_at(x, positions(n, ch, offsets(k1, n, h - ch)), positions(n, cw, offsets(k2, n, w - cw))))
end

-- The central `fraction` (0 < fraction <= 1) of each image's height and width, as
-- tf.image.central_crop.
function M.central_crop(images, fraction, extra)
  errors.none(3, "central_crop", extra)
  local x, restore = as_batch(images, "central_crop")
  if type(fraction) ~= "number" or fraction <= 0 or fraction > 1 then
    fail("image.central_crop: fraction must be a number in (0, 1], got %s", errors.show(fraction))
  end
  local _, h, w = table.unpack(x.shape)
  local top, left = math.floor((h - h * fraction) / 2), math.floor((w - w * fraction) / 2)
  return restore(x:slice {{}, {top + 1, h - top}, {left + 1, w - left}})
end

---------------------------------------------------------------- colour

local function per_image_uniform(key, x, lo, hi)
  return random.uniform(key, {x.shape[1], 1, 1, 1}, {minval = lo, maxval = hi})
end

local function check_range(fname, lo, hi, what)
  if type(lo) ~= "number" or type(hi) ~= "number" or lo > hi then
    fail("image.%s: %s, got %s and %s", fname, what, errors.show(lo), errors.show(hi))
  end
end

-- Adds a delta drawn uniformly from [-max_delta, max_delta) per image (no clipping).
function M.random_brightness(images, max_delta, key, extra)
  errors.none(4, "random_brightness", extra)
  check_key(key, "random_brightness")
  check_range("random_brightness", 0, max_delta, "max_delta must be a non-negative number")
  local x, restore = as_batch(images, "random_brightness")
  x = float_of(x)
  return restore(x + per_image_uniform(key, x, -max_delta, max_delta):cast(x.dtype))
end

-- Scales each image's distance from its per-channel mean by a factor drawn uniformly from
-- [lower, upper), as tf.image.adjust_contrast.
function M.random_contrast(images, lower, upper, key, extra)
  errors.none(5, "random_contrast", extra)
  check_key(key, "random_contrast")
  check_range("random_contrast", lower, upper, "needs 0 <= lower <= upper")
  if lower < 0 then fail("image.random_contrast: needs 0 <= lower <= upper, got %s and %s", lower, upper) end
  local x, restore = as_batch(images, "random_contrast")
  x = float_of(x)
  local mean = x:mean({2, 3}, true)
  return restore((x - mean) * per_image_uniform(key, x, lower, upper):cast(x.dtype) + mean)
end

---------------------------------------------------------------- files

local CHANNELS = {grayscale = 1, rgb = 3, rgba = 4}

-- The image file at path (JPEG or PNG) as u8 [height, width, channels].
function M.read(path, opts, extra)
  errors.none(3, "read", extra)
  errors.check(1, "read", path, "string")
  local o = errors.options(2, "read", opts, {"color"})
  local channels = CHANNELS[o.color or "rgb"]
  if not channels then
    fail("image.read: color must be rgb, grayscale or rgba, got %s", errors.show(o.color))
  end
  return tpu.core.read_image(path, channels)
end

-- image: a concrete tensor [height, width, channels] (or [height, width]) with values 0..255:
-- u8 as it is; other types rounded and clipped.
local function pixels_of(image, fname)
  if not tpu.is_tensor(image) or tpu.is_traced(image) or (image.ndim ~= 2 and image.ndim ~= 3) then
    fail("image.%s: expected a concrete image tensor [height, width, channels], got %s", fname,
      errors.show(image))
  end
  if image.ndim == 2 then image = image:reshape {image.shape[1], image.shape[2], 1} end
  if image.dtype == "u8" then return image end
  return (float_of(image) + 0.5):maximum(0):minimum(255):cast("u8")
end

-- Writes image as a PNG file (atomically: a crash leaves the old file or the new one).
function M.write_png(path, image, extra)
  errors.none(3, "write_png", extra)
  errors.check(1, "write_png", path, "string")
  tpu.core.write_image(path, pixels_of(image, "write_png"), "png")
end

-- Writes image as a JPEG file, {quality = 1..100} (default 95).
function M.write_jpeg(path, image, opts, extra)
  errors.none(4, "write_jpeg", extra)
  errors.check(1, "write_jpeg", path, "string")
  local o = errors.options(3, "write_jpeg", opts, {"quality"})
  local quality = o.quality or 95
  if math.type(quality) ~= "integer" or quality < 1 or quality > 100 then
    fail("image.write_jpeg: quality must be an integer from 1 to 100, got %s", errors.show(quality))
  end
  tpu.core.write_image(path, pixels_of(image, "write_jpeg"), "jpeg", quality)
end

-- A name tpu.image lacks is an error listing what it has.
return errors.strict_namespace(M, "tpu.image")
