-- Argument checks for the data API. Every error starts with the user's file:line and echoes
-- the value it rejects.
local M = {}

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

-- fail, where, fail_at (errors found while iterating point at the call that set the pipeline
-- up) and show (a value as a message echoes it) are tpu.errors'.
local errors = require "tpu.errors"
M.fail, M.where, M.fail_at, M.show = errors.fail, errors.where, errors.fail_at, errors.show
M.call = errors.call

-- v as an integer >= min, or an error "<where>: <what> must be ..., got <v>".
function M.integer(v, where, what, min)
  local i = type(v) == "number" and math.tointeger(v) or nil
  if i == nil or (min and i < min) then
    local kind = min == 0 and "a non-negative integer" or min == 1 and "a positive integer"
      or min and "an integer >= " .. min or "an integer"
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
      M.fail("%s: unknown option %s%s (expected %s)", where, M.show(k), errors.did_you_mean(k, allowed),
        table.concat(allowed, ", "))
    end
  end
  return opts
end

return M
