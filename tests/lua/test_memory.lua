-- Device memory accounting: memory_stats per core, no growth across folds, reset.
local tpu = require "tpu"
local check = require "check"

local function fold(x, y)
  local model = tpu.nn.Sequential {tpu.nn.Dense(32, {activation = "relu"}), tpu.nn.Dense(3)}
  model:compile {optimizer = tpu.optim.Adam {lr = 1e-2}, loss = "sparse_categorical_crossentropy", metrics = {"accuracy"}}
  model:fit(tpu.data.from_tensors {x, y}:batch(16), {epochs = 2, verbose = 0})
  return model
end

-- The process's resident memory in MiB.
local function rss_mib()
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^VmRSS:%s*(%d+)")
    if kb then return tonumber(kb) / 1024 end
  end
end

-- The Lua heap in MiB, then the MiB of dead tensors the process held at its peak while 100
-- tensors of 1 MiB were made and each dropped at once, and the bound the pace sets on them:
-- with a small heap a collection after 8 times the heap in new buffers (at least 8 MiB); the
-- heap when the pace was set may differ a little from the one measured: half as much again.
local function churn()
  collectgarbage()
  local heap_mib = collectgarbage("count") / 1024
  tpu.core.reset_peak()
  local in_use = tpu.core.memory()
  for _ = 1, 100 do
    local t = tpu.ones {256, 1024}
    check.eq(t.shape[1], 256)
  end
  local _, peak = tpu.core.memory()
  return heap_mib, (peak - in_use) / 2 ^ 20, math.max(8, 8 * heap_mib) * 1.5 + 1
end

