-- ds:take(n): the first n elements of each pass.
local Dataset = require "tpu.data.Dataset"
local Transform = require "tpu.data.transforms.Transform"
local streams = require "tpu.data.streams"
local args = require "tpu.data.args"

local Take = Transform:extend("Take")

function Take:__init(parent, n)
  Transform.__init(self, parent, "take(" .. n .. ")")
  self._n = n
end

function Take:_stream(upstream, epoch) return streams.limit(upstream(epoch), self._n) end

function Take:_count()
  local c = self._parent:_count()
  if c == Dataset.INFINITE then return self._n end
  if c == Dataset.UNKNOWN then return c end
  return math.min(c, self._n)
end

function Dataset:take(n, extra)
  require("tpu.errors").none(2, "take", extra)
  Dataset.check_self(self, "take")
  return Take(self, args.integer(n, "take", "the number of elements", 0))
end

return Take
