-- ds:take(n): the first n elements of each pass.
local Dataset = require "tpu.data.Dataset"
local Transform = require "tpu.data.transforms.Transform"
local streams = require "tpu.data.streams"

local Take = Transform:extend("Take")
Transform._counted(Take, "take", "the number of elements")

function Take:_stream(upstream, epoch) return streams.limit(upstream(epoch), self._n) end

function Take:_count()
  local c = self._parent:_count()
  if c == Dataset.INFINITE then return self._n end
  if c == Dataset.UNKNOWN then return c end
  return math.min(c, self._n)
end

return Take
