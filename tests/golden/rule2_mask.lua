-- Rule 2: boolean masking inside jit names the op and shows the masked-weighting rewrite.
local tpu = require "tpu"

local x = tpu.tensor {1, -2, 3, -4}
print(tpu.boolean_mask(x, x:gt(0)))          -- eagerly it works
print(x:take(x:lt(0)))
print(tpu.nonzero(tpu.tensor {{0, 1}, {2, 0}}))
print(tpu.unique(tpu.tensor({3, 1, 3, 2}, {dtype = "i32"})))

local positive_mean = tpu.jit(function(v)
  return tpu.boolean_mask(v, v:gt(0)):mean()
end, {name = "positive_mean"})
positive_mean(x)
