-- ds:skip(n): each pass without its first n elements.
local Dataset = require "tpu.data.Dataset"
local Transform = require "tpu.data.transforms.Transform"
local streams = require "tpu.data.streams"
local args = require "tpu.data.args"

local Skip = Transform:extend("Skip")

function Skip:__init(parent, n)
  Transform.__init(self, parent, "skip(" .. n .. ")")
  self._n = n
end

function Skip:_stream(upstream, epoch) return streams.skip(upstream(epoch), self._n) end

function Skip:_count()
  local c = self._parent:_count()
  if c < 0 then return c end
  return math.max(0, c - self._n)
end

function Dataset:skip(n, extra)
  require("tpu.errors").none(2, "skip", extra)
  Dataset.check_self(self, "skip")
  return Skip(self, args.integer(n, "skip", "the number of elements", 0))
end

return Skip
