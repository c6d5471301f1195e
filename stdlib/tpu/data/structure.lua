-- Elements of a data set are lists of components; a component is a tensor or a nested table
-- of tensors (`{{xa, xb}, y}` has two components, the first a pair). These helpers walk such
-- structures, and describe them as specs: one {shape =, dtype =} leaf per tensor.
local M = {}

-- "tpu" loads this module, so reach it lazily.
local tpu = setmetatable({}, {__index = function(_, k) return require("tpu")[k] end})

-- Keys of a table in a fixed order: integers first, then strings.
local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) ~= type(b) then return type(a) == "number" end
    return a < b
  end)
  return keys
end

local function key_path(path, k)
  if type(k) == "number" then return path .. "[" .. k .. "]" end
  return path .. "." .. tostring(k)
end

-- Calls fn(leaf, path) for every non-table value, in a fixed order; path reads like
-- "[1][2]" or "[1].image".
function M.walk(s, fn, path)
  path = path or ""
  if type(s) == "table" and not tpu.is_tensor(s) then
    for _, k in ipairs(sorted_keys(s)) do M.walk(s[k], fn, key_path(path, k)) end
  else
    fn(s, path)
  end
end

-- A structure of the same form with every leaf replaced by fn(leaf).
function M.map(s, fn)
  if type(s) == "table" and not tpu.is_tensor(s) then
    local out = {}
    for k, v in pairs(s) do out[k] = M.map(v, fn) end
    return out
  end
  return fn(s)
end

-- Combines a list of structures of the same form leaf by leaf: fn({leaf of each}).
function M.zip(list, fn)
  local first = list[1]
  if type(first) == "table" and not tpu.is_tensor(first) then
    local out = {}
    for k in pairs(first) do
      local parts = {}
      for i, s in ipairs(list) do parts[i] = s[k] end
      out[k] = M.zip(parts, fn)
    end
    return out
  end
  return fn(list)
end

---------------------------------------------------------------- specs

local Spec = {}
Spec.__index = Spec
Spec.__tostring = function(leaf)
  local dims = {}
  for i, d in ipairs(leaf.shape) do dims[i] = d < 0 and "?" or tostring(d) end
  return leaf.dtype .. "[" .. table.concat(dims, ",") .. "]"
end

-- A spec leaf: shape (sizes; -1 where elements differ, i.e. a batch dimension whose last
-- batch may be smaller) and dtype. `_full` keeps the largest sizes (the full batch).
function M.spec_leaf(shape, dtype, full)
  return setmetatable({shape = shape, dtype = dtype, _full = full or shape}, Spec)
end

function M.is_spec_leaf(v) return getmetatable(v) == Spec end

-- The spec of a concrete structure (an element, or a source's tensors without their first
-- dimension when `drop_first`).
function M.spec_of(s, drop_first)
  return M.map(s, function(t)
    local shape = t.shape
    if drop_first then table.remove(shape, 1) end
    return M.spec_leaf(shape, t.dtype)
  end)
end

-- A copy of a spec with every leaf replaced by fn(leaf).
function M.map_spec(spec, fn)
  if M.is_spec_leaf(spec) then return fn(spec) end
  local out = {}
  for k, v in pairs(spec) do out[k] = M.map_spec(v, fn) end
  return out
end

function M.spec_str(spec)
  if M.is_spec_leaf(spec) then return tostring(spec) end
  local parts = {}
  for _, k in ipairs(sorted_keys(spec)) do
    parts[#parts + 1] = (type(k) == "number" and "" or k .. "=") .. M.spec_str(spec[k])
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

return M