return {
  ["dead tensors are collected as their bytes add up, not only as Lua's heap grows"] = function()
    -- 40 tensors of 16 MiB, each dropped at once: 640 MiB in all. Lua's collector sees only the
    -- userdata (~100 bytes each); without pacing by tensor bytes the process would hold them all.
    collectgarbage()
    local before = rss_mib()
    for _ = 1, 40 do
      local t = tpu.ones {4, 1024, 1024}
      check.eq(t.shape[1], 4)
    end
    local grown = rss_mib() - before
    check.is_true(grown < 200, string.format("resident memory grew by %.0f MiB", grown))
  end,

  ["with a small Lua heap, dead tensors are collected before a quarter of what is in use adds up"] = function()
    -- 256 MiB held, then the churn. A quarter of what is in use (64 MiB) would pace the
    -- collections by the held tensor; a small Lua heap makes a collection cheap.
    collectgarbage()
    local held = tpu.zeros {64, 1024, 1024}
    local heap_mib, dead_mib, bound = churn()
    check.is_true(bound < 64, string.format("the test's Lua heap (%.1f MiB) is too large to tell", heap_mib))
    check.is_true(dead_mib <= bound, string.format("%.0f MiB of dead tensors, over %.0f", dead_mib, bound))
    check.eq(held.shape[1], 64)
  end,

  ["with a large Lua heap, tensors that stay alive do not make a collection per few MiB"] = function()
    -- A 48 MiB heap of tables (a deep model's), then 48 tensors of 1 MiB kept alive (its weights
    -- or optimizer state). Pacing by a quarter of what is in use would walk the whole heap every
    -- 8 MiB of new tensors; a collection waits for twice the heap's size in new buffers. A
    -- finalizer that re-arms itself counts the collections that complete.
    local heap = {}
    for i = 1, 400000 do heap[i] = {i} end
    collectgarbage()
    local collections = 0
    local function arm() setmetatable({}, {__gc = function() collections = collections + 1; arm() end}) end
    arm()
    local keep = {}
    for i = 1, 48 do keep[i] = tpu.zeros {256, 1024} end
    check.is_true(collectgarbage("count") / 1024 > 24, "the test's Lua heap is too small to tell")
    check.is_true(collections <= 1, string.format("%d collections while 48 MiB of tensors were made", collections))
    check.eq(#keep, 48)
    check.eq(#heap, 400000)
    keep, heap = nil, nil
    collectgarbage()  -- the next collections are paced by the small heap again
  end,

  ["once a large Lua heap is freed, dead tensors are paced by the small heap again"] = function()
    -- A 48 MiB heap while 100 MiB of tensors are made (a collection comes after twice the heap
    -- in new buffers), then heap and tensors dropped; then the churn. Paced by the heap of that
    -- last paced collection, 96 MiB of dead tensors would pile up.
    local heap = {}
    for i = 1, 400000 do heap[i] = {i} end
    local keep = {}
    for i = 1, 100 do keep[i] = tpu.zeros {256, 1024} end
    check.eq(#heap + #keep, 400100)
    heap, keep = nil, nil
    local _, dead_mib, bound = churn()
    check.is_true(dead_mib <= bound, string.format("%.0f MiB of dead tensors, over %.0f", dead_mib, bound))
  end,

  ["collectgarbage() gives the freed heap back to the kernel"] = function()
    -- 200 tensors of 1 MiB (under the size that glibc maps on its own), all alive at once, then
    -- dropped: the heap keeps their pages until a full collection hands them back.
    collectgarbage()
    local before = rss_mib()
    local keep = {}
    for i = 1, 200 do keep[i] = tpu.ones {256, 1024} end
    check.is_true(rss_mib() - before > 150, "the tensors are resident")
    keep = nil
    collectgarbage()
    -- The sanitizer build (tests/fuzz/sanitize.sh sets ASAN_OPTIONS) allocates through its own
    -- allocator, which keeps freed memory in quarantine and has no heap to trim.
    if os.getenv("ASAN_OPTIONS") then return end
    local left = rss_mib() - before
    check.is_true(left < 50, string.format("%.0f MiB stayed resident after collectgarbage()", left))
  end,

  ["a 5-fold loop ends with the HBM in use after fold 1"] = function()
    local k = tpu.random.key(5)
    local x = tpu.random.normal(k, {64, 8})
    local y = (tpu.random.uniform(k:fold_in(1), {64}) * 3):cast("i32")
    local during, after = {}, {}
    for i = 1, 5 do
      local model = fold(x, y)
      during[i] = tpu.memory_stats()[1].bytes_in_use
      model = nil
      after[i] = tpu.memory_stats()[1].bytes_in_use
    end
    check.eq(after[5], after[1], "bytes in use after fold 5 vs fold 1")
    check.eq(during[5], during[1], "bytes in use with fold 5's model vs fold 1's")
    check.is_true(during[1] > after[1], "the model's parameters and optimizer state are on the device")
  end,

  ["memory_stats counts device buffers; a data set stays on the host"] = function()
    tpu.reset()
    local base = tpu.memory_stats()[1]
    check.is_true(base.bytes_limit == 16 * 1024 ^ 3 or base.bytes_limit > 0)
    check.eq(base.bytes_in_use, 0)
    local x = tpu.ones {1000, 250}  -- 1 MB, made on the device
    check.eq(tpu.memory_stats()[1].bytes_in_use, 1000000)
    local ds = tpu.data.from_tensors {x}
    local moved = tpu.memory_stats()[1]
    check.eq(moved.bytes_in_use, 0, "a data set's tensors live on the host")
    check.eq(moved.host_bytes - base.host_bytes, 1000000)
    local f = tpu.jit(function(a) return (a * 2):exp() end)
    local held = f(tpu.ones {256, 256})
    check.is_true(tpu.memory_stats()[1].bytes_in_use >= 256 * 256 * 4)
    check.is_true(tpu.memory_stats()[1].peak_bytes_in_use >= tpu.memory_stats()[1].bytes_in_use)
    held = nil
    tpu.reset()
    check.eq(tpu.memory_stats()[1].bytes_in_use, 0)
    check.eq(ds:cardinality(), 1000)
  end,

  ["a device tensor used after tpu.reset() raises; data sets and file data are kept"] = function()
    local params = tpu.ones {4, 4}
    local batch = tpu.zeros {8, 4}
    local ds = tpu.data.from_tensors {batch}:batch(4)
    tpu.reset()
    check.raises(function() return params + 1 end, "released by tpu.reset()")
    check.raises(function() return params:totable() end, "released by tpu.reset()")
    check.raises(function() return tpu.jit(function(a) return a * 2 end)(params) end, "released by tpu.reset()")
    local n = 0
    for b in ds:iter() do n = n + b.shape[1] end
    check.eq(n, 8)
    check.eq((batch + 1):sum():item(), 32)
  end,
}
