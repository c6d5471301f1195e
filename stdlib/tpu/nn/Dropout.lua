-- Zeroes a random fraction `rate` of the elements in training and scales the rest by
-- 1 / (1 - rate); the identity in inference. Randomness comes from ctx.key (fit passes a new
-- key each step as an argument of the compiled step, so masks differ per step and nothing
-- recompiles); each random draw in a step folds its own number into that key.
--
--   nn.Dropout(0.5)
--   layer(x, {training = true, key = tpu.random.key(1)})      -- eager use
local core = require "tpu.core"
local random = require "tpu.random"
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local Dropout = Module:extend("Dropout")

function Dropout:__init(rate, opts)
  self.rate = util.check_range("Dropout", "rate", rate, 0, 1, true)
  opts = opts or {}
  util.check_options(self, opts, util.options {})
  self:init_common(opts)
end

-- x with dropout of `rate` using `key` (also used by MultiHeadAttention on its weights).
function Dropout.apply(x, rate, key)
  local keep = random.bernoulli(key, 1 - rate, x.shape)
  return core.where(keep, x * (1 / (1 - rate)), 0)
end

function Dropout:call(x, ctx)
  if not (ctx and ctx.training) or self.rate == 0 then return x end
  return Dropout.apply(x, self.rate, self:random_key(ctx))
end

function Dropout:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function Dropout:repr()
  return string.format("nn.Dropout(%g)", self.rate)
end

return Dropout
