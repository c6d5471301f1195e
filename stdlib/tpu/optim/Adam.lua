-- Adam (Kingma & Ba), the bias correction folded into the step size:
--   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
--   p = p - lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + epsilon)
-- amsgrad = true (Reddi et al.): v_hat = max(v_hat, v), a third slot, replaces v in the
-- denominator. weight_decay: p shrinks by lr * weight_decay * p first (Optimizer).
local Optimizer = require "tpu.optim.Optimizer"
local util = require "tpu.nn.util"

local Adam = Optimizer:extend("Adam")
Adam.default_lr = 1e-3
Adam.slots = {"m", "v"}
Adam.options = {"beta1", "beta2", "epsilon", "weight_decay", "amsgrad"}

function Adam:__init(opts)
  opts = opts or {}
  opts = self:init_options(opts, self.options)
  self:_init_moments(opts)
  self:_init_weight_decay(opts)
end

function Adam:_init_moments(opts)
  self.beta1 = self:_number_option(opts, "beta1", 0.9, 0, 1)
  self.beta2 = self:_number_option(opts, "beta2", 0.999, 0, 1)
  self.epsilon = self:_number_option(opts, "epsilon", 1e-7, 0)
  self.amsgrad = util.flag(self.__name, opts, "amsgrad", false)
  if self.amsgrad then self.slots = {"m", "v", "v_hat"} end
end

-- b^t as exp(t log b), with t a traced step count.
local function power(b, t)
  if b == 0 then return t * 0 end
  return (t * math.log(b)):exp()
end

function Adam:scalars(_state, step, lr)
  local t = step:cast("f32")
  local alpha = lr * (1 - power(self.beta2, t)):sqrt() / (1 - power(self.beta1, t))
  return {alpha = alpha, lr = lr}
end

Adam.pure_update = true  -- update_one computes from its arguments alone (Optimizer:update)
function Adam:update_one(p, g, slots, s)
  local m = slots.m * self.beta1 + g * (1 - self.beta1)
  local v = slots.v * self.beta2 + (g * g) * (1 - self.beta2)
  local v_hat = self.amsgrad and slots.v_hat:maximum(v) or nil  -- the denominator's v, if kept
  local new_p = p - Optimizer.like(s.alpha, p) * m / ((v_hat or v):sqrt() + self.epsilon)
  return new_p, {m = m, v = v, v_hat = v_hat}
end

return Adam
