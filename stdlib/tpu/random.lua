-- Stateless random numbers: a key names a stream; split and fold_in derive new
-- keys; the same key always gives the same numbers. A key holds an i32[2] tensor, so keys
-- pass through tpu.jit as traced arguments and every draw is an op of the compiled graph,
-- with the same values as the eager draw from the same key.
--
--   local k1, k2 = table.unpack(tpu.random.key(0):split(2))
--   local w = tpu.random.normal(k1, {784, 128}, {stddev = 0.05})
--   local keep = tpu.random.bernoulli(k2:fold_in(step), 0.9, {128, 128})
local core = require "tpu.core"

local Key = {}
Key.__index = Key
Key.__name = "tpu.random.Key"

local function make(data) return setmetatable({data = data}, Key) end

-- The tree protocol of tpu.jit: a key is one tensor leaf.
function Key.__tpu_tree(k) return {k.data} end
function Key.__tpu_unflatten(children) return make(children[1]) end

local errors = require "tpu.errors"
local fail = errors.fail

function Key:split(n)
  n = n or 2
  if math.type(n) ~= "integer" or n < 1 then fail("split needs a positive integer count, got %s", tostring(n)) end
  local keys = {}
  for i = 1, n do keys[i] = make(core.random_fold(self.data, i)) end
  return keys
end

-- data: a Lua integer or an integer scalar tensor (traced inside jit, e.g. the step number).
function Key:fold_in(data)
  if math.type(data) ~= "integer" and not core.is_tensor(data) then
    fail("fold_in needs an integer or an integer scalar tensor, got %s", tostring(data))
  end
  return make(core.random_fold(self.data, data, 1000003))
end

-- The 64-bit key as a Lua integer (eager keys only).
function Key:value()
  local w = self.data:totable()
  return (w[1] << 32) | (w[2] & 0xffffffff)
end

function Key.__tostring(k)
  if core.is_traced(k.data) then return "Key(traced)" end
  return string.format("Key(%d)", k:value())
end
function Key.__eq(a, b)
  return getmetatable(a) == Key and getmetatable(b) == Key and a:value() == b:value()
end

errors.colon_methods(Key, "key", {"split", "fold_in", "value"}, function(k) return getmetatable(k) == Key end)

local random = {}

-- seed: a Lua integer, or an integer scalar tensor (traced or not; the same key).
function random.key(seed, extra)
  errors.none(2, "key", extra)
  if math.type(seed) ~= "integer" and not core.is_tensor(seed) then
    fail("tpu.random.key needs an integer seed, got %s", tostring(seed))
  end
  return make(core.random_key(seed))
end

function random.is_key(k) return getmetatable(k) == Key end

local usage = {uniform = "uniform(key, shape, {...})", normal = "normal(key, shape, {...})",
               bernoulli = "bernoulli(key, p, shape)", bits = "bits(key, shape)"}

local function data_of(k, fname)
  if getmetatable(k) == Key then return k.data end
  if core.is_tensor(k) then return k end  -- a raw i32[2] key tensor (checked by the binding)
  fail("%s: expected a key from tpu.random.key(seed), got %s; a draw takes the key first: "
    .. "tpu.random.%s", fname, errors.show(k), usage[fname])
end

-- The float dtypes a draw of real numbers makes.
local float_dtype = {f32 = true, bf16 = true}
local integer_dtype = {i32 = true, u8 = true}

