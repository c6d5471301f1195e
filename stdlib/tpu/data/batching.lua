-- Stacking elements into batches: batch (equal shapes) and padded_batch (padded to a common
-- shape). One C++ pad_stack per tensor of the element builds the whole batch.
local structure = require "tpu.data.structure"
local args = require "tpu.data.args"

local M = {}

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

local function type_str(t)
  return string.format("%s[%s]", t.dtype, table.concat(t.shape, ","))
end

-- "the 5th element of the pass": element n (1-based) of a pass, as messages name it.
function M.nth(n)
  local tens, ones = n % 100, n % 10
  local suffix = (tens >= 11 and tens <= 13) and "th" or ({"st", "nd", "rd"})[ones] or "th"
  return string.format("the %d%s element of the pass", n, suffix)
end
local nth = M.nth

-- The error for a string component: batches hold tensors.
function M.string_error(where, what, path)
  args.fail_at(where, "%s: component %s is a string; batches hold tensors, so turn strings into "
    .. "tensors first, e.g. ds:map(function(s) return vocab:encode(s) end, {host = true})",
    what, path)
end

-- Raises string_error when a spec has a string leaf.
function M.check_spec(spec, where, what)
  structure.walk(spec, function(leaf, path)
    if leaf.dtype == "string" then M.string_error(where, what, path) end
  end)
  return spec
end

-- The leaves at one path of every element, checked to be tensors of one dtype and rank.
-- first: the 0-based pass position of elements[1] (messages count from 1).
local function leaves_at(elements, k, path, where, what, first)
  local list, t1 = {}, nil
  for i, e in ipairs(elements) do
    local t = e[k]
    if type(t) == "string" then M.string_error(where, what, path) end
    t1 = t1 or t
    if t.dtype ~= t1.dtype or #t.shape ~= #t1.shape then
      args.fail_at(where, "%s: %s has %s of type %s but %s (the batch's first) has %s", what,
        nth(first + i), path, type_str(t), nth(first + 1), type_str(t1))
    end
    list[i] = t
  end
  return list
end

-- Raises the error for element i (paths `at`) when its structure is not the first's (paths
-- `paths`, also a set in `known`). Walks visit keys in order, so equal sets are equal lists.
local function same_structure(paths, known, at, i, where, what, first)
  local same = #at == #paths
  for k = 1, #at do same = same and at[k] == paths[k] end
  if same then return end
  local mine = {}
  for _, path in ipairs(at) do
    mine[path] = true
    if not known[path] then
      args.fail_at(where, "%s: %s has %s, which %s (the batch's first) has not; the elements of "
        .. "a batch must have the same structure", what, nth(first + i), path, nth(first + 1))
    end
  end
  for _, path in ipairs(paths) do
    if not mine[path] then
      args.fail_at(where, "%s: %s has no %s; the elements of a batch must have the same "
        .. "structure", what, nth(first + i), path)
    end
  end
end

-- Flattened elements: one list of leaves per element, and the paths of the leaves, checked to
-- be the same for every element (else a component of the later ones would go unseen).
local function flat(elements, where, what, first)
  local rows, paths, known = {}, nil, {}
  for i, e in ipairs(elements) do
    local row, at = {}, {}
    structure.walk(e, function(leaf, path) row[#row + 1], at[#at + 1] = leaf, path end)
    if paths then
      same_structure(paths, known, at, i, where, what, first)
    else
      paths = at
      for _, path in ipairs(at) do known[path] = true end
    end
    rows[i] = row
  end
  return rows, paths
end

-- Stacks elements of equal shapes: batch(n). where/what/first as for leaves_at.
function M.stack(elements, where, what, first)
  local rows, paths = flat(elements, where, what, first)
  local out = {}
  for k, path in ipairs(paths) do
    local list = leaves_at(rows, k, path, where, what, first)
    local shape = list[1].shape
    for i, t in ipairs(list) do
      for d, n in ipairs(t.shape) do
        if n ~= shape[d] then
          args.fail_at(where, "%s: %s has %s of shape %s but %s (the batch's first) has %s; use "
            .. "padded_batch for elements of different shapes", what, nth(first + i), path,
            type_str(t), nth(first + 1), type_str(list[1]))
        end
      end
    end
    out[k] = tpu.core.pad_stack(list, shape, 0)
  end
  return structure.unflatten(elements[1], out)
end

-- Pads and stacks elements: padded_batch. plan(k, path, list) returns the padded shape and
-- the padding value for leaf k (it raises the errors about elements too long).
function M.pad(elements, plan, where, what, first)
  local rows, paths = flat(elements, where, what, first)
  local out = {}
  for k, path in ipairs(paths) do
    local list = leaves_at(rows, k, path, where, what, first)
    local shape, value = plan(k, path, list)
    out[k] = tpu.core.pad_stack(list, shape, value)
  end
  return structure.unflatten(elements[1], out)
end

return M
