-- BertBase and GPT2Small with their default configurations have Hugging Face's parameter counts:
-- bert-base-uncased's BertModel 109,482,240 and gpt2's GPT2Model 124,439,808. A small BERT
-- classifier and a small GPT-2 language model (logits from the tied token embedding) print.
local tpu = require "tpu"
local apps = tpu.applications

local function count(name, model)
  print(string.format("%s: %d parameters, %d layers", name, model:count_params(), #model.layers))
end

count("BertBase", apps.BertBase())
collectgarbage("collect")  -- 438 MB of weights
count("GPT2Small", apps.GPT2Small())
collectgarbage("collect")

local small = {vocab_size = 100, max_length = 16, num_layers = 1, hidden_dim = 16, num_heads = 2,
               intermediate_dim = 32}
local bert = apps.BertBase {vocab_size = 100, max_length = 16, num_layers = 1, hidden_dim = 16,
                            num_heads = 2, intermediate_dim = 32, num_classes = 2}
print(bert)
small.logits = true
local gpt = apps.GPT2Small(small)
print(gpt)
gpt:summary()

local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or err)
end
try(function() apps.BertBase {hidden_size = 64} end)
try(function() apps.BertBase {num_layers = 0} end)
try(function() apps.GPT2Small {hidden_dim = 100} end)
try(function() apps.GPT2Small {logits = 1} end)
try(function() gpt {tpu.zeros({1, 20}, {dtype = "i32"}), tpu.ones({1, 20}, {dtype = "i32"})} end)
