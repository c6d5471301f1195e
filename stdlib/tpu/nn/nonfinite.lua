-- A loss that goes NaN or infinite stops fit with the step and the layer that made it.
--
-- The train step keeps the weights and layer statistics it was given when its loss is not
-- finite (the optimizer's update with `where`, keep_if_finite; the optimizer state advances),
-- so after such a step the model still holds the weights that produced it. fit then calls
-- fail(): it runs the forward pass of that batch again, eagerly and with the step's random
-- key, watching every layer's output; the first layer (in the order the forward pass runs
-- them) whose output holds a NaN or an infinity is the one reported. Layers whose weights are
-- already not finite are reported as such.
local core = require "tpu.core"
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local M = {}

local function is_float(t) return t.dtype == "f32" or t.dtype == "bf16" end

-- True when every element of a concrete tensor is finite (0 * x is 0 exactly then).
function M.all_finite(t)
  if not util.is_tensor(t) or not is_float(t) then return true end
  local n = 1
  for _, d in ipairs(t.shape) do n = n * d end
  if n == 0 then return true end
  return (t:cast("f32") * 0):sum():item() == 0
end

-- Inside the step: a bool scalar, whether the loss (a scalar or a [1] tensor, the same on every
-- core) is finite.
function M.finite_flag(loss) return (loss:cast("f32") * 0):sum():eq(0) end

-- Inside the step: the values of the list `new` where `finite` (M.finite_flag) holds, else
-- those of `old` (tables of the same structure, leaf by leaf; what is not a tensor comes from
-- `new`).
--   frozen = nonfinite.keep_if_finite(finite, {frozen}, {new_frozen})
function M.keep_if_finite(finite, old, new)
  local function pick(o, n)
    if util.is_tensor(n) then return util.is_tensor(o) and core.where(finite, n, o) or n end
    if type(n) ~= "table" or getmetatable(n) ~= nil or type(o) ~= "table" then return n end
    local out = {}
    for k, v in pairs(n) do out[k] = pick(o[k], v) end
    return out
  end
  return table.unpack(pick(old, new), 1, #new)
end

---------------------------------------------------------------- finding the layer

-- Every module of the model with its position ("2", "4.1") as model:save names it.
local function modules_of(model)
  local out = {}
  model:_each_module(function(m, path) out[#out + 1] = {module = m, path = path} end)
  return out
end

local function outputs_finite(y)
  if util.is_tensor(y) then return M.all_finite(y) end
  if type(y) == "table" then
    for _, v in pairs(y) do
      if not outputs_finite(v) then return false end
    end
  end
  return true
end

local function weights_finite(m)
  for _, e in ipairs(m._weights or {}) do
    if not M.all_finite(e.value) then return false, e.name end
  end
  return true
end

-- Runs model(x, ctx) with every module's call watched; returns the first {module, path} whose
-- output is not finite (children finish before their container), or nil.
local function first_bad_output(model, x, ctx)
  local found
  local list = modules_of(model)
  local own = {}  -- calls set on the instances themselves
  for i, item in ipairs(list) do own[i] = rawget(item.module, "call") end
  for _, item in ipairs(list) do
    local m, class_call = item.module, item.module.call
    m.call = function(self, input, c)
      local y = class_call(self, input, c)
      if not found and not outputs_finite(y) then found = item end
      return y
    end
  end
  local ok, err = pcall(model, x, ctx)
  for i, item in ipairs(list) do item.module.call = own[i] end
  if not ok then error(err, 0) end
  return found
end

local function describe(item)
  local where = item.path == "" and "the model itself" or "position " .. item.path .. " in the model"
  return string.format("'%s' (%s, %s)", item.module.name, item.module.__name, where)
end

-- Which layer made the loss non-finite, as a phrase for the error.
function M.culprit(model, x, key)
  for _, item in ipairs(modules_of(model)) do
    local ok, weight = weights_finite(item.module)
    if not ok then
      return string.format("the weight '%s' of layer %s is already not finite", weight, describe(item))
    end
  end
  local bad = first_bad_output(model, x, {training = true, key = key, updates = {}})
  if bad then return "the first layer whose output is not finite is " .. describe(bad) end
  return "every layer's output is finite, so the loss function made it (a log of 0, labels "
    .. "outside the classes, or targets that do not fit the loss)"
end

local show = errors.show

-- Raises the error fit stops with: `loss` is the batch's loss value, `where` = {epoch=, batch=}.
function M.fail(model, x, loss, where)
  local step = model.train_steps or 0
  local key = model.dropout_key and model.dropout_key:fold_in(step)
  util.fail("fit: the loss became %s at step %d (epoch %d, batch %d); %s. The weights are those "
    .. "before that step. Try a lower learning rate, clipnorm in the optimizer, or check the data "
    .. "of that batch", show(loss), step, where.epoch, where.batch, M.culprit(model, x, key))
end

return M
