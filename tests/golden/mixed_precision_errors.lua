-- Mixed-precision mistakes: an unknown policy name and an unknown per-layer dtype are refused
-- at the user's line, naming what is accepted; a refused policy leaves the current one.
local tpu = require "tpu"
local nn = tpu.nn
local mp = tpu.mixed_precision

local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or err)
end

try(function() nn.Dense(10, {dtype = "float16"}) end)
try(function() nn.Conv2D(8, 3, {dtype = "bfloat16"}) end)
try(function() nn.TransformerEncoder {num_heads = 2, intermediate_dim = 8, dtype = 32} end)
try(function() mp.set_policy("mixed_float16") end)
try(function() mp.set_policy() end)
print(mp.policy().name)
mp.set_policy("mixed_bfloat16")
local dense, logits = nn.Dense(4), nn.Dense(2, {dtype = "f32"})
print(dense:compute_dtype(), dense:variable_dtype(), logits:compute_dtype())
print(logits(dense(tpu.ones({1, 3}))).dtype, dense.kernel.dtype)
mp.set_policy("bfloat16")
