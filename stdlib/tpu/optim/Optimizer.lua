-- Base class of the functional optimizers. State is a table of tensors only (step counter,
-- learning rate, one list per slot), so a traced step never recompiles when they change.
--
--   local state = opt:init(params)                              -- params: list of tensors
--   params, state = opt:update(params, grads, state)           -- pure tensor math (traces)
--
-- Subclasses set `slots` (names of per-parameter tensors, e.g. {"m", "v"}) and implement
-- `scalars(state, step)` (per-step values shared by all parameters) and
-- `update_one(p, g, slots, scalars)` -> new_p, new_slots.
local class = require "tpu.class"
local util = require "tpu.nn.util"

local Optimizer = class("Optimizer")
Optimizer.slots = {}

local function tpu() return require "tpu" end

-- Checks a hyperparameter: a number in [lo, hi) (hi may be nil).
function Optimizer:check_number(name, value, lo, hi)
  if type(value) ~= "number" or value < lo or (hi and value >= hi) then
    local range = hi and string.format("in [%g, %g)", lo, hi) or string.format(">= %g", lo)
    util.fail("%s: %s must be a number %s, got %s", self.__name, name, range, util.show(value))
  end
  return value
end

function Optimizer:check_lr(opts)
  local lr = opts.lr
  if lr == nil then return self.default_lr end
  if type(lr) ~= "number" or lr <= 0 then
    util.fail("%s: lr must be a positive number, got %s", self.__name, util.show(lr))
  end
  return lr
end

local function check_params(self, params, what)
  if type(params) ~= "table" then
    util.fail("%s: %s must be a list of tensors, got %s", self.__name, what, util.show(params))
  end
  for i, p in ipairs(params) do
    if not util.is_tensor(p) then
      util.fail("%s: %s[%d] is not a tensor, got %s", self.__name, what, i, util.show(p))
    end
  end
end

function Optimizer:init(params)
  check_params(self, params, "params")
  local t = tpu()
  local state = {step = t.tensor(0, {dtype = "i32"}), lr = t.tensor(self.lr, {dtype = "f32"})}
  for _, name in ipairs(self.slots) do
    state[name] = {}
    for i, p in ipairs(params) do state[name][i] = t.zeros(p.shape, {dtype = p.dtype}) end
  end
  return state
end

function Optimizer:update(params, grads, state)
  check_params(self, params, "params")
  check_params(self, grads, "grads")
  if #grads ~= #params then
    util.fail("%s: got %d gradients for %d parameters", self.__name, #grads, #params)
  end
  local step = state.step + 1
  local new_state = {step = step, lr = state.lr}
  for _, name in ipairs(self.slots) do new_state[name] = {} end
  local scalars = self:scalars(state, step)
  local new_params = {}
  for i, p in ipairs(params) do
    local slots = {}
    for _, name in ipairs(self.slots) do slots[name] = state[name][i] end
    local new_slots
    new_params[i], new_slots = self:update_one(p, grads[i], slots, scalars)
    for _, name in ipairs(self.slots) do new_state[name][i] = new_slots[name] end
  end
  return new_params, new_state
end

-- A scalar f32 tensor in the dtype of p (mixed-precision safe).
function Optimizer.like(s, p)
  return p.dtype == s.dtype and s or s:cast(p.dtype)
end

function Optimizer:__tostring()
  return string.format("optim.%s{lr = %g}", self.__name, self.lr)
end

return Optimizer
