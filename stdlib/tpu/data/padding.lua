-- The options of padded_batch, resolved per tensor of the element.
--
-- padded_shapes, pad_to_multiple_of and padding_values mirror the element's components:
-- for (tokens, label), padded_shapes = {{64}} fixes the tokens' length and leaves the label
-- alone; pad_to_multiple_of = 8 (a number) applies to every component, {8, 1} to the first
-- only; nested components take nested tables ({{8, 8}, 1}). A shape is a list of sizes with
-- -1 for "the longest in the batch".
local args = require "tpu.data.args"

local M = {}

-- A list of integers (a shape) rather than a table of components; {} is the scalar shape.
local function is_shape(v)
  if type(v) ~= "table" then return false end
  for k, n in pairs(v) do
    if math.type(k) ~= "integer" or math.type(n) ~= "integer" then return false end
  end
  return true
end

-- The value of an option that mirrors the element, for the tensor at `keys`: a number
-- applies to everything below it; nil when the option says nothing for it.
local function scalar_at(opt, keys)
  for _, k in ipairs(keys) do
    if type(opt) ~= "table" then break end
    opt = opt[k]
  end
  return opt
end

local function show(v)
  return is_shape(v) and "{" .. table.concat(v, ", ") .. "}" or args.show(v)
end

-- The padded shape for the tensor at `keys`, or nil. With a single component, a plain shape
-- stands for that component's ({64} as well as {{64}}).
local function shape_at(opt, keys, path, where, single)
  if single and is_shape(opt) and next(opt) ~= nil then opt = {opt} end
  for _, k in ipairs(keys) do
    if opt == nil then return nil end
    if type(opt) ~= "table" or (is_shape(opt) and next(opt) ~= nil) then
      args.fail_at(where, "padded_batch: padded_shapes does not match the element: it gives %s "
        .. "where the element has components (%s is one)", show(opt), path)
    end
    opt = opt[k]
  end
  if opt ~= nil and not is_shape(opt) then
    args.fail_at(where, "padded_batch: padded_shapes%s must be a list of sizes (-1 for the "
      .. "longest in the batch), got %s", path, show(opt))
  end
  return opt
end

-- {shape =, multiple =, value =} for the tensor at `keys` (path for messages), checked;
-- single: whether the element has one component.
function M.resolve(opts, keys, path, where, single)
  local shape = shape_at(opts.padded_shapes, keys, path, where, single)
  local multiple = scalar_at(opts.pad_to_multiple_of, keys) or 1
  if math.type(multiple) ~= "integer" or multiple < 1 then
    args.fail_at(where, "padded_batch: pad_to_multiple_of for %s must be a positive integer, "
      .. "got %s", path, args.show(multiple))
  end
  local value = scalar_at(opts.padding_values, keys) or 0
  if value == true then value = 1 elseif value == false then value = 0 end
  if type(value) ~= "number" then
    args.fail_at(where, "padded_batch: padding_values for %s must be a number, got %s", path,
      args.show(value))
  end
  for _, n in ipairs(shape or {}) do
    if n < -1 then
      args.fail_at(where, "padded_batch: padded_shapes%s = {%s}: sizes must be >= 0, or -1 for "
        .. "the longest in the batch", path, table.concat(shape, ", "))
    end
  end
  return {shape = shape, multiple = multiple, value = value}
end

-- n rounded up to a multiple of m.
function M.round_up(n, m) return (n + m - 1) // m * m end

-- The size of dimension d of the padded batch, given the longest size in the batch.
function M.size(o, d, longest)
  local fixed = o.shape and o.shape[d]
  if fixed and fixed >= 0 then return fixed end
  return M.round_up(longest, o.multiple)
end

return M
