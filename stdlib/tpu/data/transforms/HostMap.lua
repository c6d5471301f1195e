-- ds:map(fn, {host = true}): a plain Lua function applied to every element on the host.
local Dataset = require "tpu.data.Dataset"
local structure = require "tpu.data.structure"
local args = require "tpu.data.args"

local HostMap = Dataset:extend("HostMap")

function HostMap:__init(parent, fn, where)
  self._parent, self._fn, self._where = parent, fn, where
  self._desc = parent._desc .. ":map(fn, {host = true})"
end

-- The element fn returns: numbers become scalar tensors; tensors and strings stay.
function HostMap:_apply(e)
  local out = table.pack(args.call(self._where, "map: the function", self._fn, table.unpack(e, 1, #e)))
  if out[1] == nil then args.fail_at(self._where, "map: the function returned nothing") end
  return structure.to_element(out, out.n, function(path, v)
    args.fail_at(self._where, "map: result %s is %s; elements hold tensors, numbers, booleans "
      .. "and strings", path, args.show(v))
  end)
end

function HostMap:_elements(epoch, ctx)
  local next_element = self._parent:_elements(epoch, ctx)
  return function()
    local e = next_element()
    if e ~= nil then return self:_apply(e) end
  end
end

function HostMap:_count() return self._parent:_count() end

-- The spec of fn's result on the parent's first element, every size marked as varying (-1).
function HostMap:_spec()
  if not self._spec_cache then
    local first = self._parent:_elements(0, {})()
    self._spec_cache = first and structure.loose_spec_of(self:_apply(first)) or {}
  end
  return self._spec_cache
end

return HostMap
