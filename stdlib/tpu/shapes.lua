-- Operations whose result shape depends on the data: boolean_mask, nonzero, unique.
-- Eagerly they work; inside tpu.jit they are rule 2 of DESIGN section 5: a static graph cannot
-- hold a tensor whose size is only known once the values are, so the error shows the
-- masked-weighting rewrite that keeps every shape static.
local core = require "tpu.core"
local errors = require "tpu.errors"
local T = core.Tensor

local M = {}

local function type_of(t) return t.dtype .. "[" .. table.concat(t.shape, ",") .. "]" end

local function rule2(op, t)
  error(core.user_where() .. string.format(
    "data-dependent shape: %s on a traced %s value inside jit '%s'\n" ..
    "  The size of %s's result depends on the values, but a compiled graph has static shapes.\n" ..
    "  Rewrite with masked weighting, which keeps every shape static:\n" ..
    "      -- instead of:  loss = tpu.boolean_mask(per_example, keep):mean()\n" ..
    "      local w = keep:cast(\"f32\")                -- 1 where kept, 0 elsewhere\n" ..
    "      local loss = (per_example * w):sum() / w:sum():maximum(1)\n" ..
    "  and tpu.where(keep, x, 0) to zero out what the mask drops; for counts use\n" ..
    "  one_hot(...):sum(1) over a fixed number of classes instead of unique.",
    op, type_of(t), core.trace_name() or "?", op), 0)
end

-- The tensors op takes, checked: no more arguments, and none traced (rule 2).
local function check_eager(op, count, ...)
  for i = 1, select("#", ...) do
    local t = select(i, ...)
    if i > count then errors.none(i, op, t) else errors.check(i, op, t, "tensor") end
    if core.is_traced(t) then rule2(op, t) end
  end
  for i = select("#", ...) + 1, count do errors.check(i, op, nil, "tensor") end
end

-- Rows of x (along the first axis) where mask (bool, x's first dims) is true.
function M.boolean_mask(x, mask, ...)
  check_eager("boolean_mask", 2, x, mask, ...)
  if mask.dtype ~= "bool" then
    error(core.user_where() .. "boolean_mask needs a bool mask, got " .. type_of(mask), 0)
  end
  local flat = mask:reshape{-1}:totable()
  local rows = {}
  for i, keep in ipairs(flat) do
    if keep then rows[#rows + 1] = i - 1 end
  end
  local lead = 1
  for _, d in ipairs(mask.shape) do lead = lead * d end
  local xs = x.shape
  local rest = {lead}
  for i = #mask.shape + 1, #xs do rest[#rest + 1] = xs[i] end
  return x:reshape(rest):take(core.tensor(rows, {dtype = "i32"}):reshape{#rows})
end

-- Indices (0-based, i32[n, rank]) of the non-zero elements, in row-major order.
function M.nonzero(x, ...)
  check_eager("nonzero", 1, x, ...)
  local shape, values = x.shape, x:reshape{-1}:totable()
  local out = {}
  for i, v in ipairs(values) do
    if v ~= 0 and v ~= false then
      local idx, rem = {}, i - 1
      for d = #shape, 1, -1 do
        idx[d] = rem % shape[d]
        rem = rem // shape[d]
      end
      out[#out + 1] = idx
    end
  end
  if #out == 0 then return core.zeros({0, #shape}, {dtype = "i32"}) end
  return core.tensor(out, {dtype = "i32"})
end

-- Sorted distinct values of x (flattened): false before true; NaNs, as one value, last (as
-- NumPy's unique).
function M.unique(x, ...)
  check_eager("unique", 1, x, ...)
  local seen, list, nan = {}, {}, nil
  for _, v in ipairs(x:reshape{-1}:totable()) do
    if v ~= v then
      nan = nan or v  -- NaN cannot be a table key
    elseif not seen[v] then
      seen[v] = true
      list[#list + 1] = v
    end
  end
  table.sort(list, x.dtype == "bool" and function(a, b) return not a and b end or nil)
  list[#list + 1] = nan
  return core.tensor(list, {dtype = x.dtype}):reshape{#list}
end

T.boolean_mask, T.nonzero, T.unique = M.boolean_mask, M.nonzero, M.unique
return M