-- JAX's uniform takes only float dtypes; here an integer dtype draws integers in [minval,
-- maxval), as JAX's randint: maxval must be given (the default [0, 1) is for reals), the range
-- must not be empty and must fit the dtype. A bool dtype is bernoulli's.
local function check_uniform_dtype(opts)
  local dtype = opts and opts.dtype
  if dtype == "bool" then
    fail('uniform: dtype "bool" is not a number type; for random booleans use tpu.random.bernoulli(key, p, shape)')
  end
  if not integer_dtype[dtype] then return end  -- float, or checked by the binding
  local lo, hi = opts.minval or 0, opts.maxval or 1
  if type(lo) ~= "number" or type(hi) ~= "number" then return end  -- tensors: the binding's
  if lo ~= math.floor(lo) or hi ~= math.floor(hi) then
    fail("uniform: dtype %q draws integers in [minval, maxval), so minval and maxval must be integers, "
      .. "got [%s, %s)", dtype, errors.show(lo), errors.show(hi))
  end
  -- The default range [0, 1) is for reals: with an integer dtype it drew only zeros.
  if opts.maxval == nil or hi <= lo then
    fail("uniform: dtype %q draws integers in [minval, maxval) = [%d, %d), which %s; give maxval "
      .. "(integers 0 to 9: {maxval = 10, dtype = %q}), or a float dtype (\"f32\", \"bf16\") for reals",
      dtype, lo, hi, hi <= lo and "is empty" or "is the default range of reals", dtype)
  end
  if dtype == "u8" and (lo < 0 or hi > 256) then
    fail('uniform: dtype "u8" holds 0 to 255, so [minval, maxval) must lie within [0, 256), got [%d, %d)', lo, hi)
  end
end

-- A draw's shape argument: a list of sizes, a size, or nil for a scalar.
local function shape_arg(n, fname, shape)
  if shape ~= nil and math.type(shape) ~= "integer" and not errors.is(shape, "table") then
    errors.type_error(n, fname, "shape (a table of sizes)", shape)
  end
  return shape or {}
end

-- Uniform in [minval, maxval) (default [0, 1)).
function random.uniform(key, shape, opts, extra)
  errors.none(4, "uniform", extra)
  if opts ~= nil then errors.options(3, "uniform", opts, {"minval", "maxval", "dtype"}) end
  local data = data_of(key, "uniform")
  check_uniform_dtype(opts)
  return core.random_uniform(data, shape_arg(2, "uniform", shape), opts)
end

-- Normal with mean and stddev (default 0, 1); truncated = true keeps |z| <= 2 stddevs.
function random.normal(key, shape, opts, extra)
  errors.none(4, "normal", extra)
  if opts ~= nil then errors.options(3, "normal", opts, {"mean", "stddev", "truncated", "dtype"}) end
  local data = data_of(key, "normal")
  local dtype = opts and opts.dtype
  if type(dtype) == "string" and not float_dtype[dtype] and (integer_dtype[dtype] or dtype == "bool") then
    fail('normal: dtype must be a float dtype ("f32" or "bf16"), got %q; for random integers use '
      .. 'tpu.random.uniform(key, shape, {maxval = n, dtype = %q})', dtype, dtype)
  end
  return core.random_normal(data, shape_arg(2, "normal", shape), opts)
end

-- A bool tensor, true with probability p (a number or a tensor broadcast to shape).
function random.bernoulli(key, p, shape, extra)
  errors.none(4, "bernoulli", extra)
  data_of(key, "bernoulli")
  if p ~= nil and type(p) ~= "number" and not core.is_tensor(p) then
    errors.type_error(2, "bernoulli", "number or tensor", p)
  end
  p = p or 0.5
  shape = shape_arg(3, "bernoulli", shape or (core.is_tensor(p) and p.shape or nil))
  -- A number p: the draw and its comparison in one kernel, which stores the mask alone.
  if type(p) == "number" then return core.random_bernoulli(data_of(key, "bernoulli"), shape, p) end
  return random.uniform(key, shape):lt(p)
end

-- Raw uniformly random i32 bits.
function random.bits(key, shape, extra)
  errors.none(3, "bits", extra)
  return core.random_bits(data_of(key, "bits"), shape_arg(2, "bits", shape))
end

-- A name tpu.random lacks is an error listing what it has.
return errors.strict_namespace(random, "tpu.random")
