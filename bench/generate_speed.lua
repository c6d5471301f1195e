-- Generation speed of model:generate: tokens/s and ms per token for continuations of 32, 128
-- and 512 tokens from one model whose cache holds 544 positions, and how many times the decode
-- step compiled (once: every step has the same signature, the position is a traced i32).
--
--   tputrain bench/generate_speed.lua [hidden] [layers]     (default 256 features, 4 blocks)
local tpu = require "tpu"
local hidden = math.tointeger(tonumber(arg and arg[1] or 256))
local layers = math.tointeger(tonumber(arg and arg[2] or 4))
local PROMPT, CACHE = 16, 16 + 528

local lm = tpu.applications.GPT2Small {vocab_size = 96, max_length = CACHE, num_layers = layers,
  hidden_dim = hidden, num_heads = hidden // 64, intermediate_dim = 4 * hidden, logits = true}
local prompt = tpu.random.uniform(tpu.random.key(1), {1, PROMPT}) * 96
prompt = prompt:cast("i32")

-- Generates `new` tokens once to compile, then times `rounds` generations (the median).
local function measure(new, rounds)
  local opts = {max_length = PROMPT + new, temperature = 0.8, top_k = 20, seed = 1}
  lm:generate(prompt, opts)
  local times = {}
  for r = 1, rounds do
    local t0 = tpu.core.now()
    local out = lm:generate(prompt, opts)
    out:totable()
    times[r] = tpu.core.now() - t0
  end
  table.sort(times)
  return times[(rounds + 1) // 2]
end

print(string.format("GPT2Small-style LM: %d blocks, %d features, cache %d positions, prompt %d",
  layers, hidden, CACHE, PROMPT))
print("new tokens   seconds   tokens/s   ms/token")
for _, new in ipairs {32, 128, 512} do
  local s = measure(new, 3)
  print(string.format("%10d %9.3f %10.1f %10.2f", new, s, new / s, s / new * 1000))
end
