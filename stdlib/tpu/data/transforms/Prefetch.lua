-- ds:prefetch(n): prepares the next n batches while the caller's step runs.
local Dataset = require "tpu.data.Dataset"
local Transform = require "tpu.data.transforms.Transform"

local Prefetch = Transform:extend("Prefetch")

function Prefetch:_stream(upstream, epoch) return upstream(epoch) end

-- Asks the nodes upstream to work ahead.
function Prefetch:_elements(epoch, ctx)
  if self:_indexed() then return Dataset._elements(self, epoch) end
  if self._n == 0 then return self._parent:_elements(epoch, ctx) end
  local inner = setmetatable({prefetch = self._n}, {__index = ctx})
  self._last = inner
  return self._parent:_elements(epoch, inner)
end

-- How the background gather of the latest pass went: {batches, ready, gather_ms, map_ms, wait_ms}
-- (ready: batches already gathered when the loop asked for them; wait_ms: time the loop
-- waited for the thread), or nil when this prefetch runs no background gather.
function Prefetch:prefetch_stats()
  local stats = self._last and rawget(self._last, "stats")
  return stats and stats()
end

-- Overlaps input preparation with the training step. When the pipeline batches an
-- in-memory source (from_tensors, idx, fashion_mnist, npy, csv, or anything after cache())
-- and then only maps, as in `ds:shuffle(n):batch(b):map(f):prefetch(2)`, the gathers of
-- the next n batches run on a background C++ thread while the step runs, and so do the
-- compiled maps right after the batch (tpu.data.prefetching). Elsewhere (generators, text,
-- padded_batch, a prefetch before batch) prefetch passes elements through unchanged. n = 0
-- turns it off.
Transform._counted(Prefetch, "prefetch", "the buffer size")

return Prefetch
