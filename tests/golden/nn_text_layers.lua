-- The layers of text models and gates: constructor and call errors (each names the layer and the
-- argument, says what was expected and echoes what was received, at the user's line), then
-- print(model) and model:summary() of a small decoder with cross-attention, position embeddings
-- and a swish gate.
local tpu = require "tpu"
local nn = tpu.nn

local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or err)
end

try(function() nn.Multiply {axis = 1} end)
try(function() nn.Multiply() {tpu.zeros({2, 3}), tpu.zeros({2, 4})} end)
try(function() nn.Activation("hard_swishh") end)
try(function() nn.PositionEmbedding {} end)
try(function() nn.PositionEmbedding {sequence_length = 0.5} end)
try(function() nn.PositionEmbedding {sequence_length = 4, initializer = "normal"} end)
try(function() nn.PositionEmbedding {sequence_length = 4}(tpu.zeros({1, 6, 2})) end)
try(function() nn.MultiHeadAttention {num_heads = 1, key_dim = 2} {tpu.zeros({1, 2, 2}), use_causal_mask = "yes"} end)
try(function() nn.TransformerDecoder {intermediate_dim = 8} end)
try(function() nn.TransformerDecoder {num_heads = 2, intermediate_dim = 8, dropout = -0.1} end)
try(function() nn.TransformerDecoder {num_heads = 2, intermediate_dim = 8, layer_norm_epsilon = 0} end)
try(function() nn.TransformerDecoder {num_heads = 2, intermediate_dim = 8, activation = "swishy"} end)
try(function() nn.TransformerDecoder {num_heads = 2, intermediate_dim = 8, normalize_first = 1} end)
try(function() nn.TransformerDecoder {num_heads = 3, intermediate_dim = 8}(tpu.zeros({1, 2, 4})) end)
try(function() nn.TransformerDecoder {num_heads = 2, intermediate_dim = 8} {tpu.zeros({1, 2, 4}), tpu.zeros({1, 6})} end)
try(function() nn.TransformerDecoder {num_heads = 2, intermediate_dim = 8} {tpu.zeros({1, 2, 4}), padding_mask = 1} end)

local target = nn.Input {shape = {8}, dtype = "i32", name = "target"}
local source = nn.Input {shape = {6, 16}, name = "source"}
local x = nn.Embedding(100, 16, {name = "tokens"})(target)
x = nn.Add() {x, nn.PositionEmbedding {sequence_length = 10, name = "positions"}(x)}
x = nn.TransformerDecoder {num_heads = 4, intermediate_dim = 32, dropout = 0.1, name = "decoder"} {x, source}
x = nn.Multiply {name = "gate"} {x, nn.Dense(16, {activation = "swish", name = "swish_gate"})(x)}
local model = nn.Model {inputs = {target, source}, outputs = nn.Dense(100, {name = "next_token"})(x)}
print(model)
model:summary()
