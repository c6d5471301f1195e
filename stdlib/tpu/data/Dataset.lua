-- Dataset: a pipeline of a source and transforms, iterated one pass (epoch) at a time.
--
--   local train = data.fashion_mnist("train")
--     :shuffle(60000, {seed = 1}):batch(256, {drop_remainder = true})
--     :map(function(x, y) return x:cast("f32") / 255, y end)
--   for x, y in train:iter() do ... end       -- x f32[256,28,28], y u8[256]
--
-- An element is a list of components (`x, y`); a component is a tensor or a nested table of
-- tensors. Every node answers two questions. `_indexed()`: is each of my elements an element
-- of an in-memory source? If so, `_indices(epoch)` streams 0-based source indices, and
-- shuffle, take, skip and cycle work on those integers; batch then gathers a whole batch with
-- one `take` per tensor. Otherwise `_elements(epoch)` streams elements (after map, filter,
-- batch, or from a generator). Iterators keep returning nil once exhausted.
local class = require "tpu.class"
local structure = require "tpu.data.structure"
local random = require "tpu.data.random"
local streams = require "tpu.data.streams"
local args = require "tpu.data.args"

-- "tpu" loads this module, so reach it lazily.
local tpu = setmetatable({}, {__index = function(_, k) return require("tpu")[k] end})

local Dataset = class("Dataset")

-- cardinality() results besides a count (the tf.data values).
Dataset.INFINITE = -1
Dataset.UNKNOWN = -2

Dataset.__tostring = function(self) return "Dataset " .. self._desc end
-- `for x, y in ds do` (without :iter()) would call the data set.
Dataset.__call = function()
  args.fail("a Dataset is not an iterator; write `for x, y in ds:iter() do`")
end

---------------------------------------------------------------- node defaults

function Dataset:_indexed() return nil end

-- Elements of an indexed node: its source's element at each index (one slice per tensor).
function Dataset:_elements(epoch)
  local source = self:_indexed()
  local next_index = self:_indices(epoch)
  return function()
    local i = next_index()
    if i ~= nil then return source:get(i) end
  end
end

---------------------------------------------------------------- public API

local function check_self(self, method)
  if not (type(self) == "table" and Dataset.is_instance(self)) then
    args.fail("%s: call it with a colon, ds:%s(...)", method, method)
  end
end

