-- Transform: the base of nodes whose elements are some of their parent's, in some order
-- (shuffle, take, skip, shard, filter, cycle, cache, prefetch). Such a node stays indexed
-- when its parent is. Subclasses define `_stream(upstream, epoch)`, where upstream(e) opens
-- the parent's stream for epoch e: of source indices when indexed, else of elements.
local Dataset = require "tpu.data.Dataset"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

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

function Transform:_elements(epoch, ctx)
  if self:_indexed() then return Dataset._elements(self, epoch) end
  return self:_stream(function(e) return self._parent:_elements(e, ctx) end, epoch)
end

-- The element an item of the stream stands for (the item itself unless indexed).
function Transform:_element_of(item)
  local source = self:_indexed()
  return source and source:get(item) or item
end

-- Makes Class a transform of one count n (take, skip, prefetch), described "name(n)" and kept
-- in self._n, and defines ds:name(n) making it (n a non-negative integer; `what` says what
-- it counts in errors).
function Transform._counted(Class, name, what)
  function Class:__init(parent, n)
    Transform.__init(self, parent, name .. "(" .. n .. ")")
    self._n = n
  end
  Dataset[name] = function(ds, n, extra)
    errors.none(2, name, extra)
    Dataset._check_self(ds, name)
    return Class(ds, args.integer(n, name, what, 0))
  end
end

return Transform
