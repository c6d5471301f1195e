-- model:generate checks the model and its options: each message says what was expected and
-- echoes what was received, at the user's line.
local tpu = require "tpu"
local nn = tpu.nn

local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or err)
end

local lm = tpu.applications.GPT2Small {vocab_size = 11, max_length = 16, num_layers = 1,
  hidden_dim = 8, num_heads = 2, intermediate_dim = 16, logits = true}
local ids = tpu.tensor({{1, 2, 3}}, {dtype = "i32"})
-- not a decoder language model
try(function() nn.Sequential {nn.Embedding(11, 8), nn.Dense(11)}:generate(ids, {max_length = 8}) end)
local encoder = nn.Sequential {nn.Embedding(11, 8), nn.TransformerEncoder {num_heads = 2,
  intermediate_dim = 16}, nn.Dense(11)}
try(function() encoder:generate(ids, {max_length = 8}) end)
local hidden = tpu.applications.GPT2Small {vocab_size = 11, max_length = 16, num_layers = 1,
  hidden_dim = 8, num_heads = 2, intermediate_dim = 16}
try(function() hidden:generate(ids, {max_length = 8}) end)
-- generate beyond max_length
try(function() lm:generate(ids, {max_length = 17}) end)
try(function() lm:generate(ids, {max_length = 3}) end)
try(function() lm:generate(ids, {}) end)
-- bad options and ids
try(function() lm:generate(ids, {max_length = 8, temperature = -1}) end)
try(function() lm:generate(ids, {max_length = 8, top_k = 0}) end)
try(function() lm:generate(ids, {max_length = 8, seed = "a"}) end)
try(function() lm:generate(ids, {max_len = 8}) end)
try(function() lm:generate(ids, 8) end)
try(function() lm:generate(tpu.tensor {{1.5, 2}}, {max_length = 8}) end)
try(function() lm:generate({1, "b"}, {max_length = 8}) end)
try(function() lm:generate({}, {max_length = 8}) end)
try(function() lm:generate(ids, {max_length = 8, stop_token_ids = "eos"}) end)
try(function() lm:generate(ids, {max_length = 8, top_p = 1.5}) end)
-- prompts as Lua lists of lists: one length, integers
try(function() lm:generate({{1, 2}, {3, 4, 5}}, {max_length = 8}) end)
try(function() lm:generate({{1, 2}, 3}, {max_length = 8}) end)
try(function() lm:generate({{1, 2}, {3, 0.5}}, {max_length = 8}) end)
