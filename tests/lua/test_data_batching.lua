-- tpu.data padded_batch (and batch's errors for elements it cannot stack).
local tpu = require "tpu"
local data = tpu.data
local check = require "check"
local util = require "data_util"
local collect, sequences, iota = util.collect, util.sequences, util.iota

local tests = {}

local function shapes(ds)
  local out = {}
  for x in ds:iter() do out[#out + 1] = x.shape end
  return out
end

tests["padded_batch pads each batch to its longest element"] = function()
  local ds = sequences({3, 1, 2, 5, 4}):padded_batch(2)
  check.eq(collect(ds), {
    {{{1, 2, 3}, {1, 0, 0}}, {3, 1}},
    {{{1, 2, 0, 0, 0}, {1, 2, 3, 4, 5}}, {2, 5}},
    {{{1, 2, 3, 4}}, {4}},
  })
  check.eq(ds:cardinality(), data.UNKNOWN)
  local x, y = ds:element_spec()
  check.eq(tostring(x), "i32[?,?]")
  check.eq(tostring(y), "i32[?]", "labels are stacked unchanged")
end

tests["pad_to_multiple_of rounds the padded length up"] = function()
  local ds = sequences({3, 1, 9, 8, 0, 0}):padded_batch(2, {pad_to_multiple_of = 4})
  check.eq(shapes(ds), {{2, 4}, {2, 12}, {2, 0}})
  check.eq(collect(ds)[1][1], {{1, 2, 3, 0}, {1, 0, 0, 0}})
  -- The number of signatures a traced map compiles is bounded by ceil(max_len / multiple).
  local lengths = {}
  for i = 1, 64 do lengths[i] = (i * 37) % 40 + 1 end
  local mapped = sequences(lengths):padded_batch(4, {pad_to_multiple_of = 8, drop_remainder = true})
    :map(function(x, y) return x:cast("f32"):sum(2), y end)
  local batches = collect(mapped)
  check.eq(#batches, 16)
  check.is_true(mapped._fn:stats().compiles <= 5, "compiles: " .. mapped._fn:stats().compiles)
end

tests["padded_shapes fixes sizes and -1 leaves them to the batch"] = function()
  local ds = sequences({3, 1}):padded_batch(2, {padded_shapes = {{6}}})
  check.eq(collect(ds), {{{{1, 2, 3, 0, 0, 0}, {1, 0, 0, 0, 0, 0}}, {3, 1}}})
  check.eq(tostring((ds:element_spec())), "i32[?,6]")
  -- A single-component element may give its shape directly; a fixed shape wins over the multiple.
  local ids = sequences({2, 3}):map(function(x) return x end, {host = true})
  check.eq(shapes(ids:padded_batch(2, {padded_shapes = {5}, pad_to_multiple_of = 4})), {{2, 5}})
  check.eq(shapes(ids:padded_batch(2, {padded_shapes = {-1}, pad_to_multiple_of = 4})), {{2, 4}})
  -- Matrices: fix the feature dimension, pad the time dimension.
  local frames = data.generator(function()
    local k = 0
    return function()
      k = k + 1
      if k <= 3 then return tpu.ones({k, 3}) end
    end
  end)
  check.eq(shapes(frames:padded_batch(3, {pad_to_multiple_of = 4, padded_shapes = {{-1, 3}}})), {{3, 4, 3}})
  check.eq(shapes(frames:padded_batch(3, {pad_to_multiple_of = 4})), {{3, 4, 4}}, "a number applies to every dimension")
end

tests["padding_values per component and for bool tensors"] = function()
  local ds = sequences({1, 2}):padded_batch(2, {padding_values = -1})
  check.eq(collect(ds)[1][1], {{1, -1}, {1, 2}})
  ds = sequences({1, 2}):padded_batch(2, {padding_values = {7}})
  check.eq(collect(ds)[1][1], {{1, 7}, {1, 2}})
  local masks = sequences({1, 3}):map(function(x, y) return x:gt(0), y end)
  check.eq(collect(masks:padded_batch(2))[1][1], {{true, false, false}, {true, true, true}})
  check.eq(collect(masks:padded_batch(2, {padding_values = true}))[1][1], {{true, true, true}, {true, true, true}})
  local floats = sequences({1, 2}):map(function(x, y) return x:cast("f32") / 2, y end)
  check.near(collect(floats:padded_batch(2, {padding_values = 0.5}))[1][1], {{0.5, 0.5}, {0.5, 1}}, 1e-6)
end

tests["padded_batch works per component with nested components"] = function()
  local ds = data.generator(function()
    local k = 0
    return function()
      k = k + 1
      if k > 3 then return nil end
      local ids = tpu.tensor(iota(k, 1), {dtype = "i32"})
      return {ids = ids, mask = ids:gt(0)}, {tpu.tensor(k), tpu.ones({2})}
    end
  end)
  local batched = ds:padded_batch(3, {pad_to_multiple_of = {{ids = 4, mask = 2}, 1},
    padding_values = {{ids = -1}}})
  local inputs, targets = batched:iter()()
  check.eq(inputs.ids:totable(), {{1, -1, -1, -1}, {1, 2, -1, -1}, {1, 2, 3, -1}})
  check.eq(inputs.mask.shape, {3, 4})
  check.eq(inputs.mask:totable()[1], {true, false, false, false})
  check.eq(targets[1]:totable(), {1, 2, 3})
  check.eq(targets[2].shape, {3, 2})
  local a, b = batched:element_spec()
  check.eq(tostring(a.ids), "i32[?,?]", "a generator's count is unknown")
  check.eq(tostring(b[1]), "f32[?]")
  check.eq(tostring(b[2]), "f32[?,?]")
end

tests["padded_batch of an in-memory source"] = function()
  local x = tpu.arange(12):reshape {4, 3}
  local ds = data.from_tensors {x, tpu.arange(4)}:padded_batch(3, {pad_to_multiple_of = 4})
  check.eq(collect(ds), {
    {{{0, 1, 2, 0}, {3, 4, 5, 0}, {6, 7, 8, 0}}, {0, 1, 2}},
    {{{9, 10, 11, 0}}, {3}},
  })
  check.eq(ds:cardinality(), 2)
  check.eq(tostring((ds:element_spec())), "i32[?,4]", "the parent's size 3, rounded up")
  local dropped = data.from_tensors {x}:padded_batch(3, {drop_remainder = true, padded_shapes = {{5}}})
  check.eq(dropped:cardinality(), 1)
  check.eq(tostring((dropped:element_spec())), "i32[3,5]")
  check.eq(shapes(dropped), {{3, 5}})
end

tests["an element longer than padded_shapes names its position and length"] = function()
  local ds = sequences({1, 2, 3, 9, 1}):padded_batch(2, {padded_shapes = {{5}}})
  local it = ds:iter()
  check.eq(it().shape, {2, 5})
  local msg = check.raises(it, "padded_batch: the 4th element of the pass has length 9 in "
    .. "dimension 1 of [1] (i32[9]), longer than padded_shapes fixes (5)")
  check.is_true(msg:find("test_data_batching.lua:%d+: padded_batch") ~= nil,
    "located at the padded_batch call: " .. msg)
end

tests["padded_batch errors for elements and options that do not fit"] = function()
  local ranks = data.generator(function()
    local k = 0
    return function()
      k = k + 1
      if k == 1 then return tpu.ones({2}) elseif k == 2 then return tpu.ones({2, 2}) end
    end
  end)
  check.raises(function() collect(ranks:padded_batch(2)) end,
    "padded_batch: the 2nd element of the pass has [1] of type f32[2,2] but the 1st element of the pass (the batch's first) has f32[2]")
  check.raises(function() collect(sequences({2}):padded_batch(1, {padded_shapes = {{4, 4}}})) end,
    "padded_batch: padded_shapes[1] has 2 sizes but the 1st element of the pass has [1] of rank 1 (i32[2])")
  check.raises(function() collect(sequences({2}):padded_batch(1, {padded_shapes = {{{4}}}})) end,
    "padded_batch: padded_shapes[1] must be a list of sizes (-1 for the longest in the batch), got {{...}}")
  check.raises(function() collect(sequences({2}):padded_batch(1, {padded_shapes = {{-3}}})) end,
    "padded_batch: padded_shapes[1] = {-3}: sizes must be >= 0, or -1 for the longest in the batch")
  check.raises(function() collect(sequences({2}):padded_batch(1, {pad_to_multiple_of = {"8"}})) end,
    'padded_batch: pad_to_multiple_of for [1] must be a positive integer, got "8"')
  check.raises(function() collect(sequences({2}):padded_batch(1, {padding_values = {"x"}})) end,
    'padded_batch: padding_values for [1] must be a number, got "x"')
  -- A value the dtype cannot hold is refused rather than clamped or truncated.
  local masks = sequences({1, 2}):map(function(x, y) return x:gt(0), x:cast("u8"), x, y end)
  for _, case in ipairs {{{0, -1}, "[2] is -1, which u8 cannot hold"}, {{0, 300}, "[2] is 300, which u8"},
      {{0, 0, 0.5}, "[3] is 0.5, which i32"}, {{0, 0, 2 ^ 31}, "[3] is 2147483648.0, which i32"},
      {{2}, "[1] is 2, which bool"}} do
    local msg = check.raises(function() collect(masks:padded_batch(2, {padding_values = case[1]})) end,
      "padded_batch: padding_values for " .. case[2])
    check.is_true(util.located(msg), msg)
  end
  check.eq(collect(masks:padded_batch(2, {padding_values = {true, 255, -2 ^ 31, 0.5}}))[1][3],
    {{1, -2 ^ 31}, {1, 2}}, "the labels, scalars, are not padded")
  check.raises(function() sequences({2}):padded_batch(0) end, "padded_batch: the batch size must be a positive integer, got 0")
  check.raises(function() sequences({2}):padded_batch(2, {pad_to_multiple_of = 0}) end,
    "padded_batch: pad_to_multiple_of must be a positive integer, got 0")
  check.raises(function() sequences({2}):padded_batch(2, {padded_shapes = 5}) end,
    "padded_batch: padded_shapes must be a table of shapes such as {{64}}, got 5")
  check.raises(function() sequences({2}):padded_batch(2, {padding_values = "x"}) end,
    'padded_batch: padding_values must be a number or a table of them, got "x"')
  check.raises(function() sequences({2}):padded_batch(2, {pad_to_multiple = 8}) end,
    'padded_batch: unknown option "pad_to_multiple" (expected pad_to_multiple_of, padded_shapes, padding_values, drop_remainder)')
  check.raises(function() sequences({2}):padded_batch(2, {drop_remainder = 1}) end,
    "padded_batch: drop_remainder must be true or false, got 1")
end

tests["batch counts a generator's elements from 1, in the pass and in the batch"] = function()
  local sizes = {2, 2, 2, 2, 3, 2}
  local ds = data.generator(function()
    local k = 0
    return function()
      k = k + 1
      if sizes[k] then return tpu.zeros {sizes[k]} end
    end
  end)
  check.raises(function() collect(ds:batch(6)) end,
    "batch: the 5th element of the pass has [1] of shape f32[3] but the 1st element of the pass (the batch's first) has f32[2]")
  check.raises(function() collect(ds:batch(3)) end,
    "batch: the 5th element of the pass has [1] of shape f32[3] but the 4th element of the pass (the batch's first) has f32[2]")
  check.raises(function() collect(ds:batch(4)) end,
    "batch: the 6th element of the pass has [1] of shape f32[2] but the 5th element of the pass (the batch's first) has f32[3]")
  local batching = require "tpu.data.batching"
  check.eq({batching.nth(1), batching.nth(2), batching.nth(3), batching.nth(11), batching.nth(12), batching.nth(22), batching.nth(113)},
    {"the 1st element of the pass", "the 2nd element of the pass", "the 3rd element of the pass", "the 11th element of the pass",
     "the 12th element of the pass", "the 22nd element of the pass", "the 113th element of the pass"})
end

tests["batch refuses elements of different shapes and strings"] = function()
  local msg = check.raises(function() collect(sequences({2, 3}):batch(2)) end,
    "batch: the 2nd element of the pass has [1] of shape i32[3] but the 1st element of the pass (the batch's first) has i32[2]; use padded_batch for elements of different shapes")
  check.is_true(util.located(msg), msg)
  local words = data.generator(function()
    local k = 0
    return function()
      k = k + 1
      if k <= 2 then return "word" .. k end
    end
  end)
  check.raises(function() collect(words:batch(2)) end,
    "batch: component [1] is a string; batches hold tensors, so turn strings into tensors first, "
    .. "e.g. ds:map(function(s) return vocab:encode(s) end, {host = true})")
  check.raises(function() words:batch(2):element_spec() end, "batch: component [1] is a string")
  check.raises(function() collect(words:padded_batch(2)) end, "padded_batch: component [1] is a string")
end

-- A generator of the given elements, each a list of components.
local function elements(list)
  return data.generator(function()
    local k = 0
    return function()
      k = k + 1
      if list[k] then return table.unpack(list[k]) end
    end
  end)
end

-- One pass of ds:batch(2) or ds:padded_batch(2) (method b) over those elements.
local function batch_pass(b, list)
  local ds = elements(list)
  return collect(ds[b](ds, 2))
end

tests["batch and padded_batch refuse elements of different structures, in either order"] = function()
  local t, t2 = tpu.ones {2}, tpu.zeros {2}
  local more = "has [2], which the 1st element of the pass (the batch's first) has not; the elements of a batch must have the same structure"
  for _, b in ipairs {"batch", "padded_batch"} do
    local msg = check.raises(function() batch_pass(b, {{t}, {t, t2}}) end,
      b .. ": the 2nd element of the pass " .. more)
    check.is_true(util.located(msg), msg)
    check.raises(function() batch_pass(b, {{t, t2}, {t}}) end,
      b .. ": the 2nd element of the pass has no [2]; the elements of a batch must have the same structure")
    check.raises(function() batch_pass(b, {{{t}}, {{t, t2}}}) end,
      b .. ": the 2nd element of the pass has [1][2], which the 1st")
    check.raises(function() batch_pass(b, {{{a = t}}, {{b = t}}}) end,
      b .. ": the 2nd element of the pass has [1].b, which the 1st")
  end
  check.eq(collect(elements({{{a = t, b = t2}}, {{b = t2, a = t}}}):batch(2))[1],
    {a = {{1, 1}, {1, 1}}, b = {{0, 0}, {0, 0}}})
end

tests["gather_rows copies the rows at 0-based indices and checks them"] = function()
  local x = tpu.tensor({{1, 2}, {3, 4}, {5, 6}}, {dtype = "i32"})
  check.eq(tpu.core.gather_rows(x, {2, 0, 2}):totable(), {{5, 6}, {1, 2}, {5, 6}})
  check.eq(tpu.core.gather_rows(x, {}).shape, {0, 2})
  check.raises(function() tpu.core.gather_rows(x, {3}) end, "index 3 is out of range for 3 rows")
  check.raises(function() tpu.core.gather_rows(x, {0.5}) end, "index 1 is not an integer")
  check.raises(function() tpu.core.gather_rows(tpu.tensor(1), {0}) end, "a scalar has no rows")
end

return tests
