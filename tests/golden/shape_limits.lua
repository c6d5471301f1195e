-- Shapes past the limit (2^40 elements, DESIGN section 7), negative or overflowing int64 are an
-- error at the call that asked for them, naming the call, the shape as written and this line;
-- never garbage, never a crash.
local tpu = require "tpu"
local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or err)
end

try(function() print(tpu.zeros {math.maxinteger, 2}) end)
try(function() return tpu.zeros {4294967296, 4294967296, 4294967296}:totable() end)
try(function() return tpu.ones {3, -1} end)
try(function() return tpu.full({2 ^ 40}, 7) end)
try(function() return tpu.zeros({0, 2 ^ 40}, {dtype = "u8"}) end)
try(function() return tpu.arange(math.maxinteger) end)
try(function() return tpu.zeros(2 ^ 40) end)
try(function() local _ = tpu.random.uniform(tpu.random.key(1), {2 ^ 20, 2 ^ 20}) end)  -- not a tail call: the line stays
local x = tpu.zeros {2, 3}
try(function() return x:reshape {math.maxinteger, 2, -1} end)
try(function() return x:reshape(2 ^ 32, 2 ^ 32) end)
try(function() return x:cast("i32"):one_hot(2 ^ 40) end)
local col, row = tpu.zeros {2 ^ 20, 1}, tpu.zeros {1, 2 ^ 20}
try(function() return col + row end)
try(function() return col:matmul(row) end)
try(function() return tpu.zeros {4, 2 ^ 20}:take(tpu.zeros({2 ^ 20, 2}, {dtype = "i32"}), 1) end)
-- Rows that are one shared table multiply fast: 4 levels of 1024 are 2^40 numbers.
local t = {}
for i = 1, 1024 do t[i] = 0 end
for _ = 1, 3 do
  local up = {}
  for i = 1, 1024 do up[i] = t end
  t = up
end
try(function() return tpu.tensor(t) end)
-- Inside jit the same rule holds, at the line of the op.
local f = tpu.jit(function(v) return v:reshape {2 ^ 39, 2 ^ 39} end)
try(function() return f(tpu.zeros {4}) end)
-- Shapes within the limit still work, empty ones included.
print(tpu.zeros {0, 3}, #tpu.zeros({2 ^ 20, 0}):totable())
