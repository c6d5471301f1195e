-- ds:shuffle(buffer, {seed =, reshuffle_each_iteration =}): the buffer shuffle.
local Dataset = require "tpu.data.Dataset"
local Transform = require "tpu.data.transforms.Transform"
local random = require "tpu.data.random"
local core = require "tpu.core"
local streams = require "tpu.data.streams"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

local Shuffle = Transform:extend("Shuffle")

function Shuffle:__init(parent, buffer, seed, reshuffle)
  Transform.__init(self, parent, string.format("shuffle(%d, {seed = %d})", buffer, seed))
  self._buffer, self._seed, self._reshuffle = buffer, seed, reshuffle
end

-- The epoch whose random stream shuffles pass `epoch`: the first one's again without reshuffling.
function Shuffle:_stream_epoch(epoch) return self._reshuffle and epoch or 0 end

function Shuffle:_stream(upstream, epoch)
  return streams.shuffled(upstream(epoch), self._buffer, random.stream(self._seed, self:_stream_epoch(epoch)))
end

-- (Batch, under prefetch) The whole pass's indices as an i32 vector, made in C++ in one call,
-- when the indices shuffled are the source's as they are (first, first + 1, ...); else nil.
-- The same order as _indices (streams.shuffled with the same stream).
function Shuffle:_index_order(epoch)
  local first, count = self._parent:_index_range(epoch)
  if not first then return nil end
  return core.buffer_shuffle(first, count, self._buffer, self._seed, self:_stream_epoch(epoch))
end

-- Buffer shuffle (streams.shuffled); a buffer >= the data set's size gives a uniform
-- permutation. Each pass (epoch) is shuffled differently, determined by the seed and the
-- epoch number, unless {reshuffle_each_iteration = false}.
function Dataset:shuffle(buffer, opts, extra)
  errors.none(3, "shuffle", extra)
  Dataset._check_self(self, "shuffle")
  buffer = args.integer(buffer, "shuffle", "the buffer size", 1)
  opts = args.options(opts, "shuffle", {"seed", "reshuffle_each_iteration"})
  local seed = opts.seed == nil and random.default_seed() or args.integer(opts.seed, "shuffle", "seed")
  local reshuffle = opts.reshuffle_each_iteration
  if reshuffle == nil then reshuffle = true end
  args.boolean(reshuffle, "shuffle", "reshuffle_each_iteration")
  return Shuffle(self, buffer, seed, reshuffle)
end

return Shuffle
