-- Kernel level: a language model's loss, the sparse categorical cross-entropy from logits over
-- [32, 128, VOCAB] (every position's next token), and its gradient for the logits, compiled
-- once, timed over STEPS calls per round: ms per call, the best of ROUNDS rounds and each
-- round's. Alternate two builds in the same minutes to compare them.
--
--   tputrain --threads 2 bench/sparse_crossentropy.lua [VOCAB [STEPS [ROUNDS]]]
local tpu = require "tpu"
local losses, random, core = tpu.losses, tpu.random, tpu.core

local vocab = math.tointeger(tonumber(arg[1] or "1000"))
local steps, rounds = math.tointeger(tonumber(arg[2] or "20")), math.tointeger(tonumber(arg[3] or "5"))
local logits = random.normal(random.key(1), {32, 128, vocab})
local labels = (random.uniform(random.key(2), {32, 128}) * vocab):cast("i32")
local step = tpu.jit(tpu.value_and_grad(function(z, y)
  return losses.sparse_categorical_crossentropy(y, z, {from_logits = true})
end))
local loss, g = step(logits, labels)  -- compiles
local best, times = math.huge, {}
for _ = 1, rounds do
  local t0 = core.now()
  for _ = 1, steps do loss, g = step(logits, labels) end
  g:sum():item()  -- waits for the last call
  local ms = (core.now() - t0) * 1000 / steps
  times[#times + 1] = string.format("%.2f", ms)
  best = math.min(best, ms)
end
print(string.format("sparse cross-entropy and its gradient over 32x128x%d: loss %.6f, best %.2f ms a call (rounds: %s)",
  vocab, loss:item(), best, table.concat(times, " ")))
