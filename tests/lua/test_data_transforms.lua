-- tpu.data transforms: filter, cycle, skip, shard, cache and prefetch; their cardinality and
-- element_spec, and the errors users see.
local tpu = require "tpu"
local data = tpu.data
local check = require "check"
local util = require "data_util"
local collect, counter, iota = util.collect, util.counter, util.iota

local tests = {}

---------------------------------------------------------------- filter

tests["filter runs a plain Lua predicate on every element"] = function()
  -- item() would fail inside a traced function: the predicate runs on the host.
  local evens = data.range(10):filter(function(i) return i:item() % 2 == 0 end)
  check.eq(collect(evens), {0, 2, 4, 6, 8})
  check.eq(evens:cardinality(), data.UNKNOWN)
  check.eq(collect(counter(10):filter(function(i) return i:item() > 6 end)), {7, 8, 9})
  -- Scalar tensors and numbers work as results too.
  check.eq(collect(data.range(6):filter(function(i) return (i % 3):eq(0) end)), {0, 3})
  check.eq(collect(data.range(4):filter(function(i) return i:item() end)), {1, 2, 3})
  -- It sees every component and stays paired.
  local x = tpu.tensor({{1, 1}, {2, 2}, {3, 3}}, {dtype = "i32"})
  local y = tpu.tensor({0, 1, 0}, {dtype = "i32"})
  local ones = data.from_tensors {x, y}:filter(function(_, label) return label:item() == 0 end)
  check.eq(collect(ones:batch(5)), {{{{1, 1}, {3, 3}}, {0, 0}}})
  check.eq(data.range(3):cycle():filter(function() return true end):cardinality(), data.INFINITE)
end

