-- Which traced maps fit may move into its train step. In
-- `batch(n, {drop_remainder = true}):map(f):prefetch(2):cycle()` over an in-memory source, the
-- prefetch thread would run f's compiled executable beside the training step, whose kernels use
-- every core; fit instead takes the gathered, unmapped batches (Dataset:_iter_with with
-- ctx.skip_maps) and traces f at the start of its step, so the conversion runs inside the step,
-- on all its threads, with the same ops and so the same numbers.
local M = {}

-- The maps (innermost first) of `ds` that fit can apply in its step, or nil: ds is prefetch(n >
-- 0) and cycle nodes over one or more traced maps without a random key ({seed =}) right after a
-- batch of an in-memory source that the prefetch thread gathers, every batch of it full (so
-- no batch is padded: a padded batch mapped is not the mapped batch padded).
function M.maps(ds)
  local Prefetch = require "tpu.data.transforms.Prefetch"
  local Cycle = require "tpu.data.transforms.Cycle"
  local Map = require "tpu.data.transforms.Map"
  local Batch = require "tpu.data.transforms.Batch"
  local node, prefetched = ds, false
  while getmetatable(node) == Prefetch or getmetatable(node) == Cycle do
    if getmetatable(node) == Prefetch then
      if node._n == 0 or node:_indexed() then return nil end
      prefetched = true
    end
    node = node._parent
  end
  if not prefetched then return nil end
  local maps = {}
  while getmetatable(node) == Map do
    if node._seed ~= nil then return nil end
    table.insert(maps, 1, node)
    node = node._parent
  end
  if #maps == 0 or getmetatable(node) ~= Batch or not node:_all_full() then return nil end
  local source = node._parent:_indexed()
  if not (source and source.gather and source.prefetcher) then return nil end
  return maps
end

-- The element `e` (a list of components) mapped by `maps`, as Map:_elements maps it: traced
-- inside a step, or eagerly.
function M.apply(maps, e)
  for _, map in ipairs(maps) do e = map:_apply(table.pack(map:_arguments(e, 0, 0))) end
  return e
end

return M
