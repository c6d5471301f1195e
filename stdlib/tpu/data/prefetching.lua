-- The background gather behind prefetch(n): a C++ BatchPrefetcher (engine/data/prefetch.h)
-- copies the rows of the next batches from the source tensors on its own thread while the
-- training step runs; Lua only hands it index lists and takes finished batches.
local structure = require "tpu.data.structure"

local M = {}

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

-- A stream of batches of `source` (a TensorSource) for the index lists of `groups`, with
-- up to `depth` batches gathered ahead. ctx.stats() then tells how the gathering went:
-- {batches, ready (batches already gathered when asked for), gather_ms, wait_ms}. The thread
-- ends with the pass (or when the stream is garbage).
function M.batches(source, groups, depth, ctx)
  local p = tpu.core.batch_prefetcher(structure.flatten(source.components), depth)
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
    return structure.unflatten(source.components, leaves)
  end
end

return M
