-- ds:cycle(count): the data set repeated (Lua reserves the name `repeat`).
local Dataset = require "tpu.data.Dataset"
local Transform = require "tpu.data.transforms.Transform"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

local Cycle = Transform:extend("Cycle")

function Cycle:__init(parent, count)
  Transform.__init(self, parent, count and "cycle(" .. count .. ")" or "cycle()")
  self._count_n = count
end

-- Passes of the parent one after another; pass r of epoch e is the parent's epoch
-- e * count + r, so shuffles upstream reshuffle every pass.
function Cycle:_stream(upstream, epoch)
  local count = self._count_n
  local first = count and epoch * count or epoch << 32
  local r, it, got = 0, nil, false
  return function()
    while true do
      if not it then
        if count and r >= count then return nil end
        it, got, r = upstream(first + r), false, r + 1
      end
      local v = it()
      if v ~= nil then
        got = true
        return v
      end
      it = nil
      if not got then count = 0 return nil end  -- an empty pass: stop rather than spin
    end
  end
end

-- Forever over a parent of unknown size is infinite, as tf.data counts it: only an empty
-- parent would end it (an empty pass stops the stream), and fit must not take such a data set
-- for one that ends.
function Cycle:_count()
  local c = self._parent:_count()
  if c == 0 or self._count_n == 0 then return 0 end
  if not self._count_n then return Dataset.INFINITE end
  if c < 0 then return c end
  return c * self._count_n
end

-- Repeats the data set `count` times, forever when count is nil.
function Dataset:cycle(count, extra)
  errors.none(2, "cycle", extra)
  Dataset._check_self(self, "cycle")
  if count ~= nil then count = args.integer(count, "cycle", "the count", 0) end
  return Cycle(self, count)
end

return Cycle
