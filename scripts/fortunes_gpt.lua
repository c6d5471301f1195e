-- A character-level GPT on Debian's English fortune cookies: a small GPT2Small (2 pre-norm
-- causal decoder blocks of 64 features) learns to predict each next character, then writes
-- cookies from a prompt with model:generate (a key/value cache, one compiled decode step).
-- Each cookie is cut to its first MAX_LEN characters; input = characters 1..n-1, target =
-- characters 2..n. padded_batch pads each batch to its longest cookie rounded up to 16 (at
-- most MAX_LEN / 16 compiled step signatures); the loss ignores the padding (ignore_class = 0)
-- and perplexity is exp of the mean loss over real characters (bits per character: loss / ln 2).
--
--   tputrain scripts/fortunes_gpt.lua [N] [EPOCHS]  -- N cookies (default 2000), EPOCHS (default 3)
--   tputrain --profile scripts/fortunes_gpt.lua     -- generate.decode_step: compiles 1
local tpu = require "tpu"
local nn, optim, data, losses, metrics = tpu.nn, tpu.optim, tpu.data, tpu.losses, tpu.metrics
local cookies = math.tointeger(tonumber(arg and arg[1] or 2000))
local EPOCHS = math.tointeger(tonumber(arg and arg[2] or 3))
assert(cookies and cookies >= 10 and EPOCHS and EPOCHS >= 1,
  "usage: fortunes_gpt.lua [cookies >= 10] [epochs >= 1]")
local MAX_LEN, MULTIPLE, PROMPT, GENERATE = 128, 16, "The ", 96

local F = "/usr/share/games/fortunes/"
local files = {}
for _, name in ipairs {"fortunes", "wisdom", "people", "science", "computers", "work"} do
  files[#files + 1] = F .. name
end

-- Every 10th cookie is a validation cookie.
local train_texts, val_texts = {}, {}
local i = 0
for text in data.fortunes(files):take(cookies):iter() do
  i = i + 1
  table.insert(i % 10 == 0 and val_texts or train_texts, text)
end
local vocab = data.Vocabulary.build(train_texts, {level = "char", min_count = 2})

-- (ids[1..n-1], ids[2..n]) per cookie, sorted by length (ties in a seeded random order) so a
-- batch holds cookies of similar length and pads little.
math.randomseed(1)
local function dataset(texts)
  local rows = {}
  for _, text in ipairs(texts) do
    local ids = vocab:encode(text, {max_len = MAX_LEN + 1})
    if ids.shape[1] >= 2 then rows[#rows + 1] = {ids = ids, key = ids.shape[1] + math.random()} end
  end
  table.sort(rows, function(a, b) return a.key < b.key end)
  return data.range(#rows):map(function(k)
    local ids = rows[k:item() + 1].ids
    local n = ids.shape[1]
    return ids:slice {{1, n - 1}}, ids:slice {{2, n}}
  end, {host = true}), #rows
end
-- GPT-2 takes the ids and a padding mask (1 = character, 0 = padding).
local function with_mask(x, y) return {x, x:ne(0):cast("i32")}, y end
local train_rows, val_rows
local train, val
train, train_rows = dataset(train_texts)
val, val_rows = dataset(val_texts)
train = train:padded_batch(32, {pad_to_multiple_of = MULTIPLE, drop_remainder = true})
  :map(with_mask):cache():shuffle(1000, {seed = 1})
val = val:padded_batch(100, {pad_to_multiple_of = MULTIPLE}):map(with_mask):cache()

local model = tpu.applications.GPT2Small {vocab_size = vocab:size(), max_length = MAX_LEN,
  num_layers = 2, hidden_dim = 64, num_heads = 2, intermediate_dim = 256, dropout = 0,
  logits = true}
model:compile {optimizer = optim.Adam {lr = 3e-3},
               loss = losses.SparseCategoricalCrossentropy {from_logits = true, ignore_class = 0},
               metrics = {metrics.Perplexity {from_logits = true, mask_token_id = 0}}}
print(string.format("%d train and %d validation cookies, %s, %d weights", train_rows, val_rows,
  tostring(vocab), model:count_params()))
local history = model:fit(train, {epochs = EPOCHS, validation_data = val}).history
for e = 1, EPOCHS do
  print(string.format("epoch %d: loss %.4f (%.3f bits/char), perplexity %.3f; validation "
    .. "perplexity %.3f", e, history.loss[e], history.loss[e] / math.log(2),
    history.perplexity[e], history.val_perplexity[e]))
end

-- Continue the prompt: greedy, then sampled (top 10 characters, temperature 0.8, seed 1).
local prompt = vocab:encode(PROMPT)
local length = prompt.shape[1] + GENERATE
print("greedy:  " .. vocab:decode(model:generate(prompt, {max_length = length})))
local before = model.generate_steps.decode:stats()
local start = tpu.core.now()
local sampled = model:generate(prompt, {max_length = length, temperature = 0.8, top_k = 10,
                                        seed = 1})
local seconds = tpu.core.now() - start
print("sampled: " .. vocab:decode(sampled))
local after = model.generate_steps.decode:stats()
print(string.format("sampled generation: decode step compiled %d time(s) for %d steps, %.0f "
  .. "tokens/s", after.compiles - before.compiles, after.executions - before.executions,
  GENERATE / seconds))