-- Iterates one pass: `for x, y in ds:iter() do` (one value per component). Each call starts
-- the next epoch (which reshuffles); {epoch = e} picks the epoch (0-based) explicitly.
function Dataset:iter(opts)
  check_self(self, "iter")
  opts = args.options(opts, "iter", {"epoch"})
  local epoch = self._epoch or 0
  if opts.epoch ~= nil then epoch = args.integer(opts.epoch, "iter", "epoch", 0) end
  self._epoch = epoch + 1
  local next_element = self:_elements(epoch)
  return function()
    local e = next_element()
    if e ~= nil then return table.unpack(e, 1, #e) end
  end
end

-- Number of elements of one pass, or Dataset.INFINITE (-1) or Dataset.UNKNOWN (-2).
function Dataset:cardinality()
  check_self(self, "cardinality")
  return self:_count()
end

-- One spec per component (as iter returns one value per component); a tensor's spec is
-- {shape = {...}, dtype = "u8"}, shape -1 where elements differ (a possibly smaller last
-- batch); nested components give nested tables of specs.
function Dataset:element_spec()
  check_self(self, "element_spec")
  return table.unpack(self:_spec())
end

---------------------------------------------------------------- sources

local SourceDataset = Dataset:extend("SourceDataset")
Dataset.SourceDataset = SourceDataset

-- source: an indexable source (tpu.data.sources); desc: how the user made it.
function SourceDataset:__init(source, desc)
  self._source, self._desc = source, desc
end

function SourceDataset:_indexed() return self._source end

function SourceDataset:_indices()
  local n, i = self._source.n, -1
  return function()
    if i + 1 < n then
      i = i + 1
      return i
    end
  end
end

function SourceDataset:_count() return self._source.n end

function SourceDataset:_spec() return self._source:spec() end

local GeneratorDataset = Dataset:extend("GeneratorDataset")
Dataset.GeneratorDataset = GeneratorDataset

function GeneratorDataset:__init(fn)
  self._fn, self._desc = fn, "generator(fn)"
end

local function as_tensor(v)
  if math.type(v) == "integer" then return tpu.tensor(v, {dtype = "i32"}) end
  if type(v) == "number" then return tpu.tensor(v) end
  return v
end

function GeneratorDataset:_elements()
  local it = self._fn()
  if type(it) ~= "function" then
    args.fail("generator: the function must return an iterator (a function returning one "
      .. "element per call and nil at the end), got %s", args.show(it))
  end
  local done = false
  return function()
    if done then return nil end
    local e = table.pack(it())
    if e[1] == nil then done = true return nil end
    for i = 1, e.n do e[i] = structure.map(e[i], as_tensor) end
    e.n = nil
    return e
  end
end

function GeneratorDataset:_count() return Dataset.UNKNOWN end

function GeneratorDataset:_spec()
  local first = self:_elements(0)()
  return first and structure.spec_of(first) or {}
end

---------------------------------------------------------------- same-element transforms

-- A node whose elements are some of its parent's, reordered: it stays indexed when the
-- parent is. Subclasses define `_stream(upstream, epoch)`, where upstream(e) opens the
-- parent's stream (of indices or of elements alike) for epoch e.
local Transform = Dataset:extend("Transform")

function Transform:__init(parent, desc)
  self._parent, self._desc = parent, parent._desc .. ":" .. desc
end

function Transform:_indexed() return self._parent:_indexed() end
function Transform:_count() return self._parent:_count() end
function Transform:_spec() return self._parent:_spec() end

function Transform:_indices(epoch)
  return self:_stream(function(e) return self._parent:_indices(e) end, epoch)
end

function Transform:_elements(epoch)
  if self:_indexed() then return Dataset._elements(self, epoch) end
  return self:_stream(function(e) return self._parent:_elements(e) end, epoch)
end

local Shuffle = Transform:extend("Shuffle")

function Shuffle:__init(parent, buffer, seed, reshuffle)
  Transform.__init(self, parent, string.format("shuffle(%d, {seed = %d})", buffer, seed))
  self._buffer, self._seed, self._reshuffle = buffer, seed, reshuffle
end

function Shuffle:_stream(upstream, epoch)
  local stream_epoch = self._reshuffle and epoch or 0
  return streams.shuffled(upstream(epoch), self._buffer, random.stream(self._seed, stream_epoch))
end

-- Without {seed =}: the --seed of the command line, else 0; runs are reproducible either way.
local function default_seed()
  local seed = (tpu.options or {}).seed
  return math.type(seed) == "integer" and seed >= 0 and seed or 0
end

-- Buffer shuffle (streams.shuffled); a buffer >= the data set's size gives a uniform
-- permutation.
-- Each pass (epoch) is shuffled differently, determined by the seed and the epoch number,
-- unless {reshuffle_each_iteration = false}.
function Dataset:shuffle(buffer, opts)
  check_self(self, "shuffle")
  buffer = args.integer(buffer, "shuffle", "the buffer size", 1)
  opts = args.options(opts, "shuffle", {"seed", "reshuffle_each_iteration"})
  local seed = opts.seed == nil and default_seed() or args.integer(opts.seed, "shuffle", "seed")
  local reshuffle = opts.reshuffle_each_iteration
  if reshuffle == nil then reshuffle = true end
  args.boolean(reshuffle, "shuffle", "reshuffle_each_iteration")
  return Shuffle(self, buffer, seed, reshuffle)
end

local Take = Transform:extend("Take")

function Take:__init(parent, n)
  Transform.__init(self, parent, "take(" .. n .. ")")
  self._n = n
end

function Take:_stream(upstream, epoch) return streams.limit(upstream(epoch), self._n) end

function Take:_count()
  local c = self._parent:_count()
  if c == Dataset.INFINITE then return self._n end
  if c == Dataset.UNKNOWN then return c end
  return math.min(c, self._n)
end

function Dataset:take(n)
  check_self(self, "take")
  return Take(self, args.integer(n, "take", "the number of elements", 0))
end

local Skip = Transform:extend("Skip")

function Skip:__init(parent, n)
  Transform.__init(self, parent, "skip(" .. n .. ")")
  self._n = n
end

function Skip:_stream(upstream, epoch) return streams.skip(upstream(epoch), self._n) end

function Skip:_count()
  local c = self._parent:_count()
  if c < 0 then return c end
  return math.max(0, c - self._n)
end

function Dataset:skip(n)
  check_self(self, "skip")
  return Skip(self, args.integer(n, "skip", "the number of elements", 0))
end

local Cycle = Transform:extend("Cycle")

function Cycle:__init(parent, count)
  Transform.__init(self, parent, count and "cycle(" .. count .. ")" or "cycle()")
  self._count_n = count
end

-- Passes of the parent one after another; pass r of epoch e is the parent's epoch
-- e * count + r, so shuffles upstream reshuffle every pass.
function Cycle:_stream(upstream, epoch)
  local count = self._count_n
  local first = count and epoch * count or epoch << 32
  local r, it, got = 0, nil, false
  return function()
    while true do
      if not it then
        if count and r >= count then return nil end
        it, got, r = upstream(first + r), false, r + 1
      end
      local v = it()
      if v ~= nil then
        got = true
        return v
      end
      it = nil
      if not got then count = 0 return nil end  -- an empty pass: stop rather than spin
    end
  end
end

function Cycle:_count()
  local c = self._parent:_count()
  if c == 0 or self._count_n == 0 then return 0 end
  if not self._count_n then return c == Dataset.UNKNOWN and c or Dataset.INFINITE end
  if c < 0 then return c end
  return c * self._count_n
end

-- Repeats the data set `count` times (forever when nil); Lua reserves the name `repeat`.
function Dataset:cycle(count)
  check_self(self, "cycle")
  if count ~= nil then count = args.integer(count, "cycle", "the count", 0) end
  return Cycle(self, count)
end

-- Reading ahead on another thread is not implemented yet: the pipeline is unchanged.
function Dataset:prefetch(n)
  check_self(self, "prefetch")
  args.integer(n, "prefetch", "the buffer size", 0)
  return self
end

---------------------------------------------------------------- batch

local Batch = Dataset:extend("Batch")

function Batch:__init(parent, n, drop)
  self._parent, self._n, self._drop = parent, n, drop
  self._desc = parent._desc .. ":batch(" .. n .. (drop and ", {drop_remainder = true})" or ")")
end

-- Stacks a list of elements into one, tensor by tensor.
local function stack(elements)
  return structure.zip(elements, function(leaves) return tpu.stack(leaves, 1) end)
end

function Batch:_elements(epoch)
  local n, drop, source = self._n, self._drop, self._parent:_indexed()
  local next_item, make
  if source then
    next_item = self._parent:_indices(epoch)
    make = function(indices) return source:gather(indices) end
  else
    next_item, make = self._parent:_elements(epoch), stack
  end
  return function()
    local list = streams.list(next_item, n)
    if #list == 0 or (drop and #list < n) then return nil end
    return make(list)
  end
end

function Batch:_count()
  local c = self._parent:_count()
  if c < 0 then return c end
  return self._drop and c // self._n or (c + self._n - 1) // self._n
end

function Batch:_spec()
  local c = self._parent:_count()
  local all_full = self._drop or c == Dataset.INFINITE or (c >= 0 and c % self._n == 0)
  local n = self._n
  return structure.map_spec(self._parent:_spec(), function(leaf)
    return structure.spec_leaf({all_full and n or -1, table.unpack(leaf.shape)}, leaf.dtype,
      {n, table.unpack(leaf._full)})
  end)
end

function Dataset:batch(n, opts)
  check_self(self, "batch")
  n = args.integer(n, "batch", "the batch size", 1)
  opts = args.options(opts, "batch", {"drop_remainder"})
  local drop = opts.drop_remainder
  if drop ~= nil then args.boolean(drop, "batch", "drop_remainder") end
  return Batch(self, n, drop or false)
end

---------------------------------------------------------------- map and filter

local Map = Dataset:extend("Map")

function Map:__init(parent, fn)
  self._parent, self._desc = parent, parent._desc .. ":map(fn)"
  -- Results as a list, so any number of components comes back as one structure.
  self._fn = tpu.jit(function(...) return {fn(...)} end, {name = "data.map"})
end

function Map:_elements(epoch)
  local next_element, fn = self._parent:_elements(epoch), self._fn
  return function()
    local e = next_element()
    if e == nil then return nil end
    local out = fn(table.unpack(e, 1, #e))
    if out[1] == nil then args.fail("map: the function returned no tensors") end
    return out
  end
end

function Map:_count() return self._parent:_count() end

-- Runs fn once on zeros shaped like a full element of the parent. Result dimensions equal to
-- a parent dimension that varies (a smaller last batch) are taken to vary too.
function Map:_spec()
  if self._spec_cache then return self._spec_cache end
  local in_spec = self._parent:_spec()
  local varying = {}
  local zeros = structure.map_spec(in_spec, function(leaf)
    if leaf.shape[1] == -1 then varying[leaf._full[1]] = true end
    return tpu.zeros(leaf._full, {dtype = leaf.dtype})
  end)
  local out = self._fn(table.unpack(zeros, 1, #zeros))
  self._spec_cache = structure.map(out, function(t)
    local full = t.shape
    local shape = {table.unpack(full)}
    if varying[shape[1]] then shape[1] = -1 end
    return structure.spec_leaf(shape, t.dtype, full)
  end)
  return self._spec_cache
end

-- Applies fn to every element; fn(x, y) returns the new components and is traced and
-- compiled once per element signature (tpu.jit), so it must be traceable.
function Dataset:map(fn)
  check_self(self, "map")
  return Map(self, args.func(fn, "map"))
end

local Filter = Dataset:extend("Filter")

function Filter:__init(parent, pred)
  self._parent, self._desc = parent, parent._desc .. ":filter(fn)"
  self._pred = tpu.jit(pred, {name = "data.filter"})
end

local function truthy(v)
  if tpu.is_tensor(v) then v = v:item() end
  return v == true or (type(v) == "number" and v ~= 0)
end

function Filter:_elements(epoch)
  local next_element, pred = self._parent:_elements(epoch), self._pred
  return function()
    for e in next_element do
      if truthy(pred(table.unpack(e, 1, #e))) then return e end
    end
  end
end

function Filter:_count() return Dataset.UNKNOWN end
function Filter:_spec() return self._parent:_spec() end

-- Keeps the elements for which pred(x, y) returns a true scalar (traced like map).
function Dataset:filter(pred)
  check_self(self, "filter")
  return Filter(self, args.func(pred, "filter"))
end

return Dataset
