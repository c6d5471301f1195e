-- Rule 1: a Lua `if` on a traced value stops at the user's line with the fix.
local tpu = require "tpu"

local f = tpu.jit(function(x)
  if x:sum() > 0 then return x end
  return -x
end, {name = "abs_sum"})
print("tracing")
f(tpu.ones {3})
print("not reached")