tests["filter keeps an in-memory pipeline indexed"] = function()
  local ds = data.range(20):shuffle(20, {seed = 4}):filter(function(i) return i:item() < 10 end)
  check.is_true(ds:_indexed() ~= nil, "filter of an in-memory source batches by gathering")
  local seen = {}
  for b in ds:batch(4):iter() do
    for _, v in ipairs(b:totable()) do seen[#seen + 1] = v end
  end
  table.sort(seen)
  check.eq(seen, iota(10))
end

tests["filter predicate errors"] = function()
  check.raises(function() data.range(3):filter(7) end, "filter: expected a function, got 7")
  local bad = data.range(3):filter(function(i) return tpu.tensor({1, 2}) end)
  check.raises(function() collect(bad) end,
    "filter: the predicate must return a boolean or a scalar, got a tensor f32[2]")
  local bad2 = data.range(3):filter(function() return "yes" end)
  local msg = check.raises(function() collect(bad2) end,
    'filter: the predicate must return a boolean or a scalar, got "yes"')
  check.is_true(msg:find("test_data_transforms.lua:%d+: filter") ~= nil, msg)
end

---------------------------------------------------------------- cycle, skip, take

-- An endless cycle() numbers the passes of epoch e from e << 32: a seeded map under it gets a
-- key stream of its own for every pass of every epoch (fold_in takes 32-bit numbers), the
-- same on every run.
tests["a seeded map under an endless cycle draws anew every pass of every epoch"] = function()
  local function make()
    return data.range(3):map(function(_, key) return tpu.random.uniform(key, {}) end, {seed = 1}):cycle()
  end
  local function passes(ds)
    local it, out = ds:iter(), {}
    for i = 1, 6 do out[i] = it():item() end
    return out
  end
  local ds, seen, epochs = make(), {}, {}
  for e = 1, 3 do
    epochs[e] = passes(ds)
    for _, v in ipairs(epochs[e]) do
      check.is_true(not seen[v], "a value drawn twice: " .. v)
      seen[v] = true
    end
  end
  local again = make()
  for e = 1, 3 do check.eq(passes(again), epochs[e], "the same on every run") end
  local m = tpu.nn.Sequential {tpu.nn.Dense(1)}
  m:compile {optimizer = "sgd", loss = "mse"}
  local xy = data.range(4):map(function(i, key)
    return tpu.random.uniform(key, {2}) + i:cast("f32"), tpu.ones {1}
  end, {seed = 2}):batch(2):cycle()
  check.eq(#m:fit(xy, {epochs = 3, steps_per_epoch = 3, verbose = 0}).history.loss, 3)
end

tests["cycle, skip and take on every kind of upstream"] = function()
  check.eq(collect(counter(3):cycle(2)), {0, 1, 2, 0, 1, 2})
  check.eq(counter(3):cycle(2):cardinality(), data.UNKNOWN)
  check.eq(counter(3):cycle():cardinality(), data.INFINITE)
  check.eq(data.range(3):filter(function() return true end):cycle():cardinality(), data.INFINITE)
  check.eq(collect(counter(3):cycle():take(5)), {0, 1, 2, 0, 1})
  check.eq(collect(data.range(3):cycle(0)), {})
  check.eq(data.range(3):cycle(0):cardinality(), 0)
  check.eq(collect(counter(5):skip(2)), {2, 3, 4})
  check.eq(collect(counter(2):skip(5)), {})
  check.eq(data.range(3):cycle():skip(2):cardinality(), data.INFINITE)
  check.eq(collect(data.range(3):cycle():skip(2):take(4)), {2, 0, 1, 2})
  check.eq(collect(data.range(10):skip(2):take(3)), {2, 3, 4})
  check.eq(data.range(10):skip(2):take(3):cardinality(), 3)
  check.raises(function() data.range(3):cycle(-1) end, "cycle: the count must be a non-negative integer, got -1")
  check.raises(function() data.range(3):skip("2") end, 'skip: the number of elements must be a non-negative integer, got "2"')
end

---------------------------------------------------------------- shard

tests["shard takes every n-th element from a 0-based index"] = function()
  check.eq(collect(data.range(10):shard(3, 0)), {0, 3, 6, 9})
  check.eq(collect(data.range(10):shard(3, 1)), {1, 4, 7})
  check.eq(collect(data.range(10):shard(3, 2)), {2, 5, 8})
  check.eq(collect(counter(10):shard(3, 2)), {2, 5, 8})
  for i = 0, 2 do
    check.eq(data.range(10):shard(3, i):cardinality(), #collect(data.range(10):shard(3, i)))
  end
  check.eq(data.range(2):shard(3, 2):cardinality(), 0)
  check.eq(collect(data.range(2):shard(3, 2)), {})
  check.eq(collect(data.range(5):shard(1, 0)), iota(5))
  check.eq(counter(5):shard(2, 0):cardinality(), data.UNKNOWN)
  check.eq(data.range(5):cycle():shard(2, 1):cardinality(), data.INFINITE)
  -- Shards of one shuffle (same seed) are disjoint and cover everything.
  local all = {}
  for rank = 0, 3 do
    for _, v in ipairs(collect(data.range(30):shard(4, rank):shuffle(30, {seed = 9}))) do
      check.eq(all[v], nil, "element " .. v .. " in two shards")
      all[v] = true
    end
  end
  for v = 0, 29 do check.is_true(all[v], "element " .. v .. " in no shard") end
  check.is_true(data.range(10):shard(2, 1):_indexed() ~= nil, "shard keeps a source indexed")
end

tests["shard arguments"] = function()
  check.raises(function() data.range(10):shard(3, 3) end,
    "shard: the shard index must be in 0 .. 2 (0-based, like an MPI rank), got 3")
  check.raises(function() data.range(10):shard(0, 0) end, "shard: the number of shards must be a positive integer, got 0")
  check.raises(function() data.range(10):shard(2, -1) end, "shard: the shard index must be a non-negative integer, got -1")
  check.raises(function() data.range(10):shard(2) end, "shard: the shard index must be a non-negative integer, got nil")
end

---------------------------------------------------------------- cache

tests["cache runs the upstream work once"] = function()
  local calls = 0
  local ds = data.range(5):map(function(i)
    calls = calls + 1
    return i:item() * 10
  end, {host = true}):cache()
  check.eq(collect(ds), {0, 10, 20, 30, 40})
  check.eq(collect(ds), {0, 10, 20, 30, 40})
  check.eq(calls, 5, "the host function ran for the first pass only")
  check.eq(ds:cardinality(), 5)
end

tests["cache of a generator becomes an in-memory source"] = function()
  local passes = 0
  local gen = data.generator(function()
    passes = passes + 1
    local i = -1
    return function()
      i = i + 1
      if i < 6 then return tpu.tensor({i, i}, {dtype = "i32"}), i end
    end
  end)
  local ds = gen:cache()
  check.eq(ds:cardinality(), data.UNKNOWN, "unknown until the first pass")
  check.eq(#collect(ds), 6)
  check.eq(ds:cardinality(), 6, "known after it")
  local x, y = ds:element_spec()
  check.eq(tostring(x), "i32[2]")
  check.eq(tostring(y), "i32[]")
  -- Shuffling and batching it work on indices and gathers; the generator is not run again.
  local sum = 0
  for xb, yb in ds:shuffle(6, {seed = 1}):batch(4):iter() do
    check.eq(xb.shape[2], 2)
    sum = sum + yb:sum():item()
  end
  check.eq(sum, 15)
  check.eq(passes, 1)
end

tests["cache freezes an upstream shuffle and refuses infinite data"] = function()
  local ds = data.range(16):shuffle(16, {seed = 3}):cache()
  local first = collect(ds)
  check.eq(collect(ds), first)
  local s = data.range(16):shuffle(16, {seed = 3})
  check.eq(collect(s), first, "the cached order is the first pass")
  check.eq(collect(ds:batch(16))[1], first, "batches gather in the cached order")
  local msg = check.raises(function() collect(data.range(3):cycle():cache()) end,
    "cache: range(3):cycle() is infinite and cannot be held in memory; cache before cycle(): ds:cache():cycle()")
  check.is_true(util.located(msg), msg)
  check.eq(collect(data.range(3):cache():cycle(2)), {0, 1, 2, 0, 1, 2})
  check.eq(collect(data.range(0):cache()), {})
end

tests["cache of elements of different shapes keeps them as a list"] = function()
  local ds = util.sequences({3, 1, 2}):cache()
  check.eq(collect(ds), {{{1, 2, 3}, 3}, {{1}, 1}, {{1, 2}, 2}})
  collect(ds)
  local x, y = ds:element_spec()
  check.eq(tostring(x), "i32[?]")
  check.eq(tostring(y), "i32[]")
  check.eq(collect(ds:padded_batch(3)), {{{{1, 2, 3}, {1, 0, 0}, {1, 2, 0}}, {3, 1, 2}}})
end

---------------------------------------------------------------- prefetch

-- A busy wait of `ms` milliseconds, standing for a training step.
local function step(ms)
  local t0 = tpu.core.now()
  while (tpu.core.now() - t0) * 1000 < ms do end
end

tests["prefetch gathers batches on a background thread"] = function()
  local n = 512
  local x = tpu.arange(n * 64):reshape {n, 64}
  local y = tpu.arange(n)
  local function pipeline()
    return data.from_tensors {x, y}:shuffle(n, {seed = 5}):batch(32, {drop_remainder = true})
      :map(function(a, b) return a * 2, b end)
  end
  local ds = pipeline():prefetch(2)
  check.eq(ds:cardinality(), 16)
  check.eq(tostring((ds:element_spec())), "i32[32,64]")
  local expected = collect(pipeline())
  local got = {}
  for a, b in ds:iter() do
    got[#got + 1] = {a:totable(), b:totable()}
    step(10)  -- long enough for the gathering thread to be scheduled on a loaded machine
  end
  check.eq(got, expected, "same batches, same order as without prefetch")
  local stats = ds:prefetch_stats()
  check.eq(stats.batches, 16)
  -- Each batch is gathered during the previous step: only the first should find it unready
  -- (a loaded machine may delay the gathering thread once or twice).
  check.is_true(stats.ready >= 13, "batches ready when asked: " .. stats.ready .. " of 16")
  check.is_true(stats.gather_ms > 0)
  -- The next epoch reshuffles and prefetches again.
  local second = collect(ds)
  check.eq(#second, 16)
  check.is_true(check.show(second) ~= check.show(got), "a new order in epoch 2")
  check.eq(ds:prefetch_stats().batches, 16)
end

tests["prefetch runs the maps after the batch on its thread, the same as without"] = function()
  local n = 70
  local x = tpu.arange(n * 6):reshape {n, 6}
  local y = tpu.arange(n)
  local function chain(ds)
    return ds:map(function(a, b) return a:cast("f32") / 7, b * 2 end)
      :map(function(a, b, key) return a + tpu.random.uniform(key, a.shape), b + 1 end, {seed = 3})
  end
  -- Batches of 16 with a last one of 6: each size runs once on the caller's thread (its compile).
  local function pipeline() return chain(data.from_tensors {x, y}:shuffle(n, {seed = 5}):batch(16)) end
  local ds, reference = pipeline():prefetch(2), pipeline()
  for epoch = 1, 3 do
    local expected, got = collect(reference), collect(ds)
    check.eq(#got, 5)
    check.eq(got, expected, "epoch " .. epoch .. ": the same batches, keys and order")
    local stats = ds:prefetch_stats()
    check.eq(stats.batches, 5)
    -- Epoch 1 maps the first batch of each size here; later epochs map everything on the thread.
    if epoch > 1 then check.is_true(stats.map_ms > 0, "maps ran on the prefetch thread") end
  end
  local runs = 0
  for _ = 1, 2 do
    -- A host map in between keeps the maps above it on the caller's thread.
    local host_map = data.from_tensors {x, y}:batch(16):map(function(a, b) return a, b end, {host = true})
    local split = chain(host_map):prefetch(2)
    check.eq(collect(split), collect(chain(data.from_tensors {x, y}:batch(16))))
    check.eq(split:prefetch_stats().map_ms, 0, "the batch gathers on the thread, the maps run here")
    -- The map right after the batch runs on the thread; the one after a host map does not.
    local mixed = data.from_tensors {x, y}:batch(16):map(function(a, b) return a * 3, b end)
    local host = mixed:map(function(a, b) return a, b end, {host = true})
    local after = host:map(function(a, b) return a - 1, b end):prefetch(2)
    check.eq(collect(after), collect(data.from_tensors {x, y}:batch(16):map(function(a, b) return a * 3 - 1, b end)))
    runs = runs + after:prefetch_stats().batches
    check.is_true(after:prefetch_stats().map_ms > 0, "the first map ran on the thread")
  end
  check.eq(runs, 10)
end

tests["a shuffled pass under prefetch is made in one call, in the same order"] = function()
  local x = tpu.arange(103)
  for _, buffer in ipairs {1, 7, 50, 103, 500} do
    for _, reshuffle in ipairs {true, false} do
      local function ds()
        return data.from_tensors {x}:shuffle(buffer, {seed = -3, reshuffle_each_iteration = reshuffle}):batch(10)
      end
      local plain, fast = ds(), ds():prefetch(2)
      for epoch = 1, 3 do
        check.eq(collect(fast), collect(plain), string.format("buffer %d, epoch %d", buffer, epoch))
      end
    end
  end
  -- The pass's order itself: core.buffer_shuffle against the stream the Lua shuffle uses.
  local order = tpu.core.buffer_shuffle(0, 103, 103, 5, 2):totable()
  local lua_order = {}
  for v in data.from_tensors {x}:shuffle(103, {seed = 5}):iter {epoch = 2} do lua_order[#lua_order + 1] = v:item() end
  check.eq(order, lua_order)
end

tests["prefetch with drop_remainder false, cycle and an early break"] = function()
  local ds = data.from_tensors {tpu.arange(10)}:batch(4):prefetch(3)
  check.eq(collect(ds), {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}})
  local cycled = data.from_tensors {tpu.arange(5)}:batch(2):cycle(2):prefetch(1)
  check.eq(collect(cycled), {{0, 1}, {2, 3}, {4}, {0, 1}, {2, 3}, {4}})
  local nested = data.from_tensors {{tpu.arange(6), tpu.arange(6) * 10}, tpu.arange(6)}:batch(3):prefetch(2)
  check.eq(collect(nested), {{{{0, 1, 2}, {0, 10, 20}}, {0, 1, 2}}, {{{3, 4, 5}, {30, 40, 50}}, {3, 4, 5}}})
  for _ = 1, 3 do
    for _ in data.from_tensors {tpu.arange(1000)}:batch(10):prefetch(4):iter() do break end
  end
  collectgarbage()  -- abandoned prefetchers stop their threads
  check.eq(collect(data.from_tensors {tpu.arange(4)}:cache():batch(2):prefetch(1)), {{0, 1}, {2, 3}})
end

tests["prefetch elsewhere passes elements through"] = function()
  local gen = counter(5):batch(2):prefetch(2)
  check.eq(collect(gen), {{0, 1}, {2, 3}, {4}})
  check.eq(gen:prefetch_stats(), nil)
  local before_batch = data.range(6):prefetch(2):batch(3)
  check.eq(collect(before_batch), {{0, 1, 2}, {3, 4, 5}})
  check.eq(data.range(6):prefetch(2):cardinality(), 6)
  check.eq(tostring((data.range(6):batch(3):prefetch(2):element_spec())), "i32[3]")
  check.eq(collect(data.range(4):batch(2):prefetch(0)), {{0, 1}, {2, 3}})
  check.raises(function() data.range(3):prefetch(-1) end, "prefetch: the buffer size must be a non-negative integer, got -1")
end

return tests
