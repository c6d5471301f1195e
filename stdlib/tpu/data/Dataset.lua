-- Dataset: a pipeline of a source and transforms, iterated one pass (epoch) at a time.
--
--   local train = data.fashion_mnist("train")
--     :shuffle(60000, {seed = 1}):batch(256, {drop_remainder = true})
--     :map(function(x, y) return x:cast("f32") / 255, y end)
--   for x, y in train:iter() do ... end       -- x f32[256,28,28], y u8[256]
--
-- An element is a list of components (`x, y`); a component is a tensor, a Lua string (text
-- sources) or a nested table of them. Every node (one class per file in tpu/data/transforms)
-- answers these questions:
--   _indexed()            is each of my elements an element of an in-memory source? If so,
--                         the source (tpu.data.sources), else nil.
--   _indices(epoch)       (indexed nodes) a stream of 0-based source indices; shuffle, take,
--                         skip, shard, filter and cycle work on those integers, and batch then
--                         gathers a whole batch with one copy per tensor.
--   _index_range(epoch)   (indexed nodes) first, count when the indices are first, first + 1,
--                         ... (the source as it is): batch then takes views of row runs.
--   _elements(epoch, ctx) a stream of elements. ctx.prefetch = n asks a batch below to gather
--                         on a background thread (prefetch); element-wise nodes pass ctx on.
--   _count(), _spec()     cardinality and element spec.
-- Streams are functions returning the next item and nil at the end (and after).
local class = require "tpu.class"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

local Dataset = class("Dataset")

-- cardinality() results besides a count.
Dataset.INFINITE = -1
Dataset.UNKNOWN = -2

Dataset.__tostring = function(self) return "Dataset " .. self._desc end
-- `for x, y in ds do` (without :iter()) would call the data set.
Dataset.__call = function()
  args.fail("a Dataset is not an iterator; write `for x, y in ds:iter() do`")
end

---------------------------------------------------------------- node defaults

function Dataset:_indexed() return nil end
function Dataset:_index_range() return nil end

-- Elements of an indexed node: its source's element at each index.
function Dataset:_elements(epoch)
  local source = self:_indexed()
  local next_index = self:_indices(epoch)
  return function()
    local i = next_index()
    if i ~= nil then return source:get(i) end
  end
end

---------------------------------------------------------------- public API

-- Raises the error users see when they write ds.batch(...) instead of ds:batch(...).
function Dataset._check_self(self, method)
  if not (type(self) == "table" and Dataset.is_instance(self)) then
    args.fail("%s: call it with a colon, ds:%s(...)", method, method)
  end
end

-- Iterates one pass: `for x, y in ds:iter() do` (one value per component). Each call starts
-- the next epoch (which reshuffles); {epoch = e} picks the epoch (0-based) explicitly.
function Dataset:iter(opts, extra)
  errors.none(2, "iter", extra)
  Dataset._check_self(self, "iter")
  opts = args.options(opts, "iter", {"epoch"})
  local epoch = self._epoch or 0
  if opts.epoch ~= nil then epoch = args.integer(opts.epoch, "iter", "epoch", 0) end
  return self:_iter_with(epoch, {})
end

-- The pass of `epoch` (the next one when nil) iterated with ctx (fit's ctx.skip_maps: see
-- tpu.data.fusing); `packed`: the iterator returns each element as its list of components.
function Dataset:_iter_with(epoch, ctx, packed)
  epoch = epoch or self._epoch or 0
  self._epoch = epoch + 1
  local next_element = self:_elements(epoch, ctx)
  if packed then return next_element end
  return function()
    local e = next_element()
    if e ~= nil then return table.unpack(e, 1, #e) end
  end
end

-- Number of elements of one pass, or Dataset.INFINITE (-1) or Dataset.UNKNOWN (-2).
function Dataset:cardinality(extra)
  errors.none(1, "cardinality", extra)
  Dataset._check_self(self, "cardinality")
  return self:_count()
end

-- One spec per component (as iter returns one value per component); a tensor's spec is
-- {shape = {...}, dtype = "u8"}, shape -1 where elements differ (a possibly smaller last
-- batch, a padded length); a string's is {shape = {}, dtype = "string"}; nested components
-- give nested tables of specs.
function Dataset:element_spec(extra)
  errors.none(1, "element_spec", extra)
  Dataset._check_self(self, "element_spec")
  return table.unpack(self:_spec())
end

-- How the background gather of the latest pass went (Prefetch's override); nil here, as no
-- prefetch(n) ran. Every data set has it, so `ds.prefetch_stats and ds:prefetch_stats()`, as
-- a script may probe it, does not reach the unknown-name error below.
function Dataset:prefetch_stats(extra)
  errors.none(1, "prefetch_stats", extra)
  Dataset._check_self(self, "prefetch_stats")
  return nil
end

-- `#ds`: the number of elements of one pass, as cardinality(); an endless data set or one whose
-- count only a pass can tell has none (Keras's len(ds) raises for them too).
Dataset.__len = function(self)
  local n = self:_count()
  if n == Dataset.INFINITE then
    args.fail("#ds: the data set never ends (cycle() without a count), so it has no length")
  elseif n < 0 then
    args.fail("#ds: the data set's length is unknown until a pass ends (a generator or filter "
      .. "decides it); ds:cardinality() returns data.UNKNOWN for it")
  end
  return n
end

-- The public methods every data set has, sorted (the class helpers aside).
local function method_names()
  local names = {}
  for k, v in pairs(Dataset) do
    if type(v) == "function" and type(k) == "string" and not k:match("^_")
       and k ~= "extend" and k ~= "is_instance" then
      names[#names + 1] = k
    end
  end
  table.sort(names)
  return names
end

-- Hints for tf.data's names: one that has another name here, and one whose closest name
-- here (batch) does the opposite.
local tf_hints = {["repeat"] = "; tpu.data calls it cycle(count)", unbatch = ""}

-- tf.data.Dataset's methods: a script ported from it calls them.
local tf_methods = {}
for name in ([[apply as_numpy_iterator batch bucket_by_sequence_length cache cardinality
    concatenate element_spec enumerate filter flat_map get_single_element group_by_window
    interleave map options padded_batch prefetch ragged_batch rebatch reduce rejection_resample
    repeat save scan shard shuffle skip snapshot sparse_batch take take_while unbatch unique
    window with_options zip]]):gmatch("%S+") do
  tf_methods[name] = true
end

-- A name no data set class has is nil, as a missing field is (`if ds.class_names then`), except
-- a tf.data method (ds:unbatch()) or a near miss of one of ours (ds:shufle()): those are errors
-- listing the methods, rather than "attempt to call a nil value". Names starting with "_",
-- the class machinery's `super` and non-string keys are never errors.
getmetatable(Dataset).__index = function(_, key)
  if type(key) ~= "string" or key:match("^_") or key == "super" then return nil end
  local names = method_names()
  local hint = tf_hints[key] or errors.did_you_mean(key, names)
  if not tf_methods[key] and hint == "" then return nil end
  args.fail("a Dataset has no method %s%s (its methods: %s)", key, hint, table.concat(names, ", "))
end

---------------------------------------------------------------- in-memory sources

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

function SourceDataset:_index_range() return 0, self._source.n end

function SourceDataset:_count() return self._source.n end

function SourceDataset:_spec() return self._source:spec() end

return Dataset
