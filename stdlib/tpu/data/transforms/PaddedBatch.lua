-- ds:padded_batch(n, {pad_to_multiple_of =, padded_shapes =, padding_values =,
-- drop_remainder =}): consecutive elements of different shapes, padded and stacked.
local Dataset = require "tpu.data.Dataset"
local Batch = require "tpu.data.transforms.Batch"
local structure = require "tpu.data.structure"
local batching = require "tpu.data.batching"
local padding = require "tpu.data.padding"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

local PaddedBatch = Batch:extend("PaddedBatch")

function PaddedBatch:__init(parent, n, opts, where)
  Batch.__init(self, parent, n, opts.drop_remainder or false, where)
  self._opts = opts
  self._desc = parent._desc .. ":padded_batch(" .. n .. ", {...})"
end

-- The padding options of every tensor of an element (in walk order).
function PaddedBatch:_resolve(element)
  local list = {}
  structure.walk(element, function(_, path, keys)
    list[#list + 1] = padding.resolve(self._opts, keys, path, self._where, #element == 1)
  end)
  return list
end

local function type_str(t) return t.dtype .. "[" .. table.concat(t.shape, ",") .. "]" end

-- The values each integer dtype holds; floats hold any number (rounded).
local INTEGER_RANGES = {u8 = {0, 255}, i32 = {-2 ^ 31, 2 ^ 31 - 1}, bool = {0, 1}}

-- Refuses a padding value the tensor's dtype cannot hold: pad_stack would clamp or truncate
-- it (u8 -1 -> 0, i32 0.5 -> 0), padding with another value than the one asked for. Scalars
-- (labels) are never padded, so one number may serve all the components that are.
local function check_value(value, t, path, where)
  local range = INTEGER_RANGES[t.dtype]
  if range and #t.shape > 0 and not (value == math.floor(value) and value >= range[1] and value <= range[2]) then
    args.fail_at(where, "padded_batch: padding_values for %s is %s, which %s cannot hold", path,
      args.show(value), t.dtype)
  end
end

-- The padded shape of tensor k of a batch; `first` is the 0-based pass position of list[1].
function PaddedBatch:_plan(o, path, list, first)
  check_value(o.value, list[1], path, self._where)
  local rank = #list[1].shape
  if o.shape and #o.shape ~= rank then
    args.fail_at(self._where, "padded_batch: padded_shapes%s has %d sizes but %s has "
      .. "%s of rank %d (%s)", path, #o.shape, batching.nth(first + 1), path, rank, type_str(list[1]))
  end
  local shapes, shape = {}, {}
  for i, t in ipairs(list) do shapes[i] = t.shape end
  for d = 1, rank do
    local longest, at = 0, 1
    for i, s in ipairs(shapes) do
      if s[d] > longest then longest, at = s[d], i end
    end
    shape[d] = padding.size(o, d, longest)
    if longest > shape[d] then
      args.fail_at(self._where, "padded_batch: %s has "
        .. "length %d in dimension %d of %s (%s), longer than padded_shapes fixes (%d); "
        .. "shorten or drop long elements first (map or filter), or raise padded_shapes",
        batching.nth(first + at), longest, d, path, type_str(list[at]), shape[d])
    end
  end
  return shape, o.value
end

function PaddedBatch:_elements(epoch, ctx)
  local source = self._parent:_indexed()
  local next_element = source and Dataset._elements(self._parent, epoch)
    or self._parent:_elements(epoch, ctx)
  local groups, first, options = self:_groups(next_element), 0, nil
  return function()
    local list = groups()
    if not list then return nil end
    options = options or self:_resolve(list[1])
    first = first + #list
    local start = first - #list
    return batching.pad(list, function(k, path, leaves)
      return self:_plan(options[k], path, leaves, start)
    end, self._where, "padded_batch", start)
  end
end

-- Per tensor: the batch dimension as batch's, then each dimension fixed by padded_shapes, the
-- parent's size rounded up when every element has it, else -1 (varies from batch to batch).
function PaddedBatch:_spec()
  local n, all_full = self._n, self:_all_full()
  local spec = batching.check_spec(self._parent:_spec(), self._where, "padded_batch")
  local options, out = self:_resolve(spec), {}
  for k, leaf in ipairs(structure.flatten(spec)) do
    local o, shape, full = options[k], {all_full and n or -1}, {n}
    for d, size in ipairs(leaf.shape) do
      local fixed = o.shape and o.shape[d]
      shape[d + 1] = (fixed and fixed >= 0) and fixed or size >= 0 and padding.size(o, d, size) or -1
      full[d + 1] = padding.size(o, d, leaf._full[d])
    end
    out[k] = structure.spec_leaf(shape, leaf.dtype, full)
  end
  return structure.unflatten(spec, out)
end

-- Like batch(n), for elements whose tensors differ in shape (token ids of sentences): each
-- tensor of a batch is padded at the end of every dimension to the longest in the batch,
-- rounded up to a multiple of pad_to_multiple_of, so a pass compiles at most
-- ceil(max_len / multiple) signatures instead of one per length. A size fixed by
-- padded_shapes wins (-1 leaves a dimension to the batch), and an element longer than it is
-- an error naming its position and length. padding_values (default 0) fills the padding.
-- Options mirror the element's components; scalars (labels) are stacked unchanged:
--   text:padded_batch(32, {pad_to_multiple_of = 16})          -- ids i32[32,16k], y i32[32]
--   text:padded_batch(32, {padded_shapes = {{128}}, padding_values = {0}})
function Dataset:padded_batch(n, opts, extra)
  errors.none(3, "padded_batch", extra)
  Dataset._check_self(self, "padded_batch")
  n = args.integer(n, "padded_batch", "the batch size", 1)
  opts = args.options(opts, "padded_batch",
    {"pad_to_multiple_of", "padded_shapes", "padding_values", "drop_remainder"})
  if opts.drop_remainder ~= nil then args.boolean(opts.drop_remainder, "padded_batch", "drop_remainder") end
  local m = opts.pad_to_multiple_of
  if m ~= nil and type(m) ~= "table" then args.integer(m, "padded_batch", "pad_to_multiple_of", 1) end
  local shapes = opts.padded_shapes
  if shapes ~= nil and type(shapes) ~= "table" then
    args.fail("padded_batch: padded_shapes must be a table of shapes such as {{64}}, got %s",
      args.show(shapes))
  end
  local v = opts.padding_values
  if v ~= nil and type(v) ~= "table" and type(v) ~= "number" and type(v) ~= "boolean" then
    args.fail("padded_batch: padding_values must be a number or a table of them, got %s", args.show(v))
  end
  return PaddedBatch(self, n, opts, args.where())
end

return PaddedBatch
