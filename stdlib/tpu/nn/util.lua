-- Small helpers shared by the layers, losses, metrics and optimizers: user-facing errors,
-- value echoing, shapes and option checks.
local M = {}

local function tpu() return require "tpu" end

-- "file:line: " of the user's code, or "" when the core cannot tell.
function M.where()
  local core = tpu().core
  return core and core.user_where and core.user_where() or ""
end

-- Raises a user-facing error: where + formatted message, no extra position.
function M.fail(fmt, ...)
  error(M.where() .. string.format(fmt, ...), 0)
end

function M.is_tensor(v)
  local t = tpu()
  return t.is_tensor ~= nil and t.is_tensor(v)
end

-- "f32[32,100]"
function M.describe(t)
  return t.dtype .. "[" .. table.concat(t.shape, ",") .. "]"
end

-- Echoes a received value in an error message.
function M.show(v)
  if type(v) == "string" then return string.format("%q", v) end
  if M.is_tensor(v) then return "tensor " .. M.describe(v) end
  if type(v) ~= "table" then return tostring(v) end
  local parts = {}
  for k, x in pairs(v) do
    if #parts == 6 then parts[#parts + 1] = "..."; break end
    local key = math.type(k) == "integer" and "" or tostring(k) .. "="
    parts[#parts + 1] = key .. (type(x) == "table" and not M.is_tensor(x) and "{...}" or M.show(x))
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

function M.copy(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  return out
end

function M.numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

-- Shape of a tensor, or a list of shapes for a table of tensors.
function M.shape_of(x)
  if M.is_tensor(x) then return x.shape end
  if type(x) == "table" then
    local out = {}
    for i, v in ipairs(x) do out[i] = M.shape_of(v) end
    return out
  end
  return nil
end

-- "MultiHeadAttention" -> "multi_head_attention"
function M.snake_case(name)
  return (name:gsub("(%l)(%u)", "%1_%2"):gsub("(%u)(%u%l)", "%1_%2"):lower())
end

function M.is_positive_integer(v)
  return math.type(v) == "integer" and v > 0 or (math.type(v) == "float" and v > 0 and v == math.floor(v))
end

-- Rejects option keys a layer does not know (catches typos like `activaton`).
function M.check_options(obj, opts, allowed)
  if type(opts) ~= "table" then
    M.fail("%s: options must be a table, got %s", obj.__name, M.show(opts))
  end
  local ok = {}
  for _, k in ipairs(allowed) do ok[k] = true end
  for k in pairs(opts) do
    if not ok[k] and math.type(k) ~= "integer" then
      local names = M.copy(allowed)
      table.sort(names)
      M.fail("%s: unknown option '%s' (known options: %s)", obj.__name, tostring(k),
        table.concat(names, ", "))
    end
  end
end

local float_dtypes = {f32 = true, bf16 = true}

function M.check_dtype(obj, dtype)
  if dtype ~= nil and not float_dtypes[dtype] then
    M.fail("%s: dtype must be \"f32\" or \"bf16\", got %s", obj.__name, M.show(dtype))
  end
  return dtype
end

-- The mixed-precision policy {compute_dtype=, variable_dtype=}; f32 when none is set.
function M.policy()
  local mp = tpu().mixed_precision
  local p = mp and mp.policy and mp.policy()
  return {compute_dtype = p and p.compute_dtype or "f32",
          variable_dtype = p and p.variable_dtype or "f32"}
end

-- Casts a floating tensor to dtype when it differs (integer inputs are left alone).
function M.cast_float(x, dtype)
  if x.dtype ~= dtype and float_dtypes[x.dtype] then return x:cast(dtype) end
  return x
end

return M
