-- Zeroes a random fraction `rate` of the elements in training and scales the rest by
-- 1 / (1 - rate); the identity in inference. Randomness comes from ctx.key (fit passes a new
-- key each step as an argument of the compiled step, so masks differ per step and nothing
-- recompiles); each random draw in a step folds its own number into that key.
--
-- noise_shape (Keras's) draws the mask at a smaller shape that broadcasts to the input: -1
-- takes the input's size, 1 shares one draw along that axis; {-1, 1, 1, 1} on images keeps or
-- drops each example whole (stochastic depth, as EfficientNet's blocks do).
--
--   nn.Dropout(0.5)       nn.Dropout(0.2, {noise_shape = {-1, 1, 1, 1}})
--   layer(x, {training = true, key = tpu.random.key(1)})      -- eager use
local core = require "tpu.core"
local random = require "tpu.random"
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local Dropout = Module:extend("Dropout")
Dropout.token_wise = true  -- each position on its own: model:generate may run it a token at a time
Dropout.takes_one_tensor = true  -- a list of tensors given to it is an error naming it
Dropout.keeps_probabilities = "scales"  -- a softmax's output stays one (Module:__call)

function Dropout:__init(rate, opts)
  self.rate = util.check_range("Dropout", "rate", rate, 0, 1, true)
  opts = opts or {}
  util.check_options(self, opts, util.options {"noise_shape"})
  self:init_common(opts)
  self.noise_shape = opts.noise_shape
  local ok = self.noise_shape == nil or type(self.noise_shape) == "table" and not util.is_tensor(self.noise_shape)
  for _, n in ipairs(ok and self.noise_shape or {}) do ok = ok and (n == -1 or util.is_positive_integer(n)) end
  if not ok then
    util.fail("Dropout: noise_shape must be a list of sizes (-1 for the input's), got %s", util.show(opts.noise_shape))
  end
end

-- Each entry of noise_shape is -1, 1 or the input's size.
function Dropout:build(input_shape)
  local ns = self.noise_shape
  if ns == nil then return end
  local ok = #ns == #input_shape
  for i = 1, ok and #ns or 0 do ok = ok and (ns[i] == -1 or ns[i] == 1 or ns[i] == input_shape[i]) end
  if not ok then
    util.fail("Dropout '%s': noise_shape %s does not broadcast to the input %s (each entry -1, 1 "
      .. "or the input's size)", self.name, util.show(ns), util.shape_text(input_shape))
  end
end

-- The draw of dropout at `rate` over `shape` with `key`: the keep mask and the kept entries'
-- scale (also MultiHeadAttention's fused attention, which applies them itself).
function Dropout._keep(rate, key, shape)
  return random.bernoulli(key, 1 - rate, shape), 1 / (1 - rate)
end

-- x with dropout of `rate` using `key` (also used by MultiHeadAttention on its weights).
function Dropout._apply(x, rate, key)
  local keep, scale = Dropout._keep(rate, key, x.shape)
  return core.where(keep, x * scale, 0)
end

function Dropout:call(x, ctx)
  if not (ctx and ctx.training) or self.rate == 0 then return x end
  if self.noise_shape == nil then return Dropout._apply(x, self.rate, self:random_key(ctx)) end
  local shape = {}
  for i, n in ipairs(self.noise_shape) do shape[i] = n == -1 and x.shape[i] or n end
  local keep, scale = Dropout._keep(self.rate, self:random_key(ctx), shape)
  return x * (keep:cast(x.dtype) * scale)
end

function Dropout:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function Dropout:repr()
  return string.format("nn.Dropout(%g)", self.rate)
end

return Dropout
