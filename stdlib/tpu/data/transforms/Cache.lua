-- ds:cache(): one pass kept in memory, replayed by every later pass.
local Dataset = require "tpu.data.Dataset"
local Transform = require "tpu.data.transforms.Transform"
local sources = require "tpu.data.sources"
local streams = require "tpu.data.streams"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

local Cache = Transform:extend("Cache")

function Cache:__init(parent, where)
  Transform.__init(self, parent, "cache()")
  self._where = where
end

-- Reads the parent's first pass (epoch 0) once. An indexed parent keeps its source and the
-- order of that pass; other elements become a new source (one tensor per component when
-- their shapes agree, so later batches are single gathers).
function Cache:_fill()
  if self._source then return end
  if self._parent:_count() == Dataset.INFINITE then
    args.fail_at(self._where, "cache: %s is infinite and cannot be held in memory; cache "
      .. "before cycle(): ds:cache():cycle()", self._parent._desc)
  end
  local parent_source = self._parent:_indexed()
  if parent_source then
    self._source, self._order = parent_source, streams.collect(self._parent:_indices(0))
  else
    local elements = streams.collect(self._parent:_elements(0, {}))
    self._source = sources.from_elements(elements, function() return self._parent:_spec() end)
  end
end

function Cache:_indexed()
  self:_fill()
  return self._source
end

function Cache:_indices()
  self:_fill()
  local order, n, k = self._order, self._order and #self._order or self._source.n, 0
  return function()
    if k >= n then return nil end
    k = k + 1
    return order and order[k] or k - 1
  end
end

-- Once filled with elements of its own, the exact spec of those (sizes that differ are -1).
function Cache:_spec()
  if self._source and not self._order then return self._source:spec() end
  return self._parent:_spec()
end

function Cache:_count()
  if self._source then return self._order and #self._order or self._source.n end
  return self._parent:_count()
end

-- Keeps the elements of the first pass in memory and replays them on every later pass, so
-- the work upstream (reading and parsing files, map functions, encoding text) runs once.
-- The first iteration reads the whole pass before yielding anything. The cached data set
-- is in memory like from_tensors: shuffle, batch and prefetch after it are cheap. An
-- upstream shuffle is frozen (every pass replays the first order): shuffle after cache.
function Dataset:cache(extra)
  errors.none(1, "cache", extra)
  Dataset._check_self(self, "cache")
  return Cache(self, args.where())
end

return Cache
