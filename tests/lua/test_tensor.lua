-- Tensor operations: values, broadcasting, dtypes, indexing conventions, errors.
local tpu = require "tpu"
local check = require "check"
local files = require "files"

local function t(v, dt) return tpu.tensor(v, dt and {dtype = dt}) end

-- The slice through a compiled graph (the general path, which a traced tensor takes).
local function traced_slice(x, ranges)
  return tpu.jit(function(v) return v:slice(ranges) end)(x)
end

return {
  ["construction and fields"] = function()
    local x = t{{1, 2, 3}, {4, 5, 6}}
    check.eq(x.shape, {2, 3})
    check.eq(x.dtype, "f32")
    check.eq(x.ndim, 2)
    check.eq(#x, 2)
    check.eq(tpu.zeros({2, 2}, {dtype = "i32"}):totable(), {{0, 0}, {0, 0}})
    check.eq(tpu.full({2}, 7):totable(), {7, 7})
    check.eq(tpu.arange(4):totable(), {0, 1, 2, 3})
    check.eq(tpu.arange(4).dtype, "i32")
    check.eq(t(3):item(), 3.0)
  end,

  ["arithmetic broadcasts from the trailing dims, stretching size-1 dims"] = function()
    local a = t{{1, 2, 3}, {4, 5, 6}}
    local b = t{10, 20, 30}
    check.eq((a + b):totable(), {{11, 22, 33}, {14, 25, 36}})
    check.eq((a * 2):totable(), {{2, 4, 6}, {8, 10, 12}})
    check.eq((1 - a):totable(), {{0, -1, -2}, {-3, -4, -5}})
    check.eq((a / t{{1}, {2}}):totable(), {{1, 2, 3}, {2, 2.5, 3}})
    check.eq((-a):totable()[1], {-1, -2, -3})
    check.eq((a ^ 2):totable()[2], {16, 25, 36})
    check.raises(function() return a + t{1, 2} end, "cannot be broadcast")
  end,

  ["integer division and modulo floor like Lua"] = function()
    local a = t({7, -7, 6}, "i32")
    check.eq((a // 2):totable(), {7 // 2, -7 // 2, 6 // 2})
    check.eq((a % 3):totable(), {7 % 3, -7 % 3, 6 % 3})
    check.eq((a / 2).dtype, "f32")
    local f = t{7.5, -7.5}
    check.eq((f // 2):totable(), {7.5 // 2, -7.5 // 2})
    check.eq((f % 2):totable(), {7.5 % 2, -7.5 % 2})
  end,

  ["float // and % floor in float: no i32 clamp; inf, nan and zero divisors as in Lua"] = function()
    local function same(got, want)
      for i = 1, #want do
        local g, w = got[i], want[i]
        if not ((g ~= g and w ~= w) or g == w) then
          error(string.format("element %d: expected %s, got %s", i, w, g), 2)
        end
      end
    end
    local inf = math.huge
    local a = t{3e9, -3e9, inf, -inf, 1, -1, 0, 7.5, -7.5}
    local b = t{1, 2, 1, 2, 0, 0, 0, -2, 2}
    local want_q, want_r = {}, {}
    for i, x in ipairs(a:totable()) do
      local y = b:totable()[i]
      want_q[i], want_r[i] = x // y, x % y
    end
    same((a // b):totable(), want_q)
    same((a % b):totable(), want_r)
    local x, y = t{5, -5, 5, -5, 0, inf}, t{inf, inf, -inf, -inf, inf, inf}
    local want = {}
    for i, v in ipairs(x:totable()) do want[i] = v % y:totable()[i] end
    same((x % y):totable(), want)
    same(tpu.jit(function(u, v) return u % v end)(x, y):totable(), want)
  end,

  ["float % is Lua's to the bit at any quotient (fmod, then b's sign), eager and traced"] = function()
    local xs = {1e20, -1e20, 3e9, -3e9, 16777217, 123456.78, -123456.78, 5.5, -5.5, 1e-30, -1e-30, 7, -7, 0,
                -0.0, 1e38, -2.5e-7, 8388609.5}
    local ys = {3, -3, 7, 0.1, -0.1, 1e-3, 2, -2, 1e30, 1e-30, 0.3, 7, 2.5e-7, 1e-7}
    local a_list, b_list = {}, {}
    for _, x in ipairs(xs) do
      for _, y in ipairs(ys) do a_list[#a_list + 1], b_list[#b_list + 1] = x, y end
    end
    local a, b = t(a_list), t(b_list)
    local av, bv = a:totable(), b:totable()  -- the f32 values, whose fmod is exact in double too
    local want = {}
    for i = 1, #av do want[i] = av[i] % bv[i] end
    want = t(want):totable()  -- Lua's result in double, rounded to f32
    local function same(got, what)
      for i = 1, #want do
        local g, w = got[i], want[i]
        local ok = (g ~= g and w ~= w) or (g == w and 1 / g == 1 / w)
        if not ok then
          error(string.format("%s: %.17g %% %.17g: expected %.17g, got %.17g", what, av[i], bv[i], w, g), 2)
        end
      end
    end
    same((a % b):totable(), "eager")
    same(tpu.jit(function(u, v) return u % v end)(a, b):totable(), "traced")
    check.eq((t(1e20) % 3):item(), t(1e20):item() % 3)  -- 2 (f32's 1e20 is 100000002004087734272)
    -- The gradient: 1 for a, -floor(a / b) for b.
    local g = tpu.grad(function(u, v) return (u % v):sum() end, {argnums = {1, 2}})(t{7.5, -7.5, 1e3}, t{2, 2, -3})
    check.eq(g[1]:totable(), {1, 1, 1})
    check.eq(g[2]:totable(), {-3, 4, 334})
  end,

  ["integer // 0 is 0 and % 0 the dividend; the minimum // -1 wraps"] = function()
    local a = t({7, -7, -2147483648}, "i32")
    check.eq((a // 0):totable(), {0, 0, 0})
    check.eq((a % 0):totable(), {7, -7, -2147483648})
    check.eq((a // -1):totable(), {-7, 7, -2147483648})
    check.eq((a % -1):totable(), {0, 0, 0})
  end,

  ["slice takes integral floats as integers and rejects other index values"] = function()
    local x = t{{1, 2, 3}, {4, 5, 6}}
    local n = 4
    check.eq(x:slice{n / 2}:totable(), {{4, 5, 6}})
    check.eq(x:slice{{}, {n / 4, 2.0}}:totable(), {{1, 2}, {4, 5}})
    check.eq(traced_slice(x, {{}, {n / 4, 2.0}}):totable(), {{1, 2}, {4, 5}})
    check.raises(function() return x:slice{2.5} end, "bad argument #1 to 'slice' (axis 1: index must be an integer, got 2.5")
    check.raises(function() return x:slice{{1, 1.5}} end, "bad argument #1 to 'slice' (axis 1: last must be an integer")
    check.raises(function() return x:slice{"1"} end, "axis 1: an index or {first, last} expected, got string")
    check.raises(function() return x:slice{{}, true} end, "axis 2: an index or {first, last} expected, got boolean")
    check.raises(function() return x:slice{{"a", 2}} end, "axis 1: first must be an integer, got string")
    check.raises(function() return x:slice{{1, 2, 3}} end, "axis 1: a range is {first, last}, got 3 elements")
    check.raises(function() return x:slice{{1, 2, 3, 4}} end, "axis 1: a range is {first, last}, got 4 elements")
    check.raises(function() return x:slice{{}, {-5, -1}} end, "range {-5, -1} is outside axis 2 of f32[2,3]")
  end,

  ["== compares values: 0 == -0, NaN equals nothing, dtype and shape must match"] = function()
    local nan = 0 / 0
    check.is_true(t{0, 1} == t{-0.0, 1})
    check.is_true(not (t{nan} == t{nan}))
    check.is_true(not (t{1, 2} == t{1, 3}))
    check.is_true(not (t({1, 2}, "i32") == t{1, 2}))
    check.is_true(not (t{1, 2} == t{{1, 2}}))
    check.is_true(t({1, 2}, "bf16") == t({1, 2}, "bf16"))
    check.is_true(not (t{2} == 2))  -- Lua calls no __eq between a tensor and a number
    check.eq(t{2}:eq(2):totable(), {true})
  end,

  ["pow's gradient is finite at base 0, as JAX's"] = function()
    local function dx(y) return tpu.grad(function(x) return (x ^ y):sum() end)(t{0, 2}):totable() end
    check.eq(dx(2), {0, 4})
    check.eq(dx(1), {1, 1})
    check.eq(dx(0), {0, 0})
    local dy = tpu.grad(function(y) return (t{0, 0, 1} ^ y):sum() end)(t{2, 0.5, 3}):totable()
    check.eq(dy, {0, 0, 0})
  end,

  ["argmax: the first NaN wins, as max's NaN does"] = function()
    local nan = 0 / 0
    local x = t{{1, nan, 3, nan}, {5, 2, 7, 0}, {nan, 9, 1, 2}}
    check.eq(x:argmax():totable(), {1, 2, 0})
    check.eq(tpu.jit(function(v) return v:argmax() end)(x):totable(), {1, 2, 0})
    check.eq(x:argmax(1):totable(), {2, 0, 1, 0})
  end,

  ["a bf16 mean sums and divides in f32 and rounds once"] = function()
    local x = tpu.full({127}, 3, {dtype = "bf16"})
    check.eq(x:mean().dtype, "bf16")
    check.eq(x:mean():item(), 3)
    check.eq(tpu.full({2, 127}, 3, {dtype = "bf16"}):mean(2):totable(), {3, 3})
    check.eq(t({1, 2}, "i32"):mean().dtype, "f32")
  end,

  ["an i32 sum wraps as + does"] = function()
    local x = t({2147483647, 1, 5}, "i32")
    check.eq(x:sum():item(), -2147483643)
    check.eq(x:sum():item(), (x:slice{1} + x:slice{2} + x:slice{3}):item())
    check.eq(t({{-2147483647, -5}}, "i32"):sum(2):totable(), {2147483644})
    check.eq(tpu.jit(function(v) return v:sum() end)(x):item(), -2147483643)
  end,

  ["casts: float to integer saturates, integer to integer wraps"] = function()
    check.eq(t{-1, 300, 1e10, -1e10}:cast("u8"):totable(), {0, 255, 255, 0})
    check.eq(t{3e9, -3e9}:cast("i32"):totable(), {2147483647, -2147483648})
    local i = t({-1, 300, 255, 256}, "i32")
    check.eq(i:cast("u8"):totable(), {255, 44, 255, 0})
    check.eq(tpu.jit(function(v) return v:cast("u8") end)(i):totable(), {255, 44, 255, 0})
  end,

  ["stack: an axis out of range is an argument error at the caller's line"] = function()
    local a = t{1, 2}
    for _, axis in ipairs{0, 3, -4} do
      local ok, err = pcall(tpu.stack, {a, a}, axis)
      check.eq(ok, false)
      check.is_true(err:find("^[^:]*test_tensor.lua:%d+: bad argument #2 to 'stack'") ~= nil, err)
      check.is_true(err:find("(axis " .. axis .. " is out of range for stacking rank-1 tensors (1 to 2, or -2 to -1))",
        1, true) ~= nil, err)
    end
    check.eq(tpu.stack({a, a}, 2).shape, {2, 2})
    check.eq(tpu.stack({a, a}, -2).shape, {2, 2})
    check.raises(function() return tpu.stack({a, a}, 1.5) end, "bad argument #2 to 'stack' (integer expected, got number)")
    check.raises(function() return tpu.stack({a, a}, "1") end, "bad argument #2 to 'stack' (integer expected, got string)")
    check.eq(tpu.stack({a, a}, 2.0).shape, {2, 2})
  end,

  ["bools: + is or, * is and, max stays bool, a Lua boolean is no arithmetic operand"] = function()
    local b, c = t({true, false, true}, "bool"), t({true, true, false}, "bool")
    check.eq((b + c):totable(), {true, true, true})
    check.eq((b * c):totable(), {true, false, false})
    check.eq(b:max().dtype, "bool")
    check.eq(b:max():item(), true)
    check.eq(b:min():item(), false)
    check.eq(t({false, false}, "bool"):max():item(), false)
    check.eq(tpu.jit(function(u, v) return (u + v):min(1) end)(b, c):item(), true)
    check.eq(b:sum():item(), 2)
    check.eq((b + 1):totable(), {2, 1, 2})
    check.eq((b - 1):totable(), {0, -1, 0})
    check.raises(function() return t{1, 2} + true end, "number or tensor expected, got boolean")
    check.raises(function() return b * false end, "number or tensor expected, got boolean")
    check.eq(b:eq(true):totable(), {true, false, true})
  end,

  ["bools as JAX: - is an error at the caller's line, / and ^ are f32, // and % count in i32"] = function()
    local b, c = t({true, false, true, false}, "bool"), t({true, true, false, false}, "bool")
    for _, f in ipairs{function() return b - c end, function() return b:sub(c) end,
                       function() return tpu.jit(function(u, v) return u - v end)(b, c) end} do
      local ok, err = pcall(f)
      check.eq(ok, false)
      check.is_true(err:find("^[^:]*test_tensor.lua:%d+: bool %- bool is not defined %(as in JAX%): " ..
        "cast to i32 or f32 first") ~= nil, err)
    end
    local ok, err = pcall(function() return -b end)
    check.eq(ok, false)
    check.is_true(err:find("^[^:]*test_tensor.lua:%d+: %-bool is not defined %(as in JAX%): " ..
      "cast to i32 or f32 first") ~= nil, err)
    check.raises(function() return b:neg() end, "-bool is not defined")
    -- abs has no sign to drop: the bools as they are (jnp.abs), eager and traced; u8 likewise.
    check.eq(b:abs().dtype, "bool")
    check.eq(b:abs():totable(), {true, false, true, false})
    check.eq(tpu.jit(function(u) return u:abs() end)(b):totable(), {true, false, true, false})
    check.eq(t({0, 200}, "u8"):abs():totable(), {0, 200})
    check.eq((b:cast("i32") - c):totable(), {0, -1, 1, 0})
    check.eq((-b:cast("i32")):totable(), {-1, 0, -1, 0})
    check.eq((b - t({1, 2, 3, 4}, "u8")).dtype, "u8")
    check.eq((b / c).dtype, "f32")
    local q = (b / c):totable()
    check.eq({q[1], q[2], q[3]}, {1, 0, math.huge})
    check.is_true(q[4] ~= q[4], "false / false is NaN")
    check.eq((b ^ c).dtype, "f32")
    check.eq((b ^ c):totable(), {1, 0, 1, 1})
    check.eq((b // c).dtype, "i32")
    check.eq((b // c):totable(), {1, 0, 0, 0})
    check.eq((b % c).dtype, "i32")
    check.eq((b % c):totable(), {0, 0, 1, 0})
    check.eq(tpu.jit(function(u, v) return u // v, u % v end)(b, c):totable(), {1, 0, 0, 0})
  end,

  ["printing shows NaN as nan whatever its sign bit, and the infinities signed"] = function()
    local nan = 0 / 0
    check.eq(tostring(t{nan, -nan, math.huge, -math.huge}), "tensor([nan, nan, inf, -inf], f32[4])")
    check.eq(tostring(t({nan}, "bf16")), "tensor([nan], bf16[1])")
    check.eq(tostring(t(-nan)), "tensor(nan, f32[])")
  end,

  ["dtype promotion"] = function()
    check.eq((t({1}, "u8") + t({1}, "i32")).dtype, "i32")
    check.eq((t({1}, "i32") + 1.5).dtype, "f32")
    check.eq((t({1}, "i32") + 1).dtype, "i32")
    check.eq(t({250}, "u8"):cast("f32"):totable(), {250})
    check.eq(t{1.7, -1.7}:cast("i32"):totable(), {1, -1})
  end,

  ["reductions take 1-based and negative axes"] = function()
    local a = t{{1, 2, 3}, {4, 5, 6}}
    check.eq(a:sum():item(), 21)
    check.eq(a:sum(1):totable(), {5, 7, 9})
    check.eq(a:sum(-1):totable(), {6, 15})
    check.eq(a:sum(2, true).shape, {2, 1})
    check.eq(a:max(1):totable(), {4, 5, 6})
    check.eq(a:min(-1):totable(), {1, 4})
    check.eq(a:mean():item(), 3.5)
    check.eq(a:argmax(-1):totable(), {2, 2})
    check.eq(t{3, 9, 1}:argmax():item(), 1)
    check.raises(function() return a:sum(3) end, "axis 3 is out of range")
    check.raises(function() return a:sum(0) end, "1-based")
  end,

  ["matmul, reshape, transpose"] = function()
    local a = t{{1, 2}, {3, 4}}
    check.eq(a:matmul(a):totable(), {{7, 10}, {15, 22}})
    check.eq(a:matmul(t{1, 1}):totable(), {3, 7})
    check.eq(tpu.ones{3, 2, 4}:matmul(tpu.ones{4, 5}).shape, {3, 2, 5})
    check.eq(tpu.arange(6):reshape{2, -1}.shape, {2, 3})
    check.eq(a:transpose():totable(), {{1, 3}, {2, 4}})
    check.eq(tpu.zeros{2, 3, 4}:transpose{3, 1, 2}.shape, {4, 2, 3})
    check.raises(function() return tpu.arange(6):reshape{4, 2} end, "cannot reshape")
    check.raises(function() return a:matmul(tpu.ones{3, 1}) end, "inner dimensions")
  end,

  ["a batch of rows times a matrix: each batch's product, one product in the graph, its gradient"] = function()
    local x = tpu.arange(24):reshape{2, 3, 4} / 10
    local w = tpu.arange(20):reshape{4, 5} / 7 - 1
    local y = x:matmul(w)
    check.eq(y.shape, {2, 3, 5})
    for b = 1, 2 do check.near(y:slice{{b, b}}:reshape{3, 5}:totable(), x:slice{{b, b}}:reshape{3, 4}:matmul(w):totable(), 1e-6) end
    -- w is neither broadcast to the batch nor summed back: one [6, 4] @ [4, 5] product.
    local f = tpu.jit(function(x, w) return (x:matmul(w) * x:matmul(w)):sum() end)
    check.eq(f:lower(x, w):find("broadcast", 1, true), nil)
    local _, dw = tpu.value_and_grad(function(w) return (x:matmul(w) * x:matmul(w)):sum() end)(w)
    local x2 = x:reshape{6, 4}
    check.near(dw:totable(), (x2:transpose():matmul(x2:matmul(w)) * 2):totable(), 1e-5)
    check.eq(tpu.ones{2, 3, 0}:matmul(tpu.ones{0, 5}):totable(), tpu.zeros{2, 3, 5}:totable())
  end,

  ["slice, take and one_hot"] = function()
    local a = t{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}
    check.eq(a:slice{{2, 3}}:totable(), {{4, 5, 6}, {7, 8, 9}})
    check.eq(a:slice{{1, 2}, {-2, -1}}:totable(), {{2, 3}, {5, 6}})
    check.eq(a:take(t({2, 0}, "i32")):totable(), {{7, 8, 9}, {1, 2, 3}})
    check.eq(a:take(t({0}, "i32"), 2):totable(), {{1}, {4}, {7}})
    check.eq(t({0, 2}, "u8"):one_hot(3):totable(), {{1, 0, 0}, {0, 0, 1}})
    check.raises(function() return a:take(t({3}, "i32")) end, "out of range")
    check.raises(function() return a:slice{{0, 2}} end, "outside axis 1")
  end,

  ["an eager slice of leading rows gives the general path's values"] = function()
    local x = tpu.arange(60):reshape{5, 4, 3}
    local ranges = {
      {{1, 5}}, {{2, 3}}, {{5, 5}}, {{-2, -1}}, {{3, 2}}, {{1, 0}}, {{6, 5}},  -- leading rows, empty ones
      {{2, 4}, {1, 4}, {1, 3}},                                                -- every axis named, whole
      {{2, 3}, {2, 3}}, {{1, 5}, {1, 4}, {2, 2}}, {{2, 3}, {3, 2}},            -- other axes cut
    }
    for _, r in ipairs(ranges) do
      local got, want = x:slice(r), traced_slice(x, r)
      check.eq(got.shape, want.shape, check.show(r))
      check.eq(got.dtype, "i32")
      check.eq(got:totable(), want:totable(), check.show(r))
    end
    local v = t({1, 2, 3, 4}, "u8")  -- rank 1: every slice is of leading rows
    for first = 1, 5 do
      for last = first - 1, 4 do
        check.eq(v:slice{{first, last}}:totable(), traced_slice(v, {{first, last}}):totable())
      end
    end
    check.eq(v:slice{{2, 3}}.dtype, "u8")
  end,

  ["an eager slice of leading rows compiles nothing, whatever its offsets"] = function()
    local dir = files.tmpname()
    local f = assert(io.open(dir, "wb"))
    f:write([[
local tpu = require "tpu"
local x = tpu.arange(400):reshape{100, 4}
io.stderr:write("slices begin\n")
for first = 1, 90 do local _ = x:slice{{first, first + 7}} end
io.stderr:write("slices end\n")
]])
    f:close()
    local p = io.popen(string.format("TPUTRAIN_DEBUG=2 %q %q 2>&1", arg[-1], dir))
    local out = p:read("a")
    p:close()
    os.remove(dir)
    local between = out:match("slices begin\n(.-)slices end\n")
    check.is_true(between ~= nil, out)
    check.eq(select(2, between:gsub("compile ", "")), 0, between:sub(1, 400))
  end,

  -- The gradients are the closed forms, y * (g - sum(g * y)) and g - softmax * sum(g), and the
  -- max taken out for the exponentials is a constant to them: no comparison with it (which
  -- differentiating it takes) is left in the compiled gradient.
  ["softmax and log_softmax gradients: the closed forms, not through the max"] = function()
    local x = t{{1, 3, -2, 3}, {0.5, -1, 2, 0}}
    local w = t{{0.3, -1, 2, 0.5}, {1, 1, -0.5, 2}}
    for _, name in ipairs {"softmax", "log_softmax"} do
      local grad = tpu.jit(function(v) return tpu.grad(function(u) return (u[name](u, -1) * w):sum() end)(v) end)
      local got = grad(x):totable()
      local y = x:softmax(-1):totable()
      for i = 1, 2 do
        local sum_gy, sum_g = 0, 0
        for j = 1, 4 do
          sum_gy = sum_gy + w:totable()[i][j] * y[i][j]
          sum_g = sum_g + w:totable()[i][j]
        end
        for j = 1, 4 do
          local g = w:totable()[i][j]
          local expect = name == "softmax" and y[i][j] * (g - sum_gy) or g - y[i][j] * sum_g
          check.near(got[i][j], expect, 1e-6, name .. " row " .. i .. " column " .. j)
        end
      end
      check.is_true(not grad.last.exe:text():find("direction=eq", 1, true), name .. ": a comparison with the max is left")
    end
  end,

  ["elementwise math and composites"] = function()
    local x = t{-1, 0, 2}
    check.eq(x:relu():totable(), {0, 0, 2})
    check.near(x:exp():totable(), {math.exp(-1), 1, math.exp(2)}, 1e-5)
    check.near(x:sigmoid():totable(), {1 / (1 + math.exp(1)), 0.5, 1 / (1 + math.exp(-2))}, 1e-6)
    check.near(x:softmax():sum():item(), 1, 1e-6)
    check.near(x:log_softmax():exp():totable(), x:softmax():totable(), 1e-6)
    check.eq(x:abs():totable(), {1, 0, 2})
    local g = t{-2, -0.5, 0, 1, 3}
    check.near(g:gelu():totable(), {-0.04550026389635842, -0.15426876936299344, 0, 0.8413447460685429, 2.99595030590511}, 1e-6)
    check.near(g:gelu{approximate = true}:totable(),
      {-0.04540230591222494, -0.15428599017485606, 0, 0.8411919906082768, 2.996362607918227}, 1e-6)
    check.raises(function() return g:gelu{aproximate = true} end, "gelu: unknown option 'aproximate'")
    check.eq(x:lt(0):totable(), {true, false, false})
    check.eq(tpu.where(x:gt(0), x, 0):totable(), {0, 0, 2})
    check.eq(tpu.concat({t{1}, t{2, 3}}):totable(), {1, 2, 3})
    check.eq(tpu.stack({t{1, 2}, t{3, 4}}):totable(), {{1, 2}, {3, 4}})
    check.eq(tpu.stack({t{1, 2}, t{3, 4}}, -1):totable(), {{1, 3}, {2, 4}})
  end,

  ["Lua comparisons work on concrete scalars only"] = function()
    check.is_true(t(1) < t(2))
    check.is_true(0 < t(2))
    check.is_true(t{1, 2} == t{1, 2})
    check.raises(function() return t{1, 2} < t{2, 3} end, "needs scalar tensors")
  end,

  ["printing"] = function()
    check.eq(tostring(t{1, 2}), "tensor([1.0000, 2.0000], f32[2])")
    check.eq(tostring(t({1, 2}, "i32")), "tensor([1, 2], i32[2])")
    local long = tostring(tpu.arange(100))
    check.is_true(long:find("...", 1, true) ~= nil)
  end,

  ["subnormal results and inputs flush to zero, as on a TPU"] = function()
    check.eq((tpu.tensor {1e-30, 2} * 1e-10):totable()[1], 0.0)
    local tiny = tpu.tensor {1e-30} * 1e-7  -- 1e-37: small normal floats still count
    check.is_true(tiny:item() > 0)
    local f = tpu.jit(function(x, y) return x:matmul(y) end)
    check.eq(f(tpu.full({2, 8}, 1e-20), tpu.full({8, 2}, 1e-20)):totable(), {{0, 0}, {0, 0}})
  end,

  ["random numbers are stateless and reproducible"] = function()
    local k = tpu.random.key(42)
    local a = tpu.random.uniform(k, {1000})
    check.eq(a:totable(), tpu.random.uniform(tpu.random.key(42), {1000}):totable())
    local k1, k2 = table.unpack(k:split(2))
    check.is_true(tpu.random.normal(k1, {4}):totable()[1] ~= tpu.random.normal(k2, {4}):totable()[1])
    check.near(a:mean():item(), 0.5, 0.05)
    local n = tpu.random.normal(k, {4000})
    check.near(n:mean():item(), 0, 0.1)
    check.near((n * n):mean():item(), 1, 0.1)
  end,
  ["reductions take {axis=, keepdims=} as well as (axis, keepdims), and nothing else"] = function()
    local x = tpu.tensor {{1, 2, 3}, {4, 5, 6}}
    check.eq(x:sum {axis = 2}:totable(), {6, 15})
    check.eq(x:sum {axis = 1, keepdims = true}.shape, {1, 3})
    check.eq(x:sum {axis = {1, 2}}:item(), 21)
    check.eq(x:max {axis = 1}:totable(), {4, 5, 6})
    check.eq(x:min {axis = -1}:totable(), {1, 4})
    check.eq(x:mean {axis = 1}:totable(), {2.5, 3.5, 4.5})
    check.eq(x:mean {axis = 2, keepdims = true}.shape, {2, 1})
    check.eq(x:argmax {axis = 1}:totable(), {1, 1, 1})
    check.eq(x:argmax {keepdims = true}.shape, {2, 1})
    check.eq(tpu.sum(x, {axis = 2}):totable(), {6, 15})
    check.eq(x:softmax {axis = 1}.shape, {2, 3})
    check.raises(function() local _ = x:sum {axes = 2} end, "test_tensor.lua:%d+: sum: unknown option 'axes'; did you mean 'axis'%? %(known options: axis, keepdims%)")
    check.raises(function() local _ = x:mean {axis = 1, keep = true} end, "mean: unknown option 'keep'")
    check.raises(function() local _ = x:sum("two") end,
      "test_tensor.lua:%d+: bad argument #1 to 'sum' %(number or {axis=, keepdims=} expected, got string%)")
    check.raises(function() local _ = x:max(1, 1) end, "bad argument #2 to 'max' %(boolean keepdims expected, got number%)")
    check.raises(function() local _ = x:sum({axis = 1}, true) end, "bad argument #2 to 'sum' %(no value expected, got boolean%)")
    check.raises(function() local _ = x:argmax {axis = {1, 2}} end, "bad argument #1 to 'argmax'")
    -- an entry of an axis list is reported against the list's argument, not its stack slot
    check.raises(function() local _ = x:transpose {1, "a"} end,
      "test_tensor.lua:%d+: bad argument #1 to 'transpose' %(integer axis expected, got string%)")
    check.raises(function() local _ = x:sum {axis = {1, 3}} end,
      "test_tensor.lua:%d+: axis 3 is out of range for a tensor of rank 2 %(axes are 1%-based; %-1 is the last%)")
  end,
  ["a reduction's axis list naming one axis twice is an error, named as written"] = function()
    local x = tpu.tensor {{1, 2}, {3, 4}}
    check.raises(function() local _ = x:mean {1, 1} end, "test_tensor.lua:%d+: mean: axis list {1, 1} names axis 1 twice")
    check.raises(function() local _ = x:mean {1, -2} end, "mean: axis list {1, %-2} names axis 1 twice")
    check.raises(function() local _ = x:mean {axis = {2, -1}} end, "mean: axis list {2, %-1} names axis 2 twice")
    check.raises(function() local _ = x:sum {2, -1} end, "test_tensor.lua:%d+: sum: axis list {2, %-1} names axis 2 twice")
    check.raises(function() local _ = x:max {1, 1} end, "max: axis list {1, 1} names axis 1 twice")
    check.raises(function() local _ = tpu.min(x, {axis = {-1, 2}}) end, "min: axis list {%-1, 2} names axis 2 twice")
    check.raises(function() local _ = x:mean {1, 3} end, "axis 3 is out of range")
    check.eq(x:mean {1, 2}:item(), 2.5)
    check.eq(x:mean {-1}:totable(), {1.5, 3.5})
  end,

  ["unique sorts bools (false first) and puts NaN, once, last"] = function()
    local b = tpu.tensor {1, 2, 3}:gt(1):unique()
    check.eq(b.dtype, "bool")
    check.eq(b:totable(), {false, true})
    check.eq(tpu.tensor {true, true}:unique():totable(), {true})
    local u = tpu.tensor {0 / 0, 1, 0 / 0, -1}:unique():totable()
    check.eq(#u, 3)
    check.eq({u[1], u[2]}, {-1, 1})
    check.is_true(u[3] ~= u[3])
  end,

  ["an error in a compiled step names the call, then where the op was traced"] = function()
    local f = tpu.jit(function(v, i) return v:take(i) end); local line = debug.getinfo(1, "l").currentline
    check.raises(function() local _ = f(tpu.tensor {1, 2, 3}, tpu.tensor({7}, {dtype = "i32"})) end,
      "^[^:]*test_tensor.lua:" .. line + 1 .. ": gather: index 7 out of range for a dimension of size 3 %(traced at [^:]*test_tensor.lua:" .. line .. "%)$")
  end,

  ["nested tables of booleans give bool; mixing booleans and numbers is an error"] = function()
    check.eq(tpu.tensor {true, false}.dtype, "bool")
    check.eq(tpu.tensor {{true}, {false}}:totable(), {{true}, {false}})
    check.eq(tpu.tensor({true, false}, {dtype = "f32"}):totable(), {1, 0})
    check.eq(tpu.tensor {}.dtype, "f32")
    check.raises(function() local _ = tpu.tensor {{true, 1}} end,
      "test_tensor.lua:%d+: tensor: booleans and numbers mixed in one table %(the first entry is a boolean, entry %[1%]%[2%] a number%)")
    check.raises(function() local _ = tpu.tensor {{1, 2}, {true, 1}} end,
      "tensor: booleans and numbers mixed in one table %(the first entry is a number, entry %[2%]%[1%] a boolean%)")
  end,

  ["a table nested past 32 levels is an error that leaves the interpreter sound"] = function()
    local function nest(depth) local v = 1 for _ = 1, depth do v = {v} end return v end
    check.eq(tpu.tensor(nest(32)).ndim, 32)
    for _, depth in ipairs {33, 150, 100000} do
      check.raises(function() local _ = tpu.tensor(nest(depth)) end,
        "test_tensor.lua:%d+: tensor: the table is nested more than 32 deep; a tensor made from a table has at most 32 axes")
    end
    local cycle = {}; cycle[1] = cycle
    check.raises(function() local _ = tpu.tensor(cycle) end, "tensor: the table is nested more than 32 deep")
    check.eq(tpu.zeros {3}:gt(0):totable(), {false, false, false})  -- the Lua stack is intact
  end,

  ["a table with keys that are not list indices is an error naming the key"] = function()
    check.raises(function() local _ = tpu.tensor {a = 1} end,
      "test_tensor.lua:%d+: tensor: the table has a key that is not a list index, 'a' %(a tensor is made from lists")
    check.raises(function() local _ = tpu.tensor {{1, 2}, {3, 4, x = 1}} end,
      "tensor: the table at %[2%] has a key that is not a list index, 'x'")
    check.raises(function() local _ = tpu.tensor {[0] = 5, 1} end, "not a list index, 0 ")
    check.raises(function() local _ = tpu.tensor {1, 2, [1.5] = 3} end, "not a list index, 1.5 ")
    check.raises(function() local _ = tpu.tensor {1, 2, [4] = 3} end,
      "not a list index, 4 %(past its length 2: a list with a hole%?%)")
    check.raises(function() local _ = tpu.tensor {1, nil, 3} end, "tensor: expected a number, got nil at %[2%] %(a hole in the list%?%)")
    check.eq(tpu.tensor {[1.0] = 2, [2] = 3}:totable(), {2, 3})
    check.eq(tpu.tensor {{}, {}}.shape, {2, 0})
  end,

  ["a Lua number that does not fit the integer dtype it is written to is an error"] = function()
    check.raises(function() local _ = tpu.tensor({-1, 300}, {dtype = "u8"}) end,
      "test_tensor.lua:%d+: tensor: entry %[1%]: %-1 does not fit u8 %(0 to 255%)$")
    check.raises(function() local _ = tpu.tensor({{1, 2}, {3, 3e9}}, {dtype = "i32"}) end,
      "tensor: entry %[2%]%[2%]: 3000000000 does not fit i32 %(%-2147483648 to 2147483647%)$")
    check.raises(function() local _ = tpu.tensor({0 / 0}, {dtype = "i32"}) end, "tensor: entry %[1%]: nan does not fit i32")
    check.raises(function() local _ = tpu.tensor(math.huge, {dtype = "u8"}) end, "tensor: inf does not fit u8 %(0 to 255%)$")
    check.raises(function() local _ = tpu.tensor(-2.5, {dtype = "u8"}) end, "tensor: %-2.5 does not fit u8")
    check.raises(function() local _ = tpu.full({2}, 1000, {dtype = "u8"}) end, "test_tensor.lua:%d+: full: 1000 does not fit u8 %(0 to 255%)$")
    local u = tpu.tensor({1, 2}, {dtype = "u8"})
    check.raises(function() return u + 300 end,
      "test_tensor.lua:%d+: the Lua number 300 does not fit u8 %(0 to 255%), the dtype it takes from the tensor it meets; cast the tensor first %(t:cast%(\"i32\"%)%)$")
    check.raises(function() return u:eq(-1) end, "the Lua number %-1 does not fit u8")
    check.raises(function() return tpu.where(u:gt(1), u, 1000) end, "the Lua number 1000 does not fit u8")
    local traced = tpu.jit(function(x) return x * 3000000000 end)
    check.raises(function() return traced(tpu.tensor({1}, {dtype = "i32"})) end, "the Lua number 3000000000 does not fit i32")
    -- In range: the fraction is dropped as cast drops it; floats take anything; cast still saturates.
    check.eq(tpu.tensor({-0.5, 255.9}, {dtype = "u8"}):totable(), {0, 255})
    check.eq(tpu.tensor(2147483647.5, {dtype = "i32"}):item(), 2147483647)
    check.eq((u + 253):totable(), {254, 255})
    check.eq((u + 300.0).dtype, "f32")
    check.eq(tpu.tensor({1e39}, {dtype = "f32"}):item(), math.huge)
    check.eq(tpu.tensor({-1, 300}):cast("u8"):totable(), {0, 255})
  end,

  ["transpose reports a bad permutation with the axes as written"] = function()
    local x = tpu.zeros {2, 2}
    check.raises(function() local _ = x:transpose {1, 1} end,
      "test_tensor.lua:%d+: transpose: {1, 1} is not a permutation of the axes of f32%[2,2%] %(axes are 1%-based%)")
    check.raises(function() local _ = x:transpose {2, -1} end, "transpose: {2, %-1} is not a permutation")
    check.raises(function() local _ = x:transpose {1} end, "transpose: {1} is not a permutation")
    check.eq(x:transpose {-1, 1}.shape, {2, 2})
  end,

  ["a Lua float next to an integer tensor makes the result f32; an integer keeps the dtype"] = function()
    check.eq((tpu.tensor({0, 1, 3}, {dtype = "i32"}) * 0.5):totable(), {0, 0.5, 1.5})
    check.eq((tpu.tensor({0, 1, 3}, {dtype = "i32"}) * 0.5).dtype, "f32")
    check.eq((tpu.tensor({1}, {dtype = "i32"}) * 2.0).dtype, "f32")
    check.eq((tpu.tensor({1}, {dtype = "u8"}) + 2).dtype, "u8")
    check.eq((tpu.tensor({1}, {dtype = "bf16"}) * 0.5).dtype, "bf16")
  end,

  ["is_tensor and is_traced take one value; arange takes a dtype"] = function()
    check.raises(function() local _ = tpu.is_tensor(tpu.zeros {1}, 5) end,
      "test_tensor.lua:%d+: bad argument #2 to 'is_tensor' %(no value expected, got number%)")
    check.raises(function() local _ = tpu.is_traced(1, 5) end, "bad argument #2 to 'is_traced'")
    check.eq(tpu.is_tensor(nil), false)
    check.eq(tpu.arange(3, {dtype = "f32"}):totable(), {0, 1, 2})
    check.eq(tpu.arange(3, {dtype = "f32"}).dtype, "f32")
    check.eq(tpu.arange(256, {dtype = "u8"}):totable()[256], 255)
    check.raises(function() local _ = tpu.arange(300, {dtype = "u8"}) end, "arange: 300 values do not fit u8 %(0 to 255%)")
    check.raises(function() local _ = tpu.arange(3, {dtype = "bool"}) end, "arange: dtype bool cannot count")
  end,
}
