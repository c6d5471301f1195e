-- ds:skip(n): each pass without its first n elements.
local Transform = require "tpu.data.transforms.Transform"
local streams = require "tpu.data.streams"

local Skip = Transform:extend("Skip")
Transform._counted(Skip, "skip", "the number of elements")

function Skip:_stream(upstream, epoch) return streams.skip(upstream(epoch), self._n) end

function Skip:_count()
  local c = self._parent:_count()
  if c < 0 then return c end
  return math.max(0, c - self._n)
end

return Skip
