-- Adam with decoupled weight decay (Loshchilov & Hutter): before the Adam
-- update each weight shrinks by lr * weight_decay * p. Keras's AdamW: Adam whose weight_decay
-- defaults to 0.004 (the decay itself is Optimizer's, as for every optimizer taking it).
--   optim.AdamW {lr = 1e-3, weight_decay = 0.004}     -- the default weight_decay
local Adam = require "tpu.optim.Adam"

local AdamW = Adam:extend("AdamW")

function AdamW:__init(opts)
  opts = opts or {}
  opts = self:init_options(opts, self.options)
  self:_init_moments(opts)
  self:_init_weight_decay(opts, 0.004)
end

return AdamW
