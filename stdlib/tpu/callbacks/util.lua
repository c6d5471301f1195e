-- What the callbacks share: their option checks (Keras's names included) and the monitored
-- quantity (its value in the logs, its direction, whether it improved).
local tpu = require "tpu"  -- for tpu.warn, which a script may replace
local errors = require "tpu.errors"

local fail, show = errors.fail, errors.show

local M = {}

-- Keras's names for options (DESIGN section 3), turned into ours.
local keras_names = {restore_best_weights = "restore_best", filepath = "path", schedule = "fn",
                     save_weights_only = "weights_only"}

-- A copy of opts with Keras's names turned into ours, after refusing unknown keys.
function M.check_options(who, opts, allowed)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then fail("%s: options must be a table, got %s", who, show(opts)) end
  local out = errors.keras_names(who, opts, keras_names, allowed)
  local ok = {}
  for _, k in ipairs(allowed) do ok[k] = true end
  for k in pairs(out) do
    if not ok[k] then
      table.sort(allowed)
      fail("%s: unknown option '%s'%s (known options: %s)", who, tostring(k), errors.did_you_mean(k, allowed),
        table.concat(allowed, ", "))
    end
  end
  return out
end

function M.check_type(who, name, v, kind, default)
  if v == nil then return default end
  if type(v) ~= kind then fail("%s: %s must be a %s, got %s", who, name, kind, show(v)) end
  return v
end

function M.check_count(who, name, v, default)
  if v == nil then return default end
  if math.type(v) ~= "integer" or v < 0 then
    fail("%s: %s must be a non-negative integer, got %s", who, name, show(v))
  end
  return v
end

-- "min" or "max" for a monitored quantity: accuracies grow, everything else shrinks.
function M.check_mode(who, mode, monitor)
  mode = mode or "auto"
  if mode ~= "auto" and mode ~= "min" and mode ~= "max" then
    fail("%s: mode must be \"auto\", \"min\" or \"max\", got %s", who, show(mode))
  end
  if mode ~= "auto" then return mode end
  local base = monitor:gsub("^val_", "")
  if base:find("acc") or base == "auc" or base:find("precision") or base:find("recall") then return "max" end
  return "min"
end

-- Tracks the best value of a monitored quantity. NaN never improves (Keras starts from inf,
-- and NaN < inf is false).
function M.improved(mode, value, best, min_delta)
  if value ~= value then return false end
  if best == nil then return true end
  if mode == "min" then return value < best - min_delta end
  return value > best + min_delta
end

-- The monitored value from logs (NaN included: it counts as no improvement), or nil with one
-- warning naming what logs hold.
function M.monitored(cb, who, logs)
  local v = logs and logs[cb.monitor]
  if type(v) == "number" then return v end
  if not cb.warned then
    cb.warned = true
    local names = {}
    for k in pairs(logs or {}) do names[#names + 1] = k end
    table.sort(names)
    local hint = cb.monitor:match("^val_") and " (val_ values need validation_data in fit)" or ""
    tpu.warn(string.format("%s: '%s' is not in the epoch's logs (available: %s)%s\n",
      who, cb.monitor, #names > 0 and table.concat(names, ", ") or "none", hint))
  end
  return nil
end


return M
