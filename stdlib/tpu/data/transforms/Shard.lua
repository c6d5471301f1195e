-- ds:shard(n, i): every n-th element starting at position i, for one of n workers.
local Dataset = require "tpu.data.Dataset"
local Transform = require "tpu.data.transforms.Transform"
local streams = require "tpu.data.streams"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

local Shard = Transform:extend("Shard")

function Shard:__init(parent, n, i)
  Transform.__init(self, parent, string.format("shard(%d, %d)", n, i))
  self._n, self._i = n, i
end

function Shard:_stream(upstream, epoch) return streams.every(upstream(epoch), self._n, self._i) end

function Shard:_count()
  local c = self._parent:_count()
  if c < 0 then return c end
  return math.max(0, (c - self._i + self._n - 1) // self._n)
end

-- Keeps the elements at positions i, i + n, i + 2n, ... of each pass: shard i of n.
-- i is 0-based, like an MPI rank: worker `rank` of `size` writes ds:shard(size, rank), and
-- the n shards together hold every element exactly once. Shard before shuffling and
-- batching, so that each worker reads a disjoint part; with a shuffle upstream, give every
-- worker the same seed.
function Dataset:shard(n, i, extra)
  errors.none(3, "shard", extra)
  Dataset._check_self(self, "shard")
  n = args.integer(n, "shard", "the number of shards", 1)
  i = args.integer(i, "shard", "the shard index", 0)
  if i >= n then
    args.fail("shard: the shard index must be in 0 .. %d (0-based, like an MPI rank), got %d",
      n - 1, i)
  end
  return Shard(self, n, i)
end

return Shard
