-- ds:filter(pred): the elements for which pred(x, y, ...) holds.
local Dataset = require "tpu.data.Dataset"
local Transform = require "tpu.data.transforms.Transform"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

local Filter = Transform:extend("Filter")

function Filter:__init(parent, pred, where)
  Transform.__init(self, parent, "filter(fn)")
  self._pred, self._where = pred, where
end

-- A predicate result as a Lua boolean: true/false, a number (non-zero holds), or a scalar
-- tensor of those.
function Filter:_holds(v)
  if tpu.is_tensor(v) then
    if #v.shape ~= 0 then
      args.fail_at(self._where, "filter: the predicate must return a boolean or a scalar, got %s",
        args.show(v))
    end
    v = v:item()
  end
  if type(v) == "number" then return v ~= 0 end
  if type(v) ~= "boolean" then
    args.fail_at(self._where, "filter: the predicate must return a boolean or a scalar, got %s",
      args.show(v))
  end
  return v
end

function Filter:_stream(upstream, epoch)
  local next_item, pred = upstream(epoch), self._pred
  return function()
    for item in next_item do
      local e = self:_element_of(item)
      if self:_holds(args.call(self._where, "filter: the predicate", pred, table.unpack(e, 1, #e))) then
        return item
      end
    end
  end
end

function Filter:_count()
  local c = self._parent:_count()
  return c == Dataset.INFINITE and c or Dataset.UNKNOWN
end

-- Keeps the elements for which pred(x, y, ...) returns true (or a non-zero number, or a
-- scalar tensor of those). pred is a plain Lua function run on the host for every element
-- (not traced): it may look at strings and read tensor values with item().
function Dataset:filter(pred, extra)
  errors.none(2, "filter", extra)
  Dataset._check_self(self, "filter")
  return Filter(self, args.func(pred, "filter"), args.where())
end

return Filter
