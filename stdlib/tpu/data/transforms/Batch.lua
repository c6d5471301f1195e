-- ds:batch(n, {drop_remainder =}): consecutive elements stacked along a new first dimension.
local Dataset = require "tpu.data.Dataset"
local structure = require "tpu.data.structure"
local streams = require "tpu.data.streams"
local batching = require "tpu.data.batching"
local prefetching = require "tpu.data.prefetching"
local core = require "tpu.core"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

local Batch = Dataset:extend("Batch")

function Batch:__init(parent, n, drop, where)
  self._parent, self._n, self._drop, self._where = parent, n, drop, where
  self._desc = parent._desc .. ":batch(" .. n .. (drop and ", {drop_remainder = true})" or ")")
end

-- A stream of lists of up to n items (indices or elements), honouring drop_remainder.
function Batch:_groups(next_item)
  local n, drop = self._n, self._drop
  return function()
    local list = streams.list(next_item, n)
    if #list == 0 or (drop and #list < n) then return nil end
    return list
  end
end

-- Batches of an in-memory source: one gather per tensor, on a background thread when a
-- prefetch downstream asks for it (ctx.prefetch) and the source can (tensors, image files),
-- with the maps right after this batch (ctx.map_chain, see Map). Otherwise indices that are a
-- run of the source's elements give views of row runs, without index lists.
function Batch:_gathered(source, epoch, ctx)
  local groups = self:_groups(self._parent:_indices(epoch))
  if ctx.prefetch and source.prefetcher then
    local order = self._parent._index_order and self._parent:_index_order(epoch)
    if order then groups = self:_order_groups(order) end
    local chain = ctx.map_chain_for == self and ctx.map_chain or nil
    ctx.maps_taken = {}
    for _, link in ipairs(chain or {}) do ctx.maps_taken[link.map] = true end
    return prefetching.batches(source, groups, ctx.prefetch, ctx, chain)
  end
  local first, count = self._parent:_index_range(epoch)
  if first and source.rows then return self:_row_runs(source, first, count) end
  return function()
    local indices = groups()
    if indices then return source:gather(indices) end
  end
end

-- Groups of the i32 vector `order` (a shuffled pass): views of its runs of n, no Lua lists.
function Batch:_order_groups(order)
  local n, drop, first, count = self._n, self._drop, 0, order.shape[1]
  return function()
    local k = math.min(n, count - first)
    if k <= 0 or (drop and k < n) then return nil end
    first = first + k
    return core.row_range(order, first - k, k)
  end
end

function Batch:_row_runs(source, first, count)
  local n, drop, stop = self._n, self._drop, first + count
  return function()
    local k = math.min(n, stop - first)
    if k <= 0 or (drop and k < n) then return nil end
    first = first + k
    return source:rows(first - k, k)
  end
end

function Batch:_elements(epoch, ctx)
  local source = self._parent:_indexed()
  if source and source.gather then return self:_gathered(source, epoch, ctx) end
  local next_element = source and Dataset._elements(self._parent, epoch)
    or self._parent:_elements(epoch, ctx)
  local groups, first = self:_groups(next_element), 0
  return function()
    local list = groups()
    if not list then return nil end
    first = first + #list
    return batching.stack(list, self._where, "batch", first - #list)
  end
end

function Batch:_count()
  local c = self._parent:_count()
  if c < 0 then return c end
  return self._drop and c // self._n or (c + self._n - 1) // self._n
end

-- Whether every batch holds n elements (so the batch dimension is static).
function Batch:_all_full()
  local c = self._parent:_count()
  return self._drop or c == Dataset.INFINITE or (c >= 0 and c % self._n == 0)
end

function Batch:_spec()
  local n, all_full = self._n, self:_all_full()
  local spec = batching.check_spec(self._parent:_spec(), self._where, "batch")
  return structure.map_spec(spec, function(leaf)
    return structure.spec_leaf({all_full and n or -1, table.unpack(leaf.shape)}, leaf.dtype,
      {n, table.unpack(leaf._full)})
  end)
end

-- Stacks n consecutive elements into one (a new first dimension of size n); the last batch
-- of a pass may be smaller unless {drop_remainder = true} drops it. Elements must have equal
-- shapes (padded_batch pads elements of different shapes).
function Dataset:batch(n, opts, extra)
  errors.none(3, "batch", extra)
  Dataset._check_self(self, "batch")
  n = args.integer(n, "batch", "the batch size", 1)
  opts = args.options(opts, "batch", {"drop_remainder"})
  local drop = opts.drop_remainder
  if drop ~= nil then args.boolean(drop, "batch", "drop_remainder") end
  return Batch(self, n, drop or false, args.where())
end

return Batch
