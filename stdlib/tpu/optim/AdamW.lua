-- Adam with decoupled weight decay (Loshchilov & Hutter): before the Adam
-- update each weight shrinks by lr * weight_decay * p.
--   optim.AdamW {lr = 1e-3, weight_decay = 0.004}     -- the default weight_decay
local Adam = require "tpu.optim.Adam"
local Optimizer = require "tpu.optim.Optimizer"

local AdamW = Adam:extend("AdamW")
AdamW.options = {"beta1", "beta2", "epsilon", "weight_decay"}

function AdamW:__init(opts)
  opts = opts or {}
  opts = self:init_options(opts, self.options)
  self:_init_moments(opts)
  self.weight_decay = self:_check_number("weight_decay", opts.weight_decay or 0.004, 0)
end

AdamW.pure_update = true  -- update_one computes from its arguments alone (Optimizer:update)
function AdamW:update_one(p, g, slots, s)
  local decayed = p - Optimizer.like(s.lr * self.weight_decay, p) * p
  return Adam.update_one(self, decayed, g, slots, s)
end

return AdamW
