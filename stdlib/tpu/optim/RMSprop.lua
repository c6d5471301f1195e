-- RMSprop:
--   v = rho v + (1 - rho) g^2;  step = lr * g / sqrt(v + epsilon)
--   centered: a = rho a + (1 - rho) g, and v - a^2 replaces v
--   momentum: m = momentum m + step; p = p - m   (else p = p - step)
--   weight_decay: p shrinks by lr * weight_decay * p first (Optimizer)
--   optim.RMSprop {lr = 1e-3, rho = 0.9, momentum = 0, epsilon = 1e-7, centered = false}
local Optimizer = require "tpu.optim.Optimizer"
local util = require "tpu.nn.util"

local RMSprop = Optimizer:extend("RMSprop")
RMSprop.default_lr = 1e-3

function RMSprop:__init(opts)
  opts = opts or {}
  opts = self:init_options(opts, {"rho", "momentum", "epsilon", "centered", "weight_decay"})
  self:_init_weight_decay(opts)
  self.rho = self:_number_option(opts, "rho", 0.9, 0, 1)
  self.momentum = self:_number_option(opts, "momentum", 0, 0, 1)
  self.epsilon = self:_number_option(opts, "epsilon", 1e-7, 0)
  self.centered = util.flag("RMSprop", opts, "centered", false)
  self.slots = {"velocity"}
  if self.momentum > 0 then self.slots[#self.slots + 1] = "momentum" end
  if self.centered then self.slots[#self.slots + 1] = "average_gradient" end
end

function RMSprop:scalars(_state, _step, lr)
  return {lr = lr}
end

RMSprop.pure_update = true  -- update_one computes from its arguments alone (Optimizer:update)
function RMSprop:update_one(p, g, slots, s)
  local rho = self.rho
  local new = {velocity = slots.velocity * rho + g * g * (1 - rho)}
  local denominator = new.velocity
  if self.centered then
    new.average_gradient = slots.average_gradient * rho + g * (1 - rho)
    denominator = denominator - new.average_gradient:square()
  end
  local increment = Optimizer.like(s.lr, p) * g * (denominator + self.epsilon):rsqrt()
  if self.momentum > 0 then
    new.momentum = slots.momentum * self.momentum + increment
    return p - new.momentum, new
  end
  return p - increment, new
end

return RMSprop
