-- Elements of a data set are lists of components; a component is a tensor or a nested table
-- of tensors (`{{xa, xb}, y}` has two components, the first a pair). These helpers walk such
-- structures, and describe them as specs: one {shape =, dtype =} leaf per tensor.
local M = {}

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

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

-- Whether s is a table of components (not a tensor, not a spec leaf).
local function is_node(s)
  return type(s) == "table" and not tpu.is_tensor(s) and not M.is_spec_leaf(s)
end

local function key_path(path, k)
  if type(k) == "number" then return path .. "[" .. k .. "]" end
  return path .. "." .. tostring(k)
end

-- Calls fn(leaf, path, keys) for every non-table value, in a fixed order; path reads like
-- "[1][2]" or "[1].image", keys is the list of keys leading to the leaf ({1, 2}, {1, "image"};
-- reused between calls, so copy it to keep it).
function M.walk(s, fn, path, keys)
  path, keys = path or "", keys or {}
  if is_node(s) then
    for _, k in ipairs(sorted_keys(s)) do
      keys[#keys + 1] = k
      M.walk(s[k], fn, key_path(path, k), keys)
      keys[#keys] = nil
    end
  else
    fn(s, path, keys)
  end
end

-- A structure of the same form with every leaf replaced by fn(leaf).
function M.map(s, fn)
  if is_node(s) then
    local out = {}
    for k, v in pairs(s) do out[k] = M.map(v, fn) end
    return out
  end
  return fn(s)
end

-- Combines a list of structures of the same form leaf by leaf: fn({leaf of each}).
function M.zip(list, fn)
  local first = list[1]
  if is_node(first) then
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

-- The leaves of a structure as a list, in walk order.
function M.flatten(s)
  local leaves = {}
  M.walk(s, function(leaf) leaves[#leaves + 1] = leaf end)
  return leaves
end

-- A structure of the form of `s` holding the leaves of `list` (in walk order).
function M.unflatten(s, list)
  local k = 0
  local function build(node)
    if is_node(node) then
      local out = {}
      for _, key in ipairs(sorted_keys(node)) do out[key] = build(node[key]) end
      return out
    end
    k = k + 1
    return list[k]
  end
  return build(s)
end

-- An element leaf as the pipeline holds it: tensors and strings as they are, numbers as i32
-- (integers) or f32 scalar tensors, booleans as bool scalars; fail(path, v) for anything else.
local function element_leaf(v, path, fail)
  if tpu.is_tensor(v) or type(v) == "string" then return v end
  if math.type(v) == "integer" then return tpu.tensor(v, {dtype = "i32"}) end
  if type(v) == "number" or type(v) == "boolean" then return tpu.tensor(v) end
  return fail(path, v)
end

local function convert(s, path, fail)
  if not is_node(s) then return element_leaf(s, path, fail) end
  local out = {}
  for k, v in pairs(s) do out[k] = convert(v, key_path(path, k), fail) end
  return out
end

-- The values v[1..n] (what a generator or host function returned) as an element: a list of
-- components whose leaves are element leaves (see element_leaf).
function M.to_element(v, n, fail)
  local out = {}
  for i = 1, n do out[i] = convert(v[i], "[" .. i .. "]", fail) end
  return out
end

---------------------------------------------------------------- specs

local Spec = {}
Spec.__index = Spec
Spec.__tostring = function(leaf)
  if leaf.dtype == "string" then return "string" end
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
-- dimension when `drop_first`). A string leaf's spec is {shape = {}, dtype = "string"}.
function M.spec_of(s, drop_first)
  return M.map(s, function(t)
    if type(t) == "string" then return M.spec_leaf({}, "string") end
    local shape = t.shape
    if drop_first then table.remove(shape, 1) end
    return M.spec_leaf(shape, t.dtype)
  end)
end

-- The spec of one element standing for elements whose sizes may differ (generators, host
-- maps): every size -1, and _full the element's sizes.
function M.loose_spec_of(element)
  return M.map(M.spec_of(element), function(leaf)
    local shape = {}
    for d = 1, #leaf.shape do shape[d] = -1 end
    return M.spec_leaf(shape, leaf.dtype, leaf._full)
  end)
end

-- A copy of a spec with every leaf replaced by fn(leaf).
function M.map_spec(spec, fn)
  if M.is_spec_leaf(spec) then return fn(spec) end
  local out = {}
  for k, v in pairs(spec) do out[k] = M.map_spec(v, fn) end
  return out
end

-- The spec of many elements: per leaf, sizes that differ become -1 (and _full keeps the
-- largest). Elements must share one structure and leaf dtypes and ranks.
function M.merged_spec(elements)
  local specs = {}
  for i, e in ipairs(elements) do specs[i] = M.flatten(M.spec_of(e)) end
  local merged = {}
  for k, leaf in ipairs(specs[1]) do
    local shape, full = table.move(leaf.shape, 1, #leaf.shape, 1, {}), {}
    for _, leaves in ipairs(specs) do
      for d, n in ipairs(leaves[k].shape) do
        if shape[d] ~= n then shape[d] = -1 end
        full[d] = math.max(full[d] or 0, n)
      end
    end
    merged[k] = M.spec_leaf(shape, leaf.dtype, full)
  end
  return M.unflatten(elements[1], merged)
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
