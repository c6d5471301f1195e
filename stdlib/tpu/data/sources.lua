-- Indexable sources: data held in memory that can hand out element i, or a whole batch of
-- elements in one gather per tensor.
--
-- A source has: n (element count), get(i) -> element, spec() -> list of component specs, and
-- when it can batch faster than stacking elements one by one, gather(indices) -> batched
-- element. Indices are 0-based; an element is a list of components. A source that prefetch
-- can gather on a background thread has prefetcher(depth) and from_leaves(list) (see
-- tpu.data.prefetching). A TensorSource also has `components` and rows(first, count), the
-- batch of consecutive elements.
-- find_files locates the files of a data set on disk.
local class = require "tpu.class"
local structure = require "tpu.data.structure"
local args = require "tpu.data.args"

local M = {}

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

---------------------------------------------------------------- tensors

local TensorSource = class("TensorSource")
M.TensorSource = TensorSource

-- components: a list of structures of concrete tensors sharing their first dimension (checked
-- by the caller with check_components). A data set lives on the host, so its tensors move
-- there: they no longer count as HBM in use, and tpu.reset() keeps them.
function TensorSource:__init(components)
  self.components = components
  self.arity = #components
  structure.walk(components, function(t)
    self.n = self.n or t.shape[1]
    tpu.core.to_host(t)
  end)
end

function TensorSource:get(i)
  return structure.map(self.components, function(t)
    local shape = t.shape
    table.remove(shape, 1)
    return t:slice {{i + 1, i + 1}}:reshape(shape)
  end)
end

function TensorSource:gather(indices)
  local gather_rows = tpu.core.gather_rows
  return structure.map(self.components, function(t) return gather_rows(t, indices) end)
end

-- Elements first .. first + count - 1 batched: views of the tensors' rows, no copy.
function TensorSource:rows(first, count)
  local row_range = tpu.core.row_range
  return structure.map(self.components, function(t) return row_range(t, first, count) end)
end

function TensorSource:spec()
  return structure.spec_of(self.components, true)
end

-- The background gather of prefetch (tpu.data.prefetching).
function TensorSource:prefetcher(depth)
  return tpu.core.batch_prefetcher(structure.flatten(self.components), depth)
end

function TensorSource:from_leaves(leaves) return structure.unflatten(self.components, leaves) end

-- Checks `components` (a list of structures) for from_tensors: tensors everywhere, concrete,
-- at least one dimension, the same first dimension. `what` names the call in messages.
function M.check_components(components, what)
  local first_path, first
  structure.walk(components, function(t, path)
    if not tpu.is_tensor(t) then
      args.fail("%s: %s must be a tensor (make one with tpu.tensor), got %s", what, path,
        args.show(t))
    elseif tpu.is_traced(t) then
      args.fail("%s: %s is a traced tensor; a data set holds concrete data, so build it "
        .. "outside tpu.jit", what, path)
    elseif t.ndim == 0 then
      args.fail("%s: %s is a scalar (%s); every component needs a first dimension that counts "
        .. "the examples", what, path, args.show(t))
    elseif not first then
      first_path, first = path, t
    elseif t.shape[1] ~= first.shape[1] then
      args.fail("%s: all components must share the first dimension, but %s is %s and %s is %s",
        what, first_path, args.show(first), path, args.show(t))
    end
  end)
  if not first then args.fail("%s: no tensors given", what) end
end

---------------------------------------------------------------- range

local RangeSource = class("RangeSource")
M.RangeSource = RangeSource

function RangeSource:__init(n)
  self.n = n
  self.arity = 1
end

function RangeSource:get(i) return {tpu.tensor(i, {dtype = "i32"})} end

function RangeSource:gather(indices) return {tpu.tensor(indices, {dtype = "i32"})} end

function RangeSource:spec() return {structure.spec_leaf({}, "i32")} end

---------------------------------------------------------------- lists of elements

-- Elements held as a Lua list (text lines, records, cached elements of varying shapes).
local ListSource = class("ListSource")
M.ListSource = ListSource

-- spec_fn() gives the spec when the list is empty.
function ListSource:__init(elements, spec_fn)
  self.elements, self.n, self._spec_fn = elements, #elements, spec_fn
end

function ListSource:get(i) return self.elements[i + 1] end

function ListSource:spec()
  if not self._spec then
    self._spec = self.n > 0 and structure.merged_spec(self.elements) or (self._spec_fn or
      function() return {} end)()
  end
  return self._spec
end

-- Whether every element has tensors only, of one shape per component.
local function uniform(spec)
  local ok = true
  structure.walk(spec, function(leaf)
    if leaf.dtype == "string" then ok = false end
    for _, d in ipairs(leaf.shape) do ok = ok and d >= 0 end
  end)
  return ok
end

-- A source for a list of elements: one tensor per component when they stack (fast batches,
-- prefetch), else a ListSource.
function M.from_elements(elements, spec_fn)
  local list = ListSource(elements, spec_fn)
  if list.n == 0 or not uniform(list:spec()) then return list end
  local batching = require "tpu.data.batching"
  return TensorSource(batching.stack(elements, "", "cache", 0))
end

---------------------------------------------------------------- IDX files

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The path of `name.gz` or `name` in dir, or nil.
local function find_in(dir, name)
  for _, candidate in ipairs {dir .. "/" .. name .. ".gz", dir .. "/" .. name} do
    if exists(candidate) then return candidate end
  end
end

-- Looks for every file of `names` in each directory of `dirs` in turn; returns the paths
-- from the first directory holding all of them, or nil and what is missing where
-- ("a[.gz] and b[.gz] in /x or /y").
function M.find_files(dirs, names)
  local groups = {}  -- {absent = "a[.gz] and b[.gz]", dirs = {...}}, neighbours merged
  for _, dir in ipairs(dirs) do
    local paths, absent = {}, {}
    for i, name in ipairs(names) do
      paths[i] = find_in(dir, name)
      if not paths[i] then absent[#absent + 1] = name .. "[.gz]" end
    end
    if #absent == 0 then return paths end
    local what, last = table.concat(absent, " and "), groups[#groups]
    if last and last.absent == what then
      last.dirs[#last.dirs + 1] = dir
    else
      groups[#groups + 1] = {absent = what, dirs = {dir}}
    end
  end
  local parts = {}
  for i, g in ipairs(groups) do parts[i] = g.absent .. " in " .. table.concat(g.dirs, " or ") end
  return nil, table.concat(parts, ", nor ")
end

return M
