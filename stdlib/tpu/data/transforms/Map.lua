-- ds:map(fn): fn applied to every element, traced and compiled (tpu.jit); with {host = true}
-- a plain Lua function instead (HostMap).
local Dataset = require "tpu.data.Dataset"
local structure = require "tpu.data.structure"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

local Map = Dataset:extend("Map")

function Map:__init(parent, fn, where)
  self._parent, self._desc, self._where = parent, parent._desc .. ":map(fn)", where
  -- Results as a list, so any number of components comes back as one structure.
  -- Named by the line that called map, so --profile tells a pipeline's maps apart.
  local at = type(where) == "string" and where:match("^(.-):?%s*$") or ""
  self._fn = tpu.jit(function(...) return {args.call(where, "map: the function", fn, ...)} end,
    {name = at ~= "" and "data.map@" .. at or "data.map"})
end

local function string_error(where)
  args.fail_at(where, "map: the elements hold strings, which cannot be traced; use "
    .. "ds:map(fn, {host = true}) to run a plain Lua function on them")
end

function Map:_elements(epoch, ctx)
  local next_element, fn = self._parent:_elements(epoch, ctx), self._fn
  return function()
    local e = next_element()
    if e == nil then return nil end
    structure.walk(e, function(v) if type(v) == "string" then string_error(self._where) end end)
    local out = fn(table.unpack(e, 1, #e))
    if out[1] == nil then args.fail_at(self._where, "map: the function returned no tensors") end
    return out
  end
end

function Map:_count() return self._parent:_count() end

-- Runs fn once on zeros shaped like a full element of the parent. A result dimension is taken
-- to vary when a parent tensor's dimension at the same position varies (a smaller last batch,
-- a padded length) and has the same full size.
function Map:_spec()
  if self._spec_cache then return self._spec_cache end
  local varying = {}
  local zeros = structure.map_spec(self._parent:_spec(), function(leaf)
    if leaf.dtype == "string" then string_error(self._where) end
    for d, n in ipairs(leaf.shape) do
      if n == -1 then varying[d .. ":" .. leaf._full[d]] = true end
    end
    return tpu.zeros(leaf._full, {dtype = leaf.dtype})
  end)
  local out = self._fn(table.unpack(zeros, 1, #zeros))
  self._spec_cache = structure.map(out, function(t)
    local full = t.shape
    local shape = {table.unpack(full)}
    for d, n in ipairs(shape) do
      if varying[d .. ":" .. n] then shape[d] = -1 end
    end
    return structure.spec_leaf(shape, t.dtype, full)
  end)
  return self._spec_cache
end

-- Applies fn to every element: fn(x, y) returns the new components. By default fn is traced
-- and compiled once per element signature (tpu.jit), so it must be traceable (tensors in,
-- tensors out, no branching on values). With {host = true} fn is a plain Lua function called
-- on the host for every element: it may take and return strings (text_lines(...) ->
-- vocab:encode), numbers and tensors, and read values; it runs uncompiled, once per element.
function Dataset:map(fn, opts, extra)
  errors.none(3, "map", extra)
  Dataset.check_self(self, "map")
  fn = args.func(fn, "map")
  opts = args.options(opts, "map", {"host"})
  if opts.host ~= nil and args.boolean(opts.host, "map", "host") then
    return require("tpu.data.transforms.HostMap")(self, fn, args.where())
  end
  return Map(self, fn, args.where())
end

return Map
