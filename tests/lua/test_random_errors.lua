-- Mistakes with tpu.random draws and keys: errors that name the rule and the fix.
local tpu = require "tpu"
local check = require "check"
local random = tpu.random

local tests = {}

tests["an integer uniform draw needs a range of integers; normal needs a float dtype"] = function()
  local key = random.key(0)
  local msg = check.raises(function() local _ = random.uniform(key, {2}, {dtype = "i32"}) end,
    'uniform: dtype "i32" draws integers in [minval, maxval) = [0, 1), which is the default range of reals; give maxval '
    .. '(integers 0 to 9: {maxval = 10, dtype = "i32"}), or a float dtype ("f32", "bf16") for reals')
  check.is_true(msg:find("test_random_errors.lua:%d+: uniform") ~= nil, msg)
  check.raises(function() return random.uniform(key, {2}, {dtype = "i32", minval = 3, maxval = 3}) end,
    "= [3, 3), which is empty")
  -- a range of one integer draws it, as JAX's randint(key, shape, 0, 1)
  check.eq(random.uniform(key, {3}, {dtype = "i32", maxval = 1}):totable(), {0, 0, 0})
  check.eq(random.uniform(key, {2}, {dtype = "i32", minval = 4, maxval = 5}):totable(), {4, 4})
  check.raises(function() return random.uniform(key, {2}, {dtype = "i32", maxval = 2.5}) end,
    "so minval and maxval must be integers, got [0, 2.5)")
  check.raises(function() return random.uniform(key, {2}, {dtype = "u8", maxval = 300}) end,
    'uniform: dtype "u8" holds 0 to 255, so [minval, maxval) must lie within [0, 256), got [0, 300)')
  check.raises(function() return random.uniform(key, {2}, {dtype = "bool"}) end,
    "for random booleans use tpu.random.bernoulli(key, p, shape)")
  check.raises(function() return random.normal(key, {2}, {dtype = "i32"}) end,
    'normal: dtype must be a float dtype ("f32" or "bf16"), got "i32"')
  -- integer draws with a range still work, and float dtypes
  local ints = random.uniform(key, {100}, {dtype = "i32", minval = -2, maxval = 3})
  check.eq(ints.dtype, "i32")
  check.is_true(ints:min():item() >= -2 and ints:max():item() <= 2)
  check.eq(random.normal(key, {2}, {dtype = "bf16"}).dtype, "bf16")
end

tests["a draw without a key says the key comes first"] = function()
  check.raises(function() return random.normal({2}) end,
    "normal: expected a key from tpu.random.key(seed), got {2}; a draw takes the key first: "
    .. "tpu.random.normal(key, shape, {...})")
  check.raises(function() return random.bernoulli(0.5, {2}) end,
    "bernoulli: expected a key from tpu.random.key(seed), got 0.5; a draw takes the key first: "
    .. "tpu.random.bernoulli(key, p, shape)")
  check.raises(function() return random.bits(nil, {2}) end, "bits: expected a key from tpu.random.key(seed), got nil")
end

tests["a key's method called with a dot says to call it with a colon"] = function()
  local key = random.key(0)
  local msg = check.raises(function() local _ = key.split(2) end,
    "split is a method of the key: call it with a colon, key:split(...) (got 2 where the key goes)")
  check.is_true(msg:find("test_random_errors.lua:%d+: split") ~= nil, msg)
  check.raises(function() return key.fold_in(3) end, "fold_in is a method of the key: call it with a colon")
  check.raises(function() return key.value() end, "value is a method of the key: call it with a colon")
  check.eq(#key:split(3), 3)
end

return tests
