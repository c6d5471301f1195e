-- tpu.data: sources, transforms, iteration, specs and the errors users see.
local tpu = require "tpu"
local data = tpu.data
local check = require "check"
local files = require "files"

-- Every element of one pass, each as a list of components converted with totable().
local function collect(ds, opts)
  local out = {}
  local it = ds:iter(opts)
  while true do
    local e = table.pack(it())
    if e[1] == nil then break end
    for i = 1, e.n do e[i] = e[i]:totable() end
    e.n = nil
    out[#out + 1] = #e == 1 and e[1] or e
  end
  return out
end

local function sorted(list)
  local copy = table.move(list, 1, #list, 1, {})
  table.sort(copy)
  return copy
end

local function iota(n)
  local t = {}
  for i = 1, n do t[i] = i - 1 end
  return t
end

-- Rows i of a [n, 2] tensor are {10 i, 10 i + 1}; labels are i.
local function pairs_dataset(n)
  local x, y = {}, {}
  for i = 0, n - 1 do x[i + 1], y[i + 1] = {10 * i, 10 * i + 1}, i end
  return data.from_tensors {tpu.tensor(x, {dtype = "i32"}), tpu.tensor(y, {dtype = "i32"})}
end

-- A generator data set of 0 .. n-1 (not indexable: elements come one by one).
local function counter(n)
  return data.generator(function()
    local i = -1
    return function()
      i = i + 1
      if i < n then return tpu.tensor(i, {dtype = "i32"}) end
    end
  end)
end

local temp_dir = files.tmpdir

-- Writes an IDX file of u8 values with the given shape.
local function write_idx(path, shape, values)
  local f = assert(io.open(path, "wb"))
  f:write(string.pack(">BBBB", 0, 0, 0x08, #shape))
  for _, d in ipairs(shape) do f:write(string.pack(">I4", d)) end
  f:write(string.char(table.unpack(values)))
  f:close()
end

local fashion_dir = "/usr/share/datasets/fashion-mnist"
local function have_fashion_mnist()
  local f = io.open(fashion_dir .. "/t10k-labels-idx1-ubyte.gz", "rb")
  if f then f:close() end
  return f ~= nil
end

local tests = {}

---------------------------------------------------------------- sources

tests["range yields i32 scalars 0..n-1"] = function()
  local ds = data.range(5)
  check.eq(ds:cardinality(), 5)
  check.eq(collect(ds), {0, 1, 2, 3, 4})
  local first = ds:iter()()
  check.eq(first.dtype, "i32")
  check.eq(first.shape, {})
  check.eq(collect(data.range(0)), {})
end

tests["from_tensors slices along the first dimension"] = function()
  local ds = pairs_dataset(3)
  check.eq(ds:cardinality(), 3)
  check.eq(collect(ds), {{{0, 1}, 0}, {{10, 11}, 1}, {{20, 21}, 2}})
  local x, y = ds:element_spec()
  check.eq(x.shape, {2})
  check.eq(x.dtype, "i32")
  check.eq(y.shape, {})
  check.eq(tostring(x), "i32[2]")
end

tests["from_tensors with nested and named components"] = function()
  local a = tpu.tensor({{1, 2}, {3, 4}, {5, 6}})
  local b = tpu.tensor({7, 8, 9})
  local y = tpu.tensor({0, 1, 0}, {dtype = "i32"})
  local ds = data.from_tensors {{a, b}, y}
  local pair, label = ds:iter()()
  check.eq(pair[1]:totable(), {1, 2})
  check.eq(pair[2]:totable(), 7)
  check.eq(label:totable(), 0)
  local pair_spec, y_spec = ds:element_spec()
  check.eq(pair_spec[1].shape, {2})
  check.eq(pair_spec[2].shape, {})
  check.eq(y_spec.dtype, "i32")
  local named = data.from_tensors {image = a, label = y}
  local e = named:batch(2):iter()()
  check.eq(e.image.shape, {2, 2})
  check.eq(e.label:totable(), {0, 1})
  local single = data.from_tensors(b)
  check.eq(collect(single), {7, 8, 9})
end

tests["from_tensors rejects mismatched first dimensions"] = function()
  local x, y = tpu.zeros({4, 28, 28}, {dtype = "u8"}), tpu.zeros({3}, {dtype = "u8"})
  local msg = check.raises(function() data.from_tensors {x, y} end,
    "from_tensors: all components must share the first dimension, but [1] is a tensor u8[4,28,28] "
    .. "and [2] is a tensor u8[3]")
  check.eq(msg:match("^[^:]+%.lua:%d+: ") ~= nil, true, "error starts with file:line")
  check.raises(function() data.from_tensors {{x, tpu.zeros({5})}, x} end, "[1][1] is a tensor u8[4,28,28] and [1][2] is a tensor f32[5]")
  check.raises(function() data.from_tensors {x, 3} end, "from_tensors: [2] must be a tensor (make one with tpu.tensor), got 3")
  check.raises(function() data.from_tensors {tpu.tensor(1)} end, "from_tensors: [1] is a scalar")
  check.raises(function() data.from_tensors {} end, "from_tensors: no tensors given")
  check.raises(function() data.from_tensors "x" end, 'from_tensors: expected a tensor or a table of tensors such as {x, y}, got "x"')
end

tests["idx reads example and label files"] = function()
  local dir = temp_dir()
  write_idx(dir .. "/x", {3, 2, 2}, iota(12))
  write_idx(dir .. "/y", {3}, {7, 8, 9})
  write_idx(dir .. "/y4", {4}, {1, 2, 3, 4})
  local ds = data.idx(dir .. "/x", dir .. "/y")
  check.eq(ds:cardinality(), 3)
  local x, y = ds:element_spec()
  check.eq(tostring(x), "u8[2,2]")
  check.eq(tostring(y), "u8[]")
  check.eq(collect(ds)[3], {{{8, 9}, {10, 11}}, 9})
  check.eq(data.idx(dir .. "/y"):cardinality(), 3)
  check.raises(function() data.idx(dir .. "/x", dir .. "/y4") end, "idx: " .. dir .. "/x holds 3 examples but " .. dir .. "/y4 holds 4")
  check.raises(function() data.idx(dir .. "/nope") end, dir .. "/nope: file not found")
  check.raises(function() data.idx(42) end, "idx: expected a file name, got 42")
  os.execute("rm -rf '" .. dir .. "'")
end

tests["read_idx errors name the file and start with file:line"] = function()
  local dir = temp_dir()
  local f = assert(io.open(dir .. "/bad", "wb"))
  f:write("hello world")
  f:close()
  local msg = check.raises(function() tpu.core.read_idx(dir .. "/bad") end, dir .. "/bad: not an IDX file")
  check.eq(msg:match("^[^:]+%.lua:%d+: ") ~= nil, true, "error starts with file:line: " .. msg)
  os.execute("rm -rf '" .. dir .. "'")
end

tests["generator calls fn at the start of each pass"] = function()
  local ds = counter(4)
  check.eq(ds:cardinality(), data.UNKNOWN)
  check.eq(collect(ds), {0, 1, 2, 3})
  check.eq(collect(ds), {0, 1, 2, 3})
  local two = data.generator(function()
    local i = 0
    return function()
      i = i + 1
      if i <= 2 then return tpu.tensor({i, i}), i end
    end
  end)
  check.eq(collect(two), {{{1, 1}, 1}, {{2, 2}, 2}})
  check.raises(function() data.generator(function() return 5 end):iter() end, "generator: the function must return an iterator")
end

---------------------------------------------------------------- shuffle

tests["shuffle is a permutation, indexed and element by element"] = function()
  for _, ds in ipairs {data.range(100), counter(100)} do
    local order = collect(ds:shuffle(10, {seed = 3}))
    check.eq(sorted(order), iota(100))
    local same = true
    for i = 1, 100 do same = same and order[i] == i - 1 end
    check.eq(same, false, "shuffled order differs from the input order")
  end
  check.eq(sorted(collect(data.range(50):shuffle(1000, {seed = 1}))), iota(50))
  check.eq(collect(data.range(20):shuffle(1)), iota(20), "a buffer of 1 keeps the order")
end

tests["shuffle is deterministic for a seed and reshuffles every epoch"] = function()
  local a = data.range(64):shuffle(64, {seed = 7})
  local b = data.range(64):shuffle(64, {seed = 7})
  local a1, a2 = collect(a), collect(a)
  local b1, b2 = collect(b), collect(b)
  check.eq(a1, b1, "same seed, same first epoch")
  check.eq(a2, b2, "same seed, same second epoch")
  check.eq(check.show(a1) ~= check.show(a2), true, "epochs differ")
  check.eq(collect(a, {epoch = 0}), a1, "epoch 0 again")
  check.eq(collect(a, {epoch = 1}), a2, "epoch 1 again")
  local c1 = collect(data.range(64):shuffle(64, {seed = 8}))
  check.eq(check.show(c1) ~= check.show(a1), true, "another seed, another order")
  local fixed = data.range(64):shuffle(64, {seed = 7, reshuffle_each_iteration = false})
  check.eq(collect(fixed), collect(fixed))
  -- Element-by-element upstreams shuffle identically to indexed ones.
  check.eq(collect(counter(64):shuffle(64, {seed = 7})), a1)
end

tests["shuffle then batch keeps components paired"] = function()
  local ds = pairs_dataset(50):shuffle(50, {seed = 2}):batch(8)
  local seen = {}
  for x, y in ds:iter() do
    local xs, ys = x:totable(), y:totable()
    check.eq(#xs, #ys)
    for i, row in ipairs(xs) do
      check.eq(row, {10 * ys[i], 10 * ys[i] + 1})
      seen[#seen + 1] = ys[i]
    end
  end
  check.eq(sorted(seen), iota(50))
end

---------------------------------------------------------------- batch, take, skip, cycle

local function batch_sizes(ds)
  local sizes = {}
  for x in ds:iter() do sizes[#sizes + 1] = x.shape[1] end
  return sizes
end

tests["batch sizes with and without drop_remainder"] = function()
  for _, make in ipairs {data.range, counter} do
    local ds = make(10)
    check.eq(batch_sizes(ds:batch(3)), {3, 3, 3, 1})
    check.eq(batch_sizes(ds:batch(3, {drop_remainder = true})), {3, 3, 3})
    check.eq(batch_sizes(ds:batch(5)), {5, 5})
    check.eq(batch_sizes(ds:batch(20)), {10})
    check.eq(batch_sizes(ds:batch(20, {drop_remainder = true})), {})
    check.eq(collect(ds:batch(4)), {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}})
  end
  check.eq(data.range(10):batch(3):cardinality(), 4)
  check.eq(data.range(10):batch(3, {drop_remainder = true}):cardinality(), 3)
  check.eq(counter(10):batch(3):cardinality(), data.UNKNOWN)
  check.eq(collect(data.range(6):batch(2):batch(2)), {{{0, 1}, {2, 3}}, {{4, 5}}})
end

tests["unshuffled batches of tensors are runs of rows, the same as gathered ones"] = function()
  local x = tpu.arange(14):reshape {7, 2}
  local y = {ids = tpu.arange(7) * 10, mask = tpu.arange(7):cast("f32")}
  local ds = data.from_tensors {x, y}
  for _, b in ipairs {1, 2, 3, 7, 9} do
    for _, drop in ipairs {false, true} do
      local opts = {drop_remainder = drop}
      -- take(7) leaves the elements as they are but hands out an index list to gather.
      local runs, gathered = ds:batch(b, opts), ds:take(7):batch(b, opts)
      local a, g = {}, {}
      for bx, by in runs:iter() do a[#a + 1] = {bx:totable(), by.ids:totable(), by.mask:totable()} end
      for bx, by in gathered:iter() do g[#g + 1] = {bx:totable(), by.ids:totable(), by.mask:totable()} end
      check.eq(a, g, string.format("batch(%d), drop_remainder = %s", b, drop))
      check.eq(#a, drop and 7 // b or (7 + b - 1) // b)
    end
  end
  check.eq(collect(data.from_tensors(tpu.arange(5)):batch(2):cycle():take(4)), {{0, 1}, {2, 3}, {4}, {0, 1}})
end

tests["batch element_spec marks a possibly smaller last batch"] = function()
  local ds = data.from_tensors {tpu.zeros({10, 28, 28}, {dtype = "u8"}), tpu.zeros({10}, {dtype = "u8"})}
  local x, y = ds:batch(4):element_spec()
  check.eq(x.shape, {-1, 28, 28})
  check.eq(tostring(x), "u8[?,28,28]")
  check.eq(y.shape, {-1})
  x = ds:batch(4, {drop_remainder = true}):element_spec()
  check.eq(x.shape, {4, 28, 28})
  x = ds:batch(5):element_spec()
  check.eq(x.shape, {5, 28, 28}, "10 divides into batches of 5")
end

tests["take, skip and cycle"] = function()
  check.eq(collect(data.range(10):take(3)), {0, 1, 2})
  check.eq(data.range(10):take(3):cardinality(), 3)
  check.eq(data.range(2):take(3):cardinality(), 2)
  check.eq(collect(data.range(2):take(5)), {0, 1})
  check.eq(collect(data.range(5):take(0)), {})
  check.eq(collect(counter(10):take(2)), {0, 1})
  check.eq(collect(data.range(5):skip(3)), {3, 4})
  check.eq(data.range(5):skip(3):cardinality(), 2)
  check.eq(data.range(5):skip(9):cardinality(), 0)
  check.eq(collect(data.range(3):cycle(2)), {0, 1, 2, 0, 1, 2})
  check.eq(data.range(3):cycle(2):cardinality(), 6)
  check.eq(data.range(3):cycle():cardinality(), data.INFINITE)
  check.eq(collect(data.range(3):cycle():take(7)), {0, 1, 2, 0, 1, 2, 0})
  check.eq(data.range(3):cycle():take(7):cardinality(), 7)
  check.eq(collect(data.range(0):cycle()), {}, "an empty data set cycles to nothing")
  -- Each pass of cycle is a new epoch for the shuffle upstream.
  local passes = collect(data.range(8):shuffle(8, {seed = 5}):cycle(2))
  local s = data.range(8):shuffle(8, {seed = 5})
  local e1, e2 = collect(s), collect(s)
  check.eq(passes, table.move(e2, 1, 8, 9, table.move(e1, 1, 8, 1, {})))
  check.eq(batch_sizes(data.range(5):cycle(2):batch(4)), {4, 4, 2})
end

---------------------------------------------------------------- map and filter

tests["map runs compiled, once per batch signature"] = function()
  local x = tpu.tensor({{0, 51}, {102, 255}, {0, 0}, {255, 255}, {51, 51}}, {dtype = "u8"})
  local y = tpu.tensor({1, 2, 3, 4, 5}, {dtype = "u8"})
  local ds = data.from_tensors {x, y}:batch(2):map(function(a, b) return a:cast("f32") / 255, b end)
  local batches = {}
  for a, b in ds:iter() do
    check.eq(a.dtype, "f32")
    check.eq(b.dtype, "u8")
    batches[#batches + 1] = {a:totable(), b:totable()}
  end
  check.eq(#batches, 3)
  check.near(batches[1][1], {{0, 0.2}, {0.4, 1}}, 1e-6)
  check.eq(batches[3][2], {5})
  for _ in ds:iter() do end
  local stats = ds._fn:stats()
  check.eq(stats.compiles, 2, "batches of 2 and the last batch of 1")
  check.eq(stats.cache_hits, 4)
  check.eq(ds:cardinality(), 3)
  local a_spec, b_spec = ds:element_spec()
  check.eq(a_spec.shape, {-1, 2})
  check.eq(a_spec.dtype, "f32")
  check.eq(tostring(b_spec), "u8[?]")
end

tests["map can change the number of components"] = function()
  local ds = pairs_dataset(4):map(function(x, y) return x:sum() + y end)
  check.eq(collect(ds), {1, 22, 43, 64})
  local spec = ds:element_spec()
  check.eq(spec.shape, {})
  local split = data.range(3):map(function(i) return i, i * 2, {i + 1} end)
  local a, b, c = split:iter()()
  check.eq({a:item(), b:item(), c[1]:item()}, {0, 0, 1})
end

tests["map before batch stacks element by element"] = function()
  local ds = data.range(5):map(function(i) return i * 10 end):batch(2)
  check.eq(collect(ds), {{0, 10}, {20, 30}, {40}})
end

tests["a traced map's numbers and booleans become scalar tensors"] = function()
  local x = tpu.ones {4, 2}
  local ds = data.from_tensors {x}:map(function(a) return a, true, 3, 0.5 end):batch(2)
  local _, flag, n, f = ds:iter()()
  check.eq({flag:totable(), n:totable(), f:totable()}, {{true, true}, {3, 3}, {0.5, 0.5}})
  check.eq({flag.dtype, n.dtype, f.dtype}, {"bool", "i32", "f32"})
  local _, spec = data.from_tensors {x}:batch(2):map(function(a) return a, 1 end):element_spec()
  check.eq(tostring(spec), "i32[]")
  -- Under prefetch the batches after the first come from the thread's compiled run.
  local flags = {}
  for _, b in data.from_tensors {x}:batch(1):map(function(a) return a, false end):prefetch(2):iter() do
    flags[#flags + 1] = b:item()
  end
  check.eq(flags, {false, false, false, false})
  local msg = check.raises(function() collect(data.from_tensors {x}:map(function(a) return a, "s" end)) end,
    'map: result [2] is "s"; a traced function returns tensors, numbers and booleans')
  check.is_true(msg:match("^[^:]+%.lua:%d+: ") ~= nil and not msg:find("%[tpu%]"), msg)
  check.raises(function() collect(data.from_tensors {x}:map(function(a) return {a, print} end)) end,
    "map: result [1][2] is a function")
end

tests["filter keeps elements whose predicate holds"] = function()
  local ds = data.range(10):filter(function(i) return (i % 3):eq(0) end)
  check.eq(collect(ds), {0, 3, 6, 9})
  check.eq(ds:cardinality(), data.UNKNOWN)
end

---------------------------------------------------------------- argument errors

tests["bad arguments are user errors that echo the value"] = function()
  local ds = data.range(10)
  check.raises(function() ds:batch(-2) end, "batch: the batch size must be a positive integer, got -2")
  check.raises(function() ds:batch(0) end, "batch: the batch size must be a positive integer, got 0")
  check.raises(function() ds:batch(2.5) end, "got 2.5")
  check.raises(function() ds:batch("8") end, 'got "8"')
  check.raises(function() ds:batch(8, {drop_remainder = "yes"}) end, 'batch: drop_remainder must be true or false, got "yes"')
  check.raises(function() ds:batch(8, {drop_remaider = true}) end, 'batch: unknown option "drop_remaider"; did you mean \'drop_remainder\'? (expected drop_remainder)')
  check.raises(function() ds:shuffle(0) end, "shuffle: the buffer size must be a positive integer, got 0")
  check.raises(function() ds:shuffle(10, {seed = "a"}) end, 'shuffle: seed must be an integer, got "a"')
  check.raises(function() ds:map(5) end, "map: expected a function, got 5")
  check.raises(function() ds:map() end, "map: expected a function, got nil")
  check.raises(function() ds:take(-1) end, "take: the number of elements must be a non-negative integer, got -1")
  check.raises(function() ds.batch(8) end, "batch: call it with a colon, ds:batch(...)")
  check.raises(function() data.range(-3) end, "range: n must be a non-negative integer, got -3")
  local msg = check.raises(function() ds:batch(-2) end, "batch:")
  check.eq(msg:match("^[^:]+%.lua:%d+: batch:") ~= nil, true, "starts with the caller's file:line: " .. msg)
end

tests["#ds is the cardinality, when a count is known"] = function()
  check.eq(#data.range(5):batch(2), 3)
  check.eq(#data.range(5):batch(2, {drop_remainder = true}), 2)
  check.eq(#data.range(0), 0)
  local msg = check.raises(function() return #data.range(2):cycle() end,
    "#ds: the data set never ends (cycle() without a count), so it has no length")
  check.is_true(msg:match("^[^:]+%.lua:%d+: #ds") ~= nil, msg)
  check.raises(function() return #counter(3) end, "#ds: the data set's length is unknown until a pass ends")
  check.raises(function() return #data.range(4):filter(function() return true end) end, "data.UNKNOWN")
end

tests["an unknown data set method is an error listing the methods"] = function()
  local ds = data.range(5):batch(2)
  local msg = check.raises(function() ds:unbatch() end,
    "a Dataset has no method unbatch (its methods: batch, cache, cardinality, cycle, element_spec, filter, iter, map, ")
  check.is_true(msg:match("^[^:]+%.lua:%d+: a Dataset") ~= nil, msg)
  check.raises(function() return ds:batchh(2) end, "a Dataset has no method batchh; did you mean 'batch'?")
  check.raises(function() return ds["repeat"](ds) end, "a Dataset has no method repeat; tpu.data calls it cycle(count)")
  -- Internal fields, the class machinery, fields a source has and others lack, and any name
  -- neither tf.data's nor near one of ours read as nil, as a missing field does.
  check.eq({ds._no_such_field, data.Dataset.super, ds[1], ds.class_names, ds.feature_names, ds.my_flag}, {})
  check.eq(ds:prefetch_stats(), nil, "a data set that is not a prefetch gathered nothing ahead")
  check.is_true(data.Dataset.is_instance(ds:map(function(x) return x end)))
end

tests["from_tensor_slices is from_tensors, as tf users know it"] = function()
  check.eq(data.from_tensor_slices, data.from_tensors)
  check.eq(collect(data.from_tensor_slices {tpu.tensor({{1, 2}, {3, 4}}, {dtype = "i32"})}), {{1, 2}, {3, 4}})
end

---------------------------------------------------------------- Fashion-MNIST

tests["fashion_mnist names the files, the place and the package when missing"] = function()
  local dir = temp_dir()
  local msg = check.raises(function() data.fashion_mnist("train", {dir = dir}) end,
    'fashion_mnist("train"): cannot find train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz] in ' .. dir)
  check.eq(msg:find("apt-get install dataset-fashion-mnist", 1, true) ~= nil, true, msg)
  check.eq(msg:find("TPUTRAIN_DATA_DIR", 1, true) ~= nil, true, msg)
  write_idx(dir .. "/t10k-images-idx3-ubyte", {1, 1, 1}, {0})
  check.raises(function() data.fashion_mnist("test", {dir = dir}) end,
    'fashion_mnist("test"): cannot find t10k-labels-idx1-ubyte[.gz] in ' .. dir)
  os.execute("rm -rf '" .. dir .. "'")
  check.raises(function() data.fashion_mnist("val") end, 'fashion_mnist: unknown split "val" (expected "train" or "test")')
  check.raises(function() data.fashion_mnist("test", {directory = "/x"}) end, 'unknown option "directory"')
end

tests["fashion_mnist reads a directory of plain IDX files"] = function()
  local dir = temp_dir()
  local pixels = {}
  for i = 1, 2 * 28 * 28 do pixels[i] = i % 256 end
  write_idx(dir .. "/t10k-images-idx3-ubyte", {2, 28, 28}, pixels)
  write_idx(dir .. "/t10k-labels-idx1-ubyte", {2}, {3, 9})
  local ds = data.fashion_mnist("test", {dir = dir})
  check.eq(ds:cardinality(), 2)
  local x, y = ds:iter()()
  check.eq(x.shape, {28, 28})
  check.eq(x.dtype, "u8")
  check.eq(y:item(), 3)
  write_idx(dir .. "/t10k-labels-idx1-ubyte", {3}, {3, 9, 1})
  check.raises(function() data.fashion_mnist("test", {dir = dir}) end, "t10k-labels-idx1-ubyte holds a tensor u8[3], expected u8[2] labels")
  os.execute("rm -rf '" .. dir .. "'")
end

tests["fashion_mnist from the installed package"] = function()
  if not have_fashion_mnist() then return end
  local test = data.fashion_mnist("test", {dir = fashion_dir})
  check.eq(test:cardinality(), 10000)
  local x, y = test:element_spec()
  check.eq(tostring(x), "u8[28,28]")
  check.eq(tostring(y), "u8[]")
  local n, max_label = 0, 0
  for xb, yb in test:batch(1000):iter() do
    check.eq(xb.shape, {1000, 28, 28})
    n = n + yb.shape[1]
    max_label = math.max(max_label, yb:max():item())
  end
  check.eq(n, 10000)
  check.eq(max_label, 9)
  local train = data.fashion_mnist("train", {dir = fashion_dir})
    :shuffle(60000, {seed = 1})
    :batch(256, {drop_remainder = true})
    :map(function(a, b) return a:cast("f32") / 255, b end)
  check.eq(train:cardinality(), 234)
  local xb, yb = train:iter()()
  check.eq(xb.shape, {256, 28, 28})
  check.eq(xb.dtype, "f32")
  check.eq(yb.shape, {256})
  check.eq(xb:max():item() <= 1, true)
end

return tests
