-- Stochastic gradient descent with optional (Nesterov) momentum:
--   v = momentum * v - lr * g;  p = p + v            (nesterov: p = p + momentum * v - lr * g)
-- weight_decay: p shrinks by lr * weight_decay * p first (Optimizer).
local Optimizer = require "tpu.optim.Optimizer"
local util = require "tpu.nn.util"

local SGD = Optimizer:extend("SGD")
SGD.default_lr = 0.01

function SGD:__init(opts)
  opts = opts or {}
  opts = self:init_options(opts, {"momentum", "nesterov", "weight_decay"})
  self:_init_weight_decay(opts)
  self.momentum = self:_number_option(opts, "momentum", 0, 0, 1)
  self.nesterov = util.flag("SGD", opts, "nesterov", false)
  self.slots = self.momentum > 0 and {"velocity"} or {}
end

function SGD:scalars(_state, _step, lr)
  return {lr = lr}
end

SGD.pure_update = true  -- update_one computes from its arguments alone (Optimizer:update)
function SGD:update_one(p, g, slots, s)
  local lr = Optimizer.like(s.lr, p)
  if self.momentum == 0 then return p - lr * g, {} end
  local v = slots.velocity * self.momentum - lr * g
  if self.nesterov then return p + v * self.momentum - lr * g, {velocity = v} end
  return p + v, {velocity = v}
end

return SGD
