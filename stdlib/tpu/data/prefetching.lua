-- The background gather behind prefetch(n): a C++ BatchPrefetcher (engine/data/prefetch.h)
-- copies the rows of the next batches from the source tensors (or decodes an image folder's
-- files) on its own thread while the training step runs; Lua only hands it index lists and
-- takes finished batches. A source that can do this has prefetcher(depth) (the C++ object)
-- and from_leaves(list) (its batch from the list of tensors the object returns).
local M = {}

-- A stream of batches of `source` for the index lists of `groups`, with
-- up to `depth` batches gathered ahead. ctx.stats() then tells how the gathering went:
-- {batches, ready (batches already gathered when asked for), gather_ms, wait_ms}. The thread
-- ends with the pass (or when the stream is garbage).
function M.batches(source, groups, depth, ctx)
  local p = source:prefetcher(depth)
  local final
  ctx.stats = function() return final or p:stats() end
  local done = false
  local function refill()
    while not done and p:pending() < depth do
      local indices = groups()
      if indices then p:push(indices) else done = true end
    end
  end
  return function()
    refill()
    if final then return nil end
    local leaves = p:pop()
    if leaves == nil then
      final = p:stats()
      p:close()
      return nil
    end
    refill()  -- keep `depth` batches in preparation during the caller's step
    return source:from_leaves(leaves)
  end
end

return M
