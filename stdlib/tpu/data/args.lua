-- Argument checks for the data API. Every error starts with the user's file:line and echoes
-- the value it rejects.
local M = {}

-- "tpu" loads this module, so reach it lazily.
local tpu = setmetatable({}, {__index = function(_, k) return require("tpu")[k] end})

function M.fail(fmt, ...)
  error(tpu.core.user_where() .. string.format(fmt, ...), 0)
end

-- "file:line: " of the user's code calling now; errors found later (while iterating) can then
-- point at the call that set the pipeline up: fail_at(where, fmt, ...).
function M.where() return tpu.core.user_where() end

function M.fail_at(where, fmt, ...)
  error(where .. string.format(fmt, ...), 0)
end

-- A value as a message shows it: 3, "val", a function, a tensor f32[2,3].
function M.show(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "number" or type(v) == "boolean" or v == nil then return tostring(v) end
  if tpu.is_tensor(v) then
    return string.format("a tensor %s[%s]", v.dtype, table.concat(v.shape, ","))
  end
  return "a " .. type(v)
end

-- v as an integer >= min, or an error "<where>: <what> must be ..., got <v>".
function M.integer(v, where, what, min)
  local i = type(v) == "number" and math.tointeger(v) or nil
  if i == nil or (min and i < min) then
    local kind = min == 0 and "a non-negative integer" or min == 1 and "a positive integer"
      or "an integer"
    M.fail("%s: %s must be %s, got %s", where, what, kind, M.show(v))
  end
  return i
end

function M.boolean(v, where, what)
  if type(v) ~= "boolean" then
    M.fail("%s: %s must be true or false, got %s", where, what, M.show(v))
  end
  return v
end

function M.string(v, where, what)
  if type(v) ~= "string" then M.fail("%s: %s must be a string, got %s", where, what, M.show(v)) end
  return v
end

function M.func(v, where)
  if type(v) ~= "function" and not (getmetatable(v) or {}).__call then
    M.fail("%s: expected a function, got %s", where, M.show(v))
  end
  return v
end

-- The options table (or {}), refusing keys not in `allowed` so a typo does not go unnoticed.
function M.options(opts, where, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" or tpu.is_tensor(opts) then
    M.fail("%s: options must be a table such as {%s = ...}, got %s", where, allowed[1],
      M.show(opts))
  end
  for k in pairs(opts) do
    local known = false
    for _, a in ipairs(allowed) do known = known or k == a end
    if not known then
      M.fail("%s: unknown option %s (expected %s)", where, M.show(k), table.concat(allowed, ", "))
    end
  end
  return opts
end

return M
