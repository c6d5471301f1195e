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

tests["argnums, donate_argnums and batch_argnums name arguments the call passes"] = function()
  local x = tpu.zeros {2}
  local g = tpu.grad(function(a) return a:sum() end, {argnums = 3})
  local msg = check.raises(function() local _ = g(x) end,
    "grad: argnums names argument 3, but the call passes 1 argument; pass it, or change argnums")
  check.is_true(msg:find("test_jit_errors.lua:%d+: grad") ~= nil, msg)
  check.raises(function() tpu.grad(function(a) return a:sum() end, {argnums = 0}) end,
    "grad: argnums must be an argument number (1 for the first) or a non-empty list of them, got 0")
  check.raises(function() tpu.value_and_grad(function(a) return a:sum() end, {argnums = {1, -1}}) end,
    "value_and_grad: argnums must be an argument number (1 for the first) or a non-empty list of them")
  check.raises(function() tpu.grad(function(a) return a:sum() end, {has_aux = "yes"}) end,
    'grad: has_aux must be true or false, got "yes"')
  local vg = tpu.value_and_grad(function(a, b) return (a * b):sum() end, {argnums = {1, 2}})
  check.raises(function() local _ = vg(x) end, "value_and_grad: argnums names argument 2, but the call passes 1 argument")
  local f = tpu.jit(function(a) return a + 1 end, {donate_argnums = 5, name = "inc"})
  msg = check.raises(function() local _ = f(x) end,
    "jit 'inc': donate_argnums names argument 5, but the call passes 1 argument; pass it, or change donate_argnums")
  check.is_true(msg:find("test_jit_errors.lua:%d+: jit 'inc'") ~= nil, msg)
  local b = tpu.jit(function(a) return a + 1 end, {batch_argnums = {1, 2}, name = "inc2"})
  check.raises(function() local _ = b(x) end, "jit 'inc2': batch_argnums names argument 2, but the call passes 1 argument")
end

tests["has_aux needs the function to return value and aux, and aux values need has_aux"] = function()
  local x = tpu.ones {2}
  local vg = tpu.value_and_grad(function(a) return a:sum() end, {has_aux = true})
  local msg = check.raises(function() local _ = vg(x) end,
    "value_and_grad: with {has_aux = true} the function must return two values, the scalar to differentiate "
    .. "and aux (several aux values go in one table), got 1")
  check.is_true(msg:find("test_jit_errors.lua:%d+: value_and_grad") ~= nil, msg)
  local g = tpu.grad(function(a) return a:sum(), a end)
  check.raises(function() local _ = g(x) end,
    "grad: the function returned 2 values; to return auxiliary values beside the scalar to differentiate, pass {has_aux = true}")
  -- value, aux with has_aux; aux may be nil when the function returns it explicitly
  local ga, aux = tpu.grad(function(a) return a:sum(), {n = 2} end, {has_aux = true})(x)
  check.eq(ga:totable(), {1, 1})
  check.eq(aux.n, 2)
  local _, none = tpu.grad(function(a) return a:sum(), nil end, {has_aux = true})(x)
  check.eq(none, nil)
end

tests["a jitted function's method called with a dot says to call it with a colon"] = function()
  local f = tpu.jit(function(x) return x + 1 end)
  local msg = check.raises(function() local _ = f.stats() end,
    "stats is a method of the jitted function: call it with a colon, f:stats(...) (got nil where the jitted function goes)")
  check.is_true(msg:find("test_jit_errors.lua:%d+: stats") ~= nil, msg)
  check.raises(function() local _ = f.lower(tpu.zeros {2}) end,
    "lower is a method of the jitted function: call it with a colon, f:lower(...) (got a tensor f32[2] where")
  check.raises(function() f.dump("f.dot") end, "dump is a method of the jitted function: call it with a colon")
  check.raises(function() local _ = f.info() end, "info is a method of the jitted function: call it with a colon")
  f(tpu.zeros {2})
  check.eq(f:stats().compiles, 1)
end

tests["tpu.cond's predicate must be a bool scalar"] = function()
  local function one() return 1 end
  local function two() return 2 end
  local msg = check.raises(function() local _ = tpu.cond(tpu.zeros {2}, one, two) end,
    "tpu.cond: the predicate must be a bool scalar (a Lua boolean, or a bool tensor of shape [] such as "
    .. "x:sum():gt(0)), got a tensor f32[2]; to choose elementwise between tensors use tpu.where(cond, a, b)")
  check.is_true(msg:find("test_jit_errors.lua:%d+: tpu.cond") ~= nil, msg)
  -- a float 0 would be true in Lua
  check.raises(function() local _ = tpu.cond(tpu.tensor(0), one, two) end, "got a tensor f32[]")
  local f = tpu.jit(function(x) return tpu.cond(x:gt(0), function(v) return v end, function(v) return -v end, x) end)
  check.raises(function() local _ = f(tpu.ones {2}) end, "tpu.cond: the predicate must be a bool scalar")
  check.eq(tpu.cond(tpu.tensor(1):gt(0), one, two), 1)
  check.eq(tpu.cond(tpu.tensor(1):lt(0), one, two), 2)
end

tests["f:lower, f:info and f:dump without arguments need a compiled signature"] = function()
  local f = tpu.jit(function(x) return x + 1 end, {name = "inc"})
  local msg = check.raises(function() local _ = f:lower() end,
    "jit 'inc': lower: no signature compiled yet; call f(...) first, or give the arguments: f:lower(x, ...)")
  check.is_true(msg:find("test_jit_errors.lua:%d+: jit 'inc'") ~= nil, msg)
  check.raises(function() local _ = f:info() end, "jit 'inc': info: no signature compiled yet")
  check.raises(function() f:dump("never.dot") end, "f:dump(path, x, ...)")
  check.is_true(f:lower(tpu.zeros {3}):find("f32[3]", 1, true) ~= nil)
  f(tpu.zeros {2})
  check.is_true(f:lower():find("f32[2]", 1, true) ~= nil)
  -- a function of no parameters compiles for no arguments
  local k = tpu.jit(function() return tpu.ones {4} end)
  check.is_true(k:lower():find("f32[4]", 1, true) ~= nil)
end

return tests
