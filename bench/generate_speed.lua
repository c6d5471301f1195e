-- Generation speed of model:generate with one fixed-size key/value cache (528 positions): 32,
-- 128 and 512 new tokens (after prompts of 496, 400 and 16 tokens, so every generation fills the
-- same cache). The decode step is compiled once for the cache and then costs the same at every
-- position: ms per token is the same for the three, whatever the sequence length so far.
--
--   tputrain bench/generate_speed.lua [hidden] [layers]     (default 256 features, 4 blocks)
local tpu = require "tpu"
local hidden = math.tointeger(tonumber(arg and arg[1] or 256))
local layers = math.tointeger(tonumber(arg and arg[2] or 4))
local CACHE = 528

local lm = tpu.applications.GPT2Small {vocab_size = 96, max_length = CACHE, num_layers = layers,
  hidden_dim = hidden, num_heads = hidden // 64, intermediate_dim = 4 * hidden, logits = true}
local tokens = (tpu.random.uniform(tpu.random.key(1), {1, CACHE}) * 96):cast("i32")

-- Median of `rounds` timed generations of `new` tokens (after one that compiles): the whole
-- call, and the decode steps alone (from the jit statistics).
local function measure(new, rounds)
  local prompt = tokens:slice {{1, 1}, {1, CACHE - new}}
  local opts = {max_length = CACHE, temperature = 0.8, top_k = 20, seed = 1}
  lm:generate(prompt, opts)
  local whole, steps = {}, {}
  for r = 1, rounds do
    local decode = lm.generate_steps and lm.generate_steps.decode
    local before = decode and decode:stats() or {run_ms = 0, executions = 0}
    local t0 = tpu.core.now()
    lm:generate(prompt, opts):totable()
    whole[r] = tpu.core.now() - t0
    local after = decode and decode:stats() or {run_ms = 0, executions = 1}
    steps[r] = (after.run_ms - before.run_ms) / math.max(1, after.executions - before.executions)
  end
  table.sort(whole)
  table.sort(steps)
  return whole[(rounds + 1) // 2], steps[(rounds + 1) // 2]
end

print(string.format("GPT2Small-style LM: %d blocks, %d features; key/value cache of %d positions",
  layers, hidden, CACHE))
print("new tokens   prompt   seconds   tokens/s   ms/token (whole call)   ms/decode step")
for _, new in ipairs {32, 128, 512} do
  local s, step_ms = measure(new, 3)
  print(string.format("%10d %8d %9.3f %10.1f %23.2f %16.2f", new, CACHE - new, s, new / s, s / new * 1000, step_ms))
end
