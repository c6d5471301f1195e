-- Rule 3: variable-length inputs compile once per length; the 8th signature warns and names
-- the argument and dimension that varies. Padding to a multiple keeps it to a few shapes.
local tpu = require "tpu"
tpu.warn = function(message) io.write(message) end  -- show warnings in the golden output

local encode = tpu.jit(function(tokens, scale) return (tokens:cast("f32") * scale):sum(-1) end, {name = "encode"})
local lengths = {5, 9, 12, 7, 30, 17, 22, 3, 11, 26}
for _, n in ipairs(lengths) do encode(tpu.ones({4, n}, {dtype = "i32"}), 2) end
print("compiles without padding:", encode:stats().compiles)

local padded = tpu.jit(function(tokens) return tokens:cast("f32"):sum(-1) end, {name = "padded"})
for _, n in ipairs(lengths) do
  local to = (n + 15) // 16 * 16                  -- what pad_to_multiple_of = 16 does
  padded(tpu.ones({4, to}, {dtype = "i32"}))
end
print("compiles with padding to 16:", padded:stats().compiles)

-- A number argument is static: each new value compiles again, and the warning says to pass it
-- as a tensor.
local scaled = tpu.jit(function(x, scale) return x * scale end, {name = "scaled"})
for i = 1, 9 do scaled(tpu.ones({2}), i / 10) end
print("compiles with a number argument:", scaled:stats().compiles)
local scale_t = tpu.jit(function(x, scale) return x * scale end, {name = "scale_t"})
for i = 1, 9 do scale_t(tpu.ones({2}), tpu.tensor(i / 10)) end
print("compiles with a tensor argument:", scale_t:stats().compiles)
