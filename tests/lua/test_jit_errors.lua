-- Mistakes with tpu.jit, tpu.grad and tpu.cond: each is an error at the user's line that names
-- the rule and the fix, never a hang, a raw Lua error or silently ignored input.
local tpu = require "tpu"
local check = require "check"

local tests = {}

tests["a jitted function that calls itself while tracing is an error at the call, not a hang"] = function()
  local f
  f = tpu.jit(function(a)
    local y = f(a) + 1
    return y
  end, {name = "loop"})
  local msg = check.raises(function() return f(tpu.zeros {2}) end,
    "jit 'loop' calls itself while tracing with arguments of the same shapes and static values; "
    .. "recursion cannot be traced into a static graph (unroll it with a Lua loop")
  check.is_true(msg:find("^[^\n]*test_jit_errors.lua:11: jit 'loop'") ~= nil, msg)
  -- as a tail call (nothing overflows) and again after the error released the guard
  local g
  g = tpu.jit(function(a) return g(a) end, {name = "tail"})
  check.raises(function() return g(tpu.zeros {2}) end, "jit 'tail' calls itself while tracing")
  check.raises(function() return g(tpu.zeros {2}) end, "jit 'tail' calls itself while tracing")
  -- on concrete arguments made inside its own trace
  local c
  c = tpu.jit(function() return c() end, {name = "concrete"})
  check.raises(function() return c() end, "jit 'concrete' calls itself while tracing")
  -- static arguments that never end the recursion
  local up
  up = tpu.jit(function(a, n) return up(a, n + 1) end, {name = "up"})
  check.raises(function() return up(tpu.zeros {2}, 0) end, "jit 'up' calls itself while tracing, 100 calls deep")
  -- a gradient function that calls itself
  local dg
  dg = tpu.grad(function(x) return dg(x):sum() end, {name = "dg"})
  check.raises(function() return dg(tpu.ones {2}) end, "jit 'dg' calls itself while tracing")
end

tests["jitted functions nest, recurse on static arguments that end, and errors release the guard"] = function()
  local inner = tpu.jit(function(a) return a + 1 end)
  local outer = tpu.jit(function(a) return inner(inner(a)) + inner(a) end)
  check.eq(outer(tpu.ones {2}):totable(), {5, 5})
  check.eq(inner(tpu.ones {2}):totable(), {2, 2})
  local pow
  pow = tpu.jit(function(a, n) if n == 0 then return a end return pow(a, n - 1) * 2 end)
  check.eq(pow(tpu.ones {2}, 3):totable(), {8, 8})
  -- an inlined call that fails inside the user's pcall leaves the function callable again
  local bad = tpu.jit(function(a) if a:sum() > 0 then return a end return a end)
  local ok_after = tpu.jit(function(a) pcall(bad, a); pcall(bad, a); return inner(a) end)
  check.eq(ok_after(tpu.ones {2}):totable(), {2, 2})
end

return tests
