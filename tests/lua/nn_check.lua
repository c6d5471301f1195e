-- Gradient checks of layers against finite differences (tests/lua/jacobian.lua), with respect
-- to the input and to every weight.
--
--   local nn_check = require "nn_check"
--   nn_check.gradients(layer, x, {ctx = {training = true}, tol = 1e-2})
local tpu = require "tpu"
local check = require "check"
local jacobian = require "jacobian"

local M = {}

-- Largest Jacobian error of layer(x) with respect to each weight, by weight name (only the
-- trainable ones when trainable_only).
function M.weight_errors(layer, run, trainable_only)
  local params, entries = layer:parameters(), layer:_weight_entries()
  local errors = {}
  for i, p in ipairs(params) do
    local name = entries[i].owner.name .. "." .. entries[i].entry.name
    if entries[i].trainable or not trainable_only then errors[name] = jacobian.max_error(function(w)
      local list = {table.unpack(params)}
      list[i] = w
      layer:set_parameters(list)
      return run()
    end, p) end
  end
  layer:set_parameters(params)
  return errors
end

-- Checks d layer(x) / d x (for a floating tensor x, or each tensor of a list x) and
-- d layer(x) / d weight for every weight (trainable ones in training mode). opts: ctx (the call's ctx), tol (default 1e-2).
function M.gradients(layer, x, opts)
  opts = opts or {}
  local tol, ctx = opts.tol or 1e-2, opts.ctx
  local function call(input) return layer(input, ctx and setmetatable({}, {__index = ctx})) end
  call(x)  -- builds
  if tpu.is_tensor(x) then
    if x.dtype == "f32" then
      check.near(jacobian.max_error(call, x), 0, tol, layer.name .. " wrt input")
    end
  else
    for i, xi in ipairs(x) do
      if tpu.is_tensor(xi) and xi.dtype == "f32" then
        check.near(jacobian.max_error(function(v)
          local list = {}
          for k, val in pairs(x) do list[k] = val end
          list[i] = v
          return call(list)
        end, xi), 0, tol, layer.name .. " wrt input " .. i)
      end
    end
  end
  -- in training mode non-trainable state (moving statistics) does not reach the output
  local trainable_only = ctx and ctx.training
  for name, err in pairs(M.weight_errors(layer, function() return call(x) end, trainable_only)) do
    check.near(err, 0, tol, name)
  end
end

-- A reproducible tensor with values in [lo, hi).
function M.rand(shape, seed, lo, hi)
  return tpu.random.uniform(tpu.random.key(seed or 1), shape, {minval = lo or -1, maxval = hi or 1})
end

return M
