-- generator(fn): elements produced by a Lua iterator, one pass per call of fn.
local Dataset = require "tpu.data.Dataset"
local structure = require "tpu.data.structure"
local args = require "tpu.data.args"

local GeneratorDataset = Dataset:extend("GeneratorDataset")

function GeneratorDataset:__init(fn)
  self._fn, self._desc = fn, "generator(fn)"
end

local function bad_value(path, v)
  args.fail("generator: element component %s is %s; elements hold tensors, numbers, booleans "
    .. "and strings", path, args.show(v))
end

function GeneratorDataset:_elements()
  local it = self._fn()
  if type(it) ~= "function" then
    args.fail("generator: the function must return an iterator (a function returning one "
      .. "element per call and nil at the end), got %s", args.show(it))
  end
  local done = false
  return function()
    if done then return nil end
    local e = table.pack(it())
    if e[1] == nil then done = true return nil end
    return structure.to_element(e, e.n, bad_value)
  end
end

function GeneratorDataset:_count() return Dataset.UNKNOWN end

-- The spec of the first element of a pass, with every size marked as varying (-1): one
-- element cannot tell which sizes the others share.
function GeneratorDataset:_spec()
  local first = self:_elements(0)()
  return first and structure.loose_spec_of(first) or {}
end

return GeneratorDataset
