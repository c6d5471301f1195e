-- Transform: the base of nodes whose elements are some of their parent's, in some order
-- (shuffle, take, skip, shard, filter, cycle, cache, prefetch). Such a node stays indexed
-- when its parent is. Subclasses define `_stream(upstream, epoch)`, where upstream(e) opens
-- the parent's stream for epoch e: of source indices when indexed, else of elements.
local Dataset = require "tpu.data.Dataset"

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

return Transform
