-- BERT (Devlin et al. 2018) as a functional nn.Model, built from public layers. The defaults are
-- bert-base-uncased: 12 post-norm encoder blocks of 768 features, 12 heads, GELU feed-forward of
-- 3072, 512 positions, 2 segments, LayerNorm epsilon 1e-12, dropout 0.1, and the pooler (a tanh
-- Dense on the first token, [CLS]); count_params() = 109,482,240 as Hugging Face's BertModel.
--
--   local bert = tpu.applications.BertBase {vocab_size = 30522, max_length = 512}
--   local sequence, pooled = table.unpack(bert {token_ids, segment_ids, padding_mask})
--   local classifier = tpu.applications.BertBase {num_layers = 2, hidden_dim = 64, num_heads = 2,
--                                                 intermediate_dim = 128, num_classes = 3}
--
-- Inputs (i32 [batch, length], length <= max_length): token ids, segment ids (0 or 1) and the
-- padding mask (1 = token, 0 = padding). Outputs: {sequence [batch, length, hidden_dim],
-- pooled [batch, hidden_dim]}, or with num_classes the logits [batch, num_classes] of a Dense
-- on the dropped-out pooled output (keras_hub's BertClassifier). Every kernel and embedding is
-- drawn with standard deviation 0.02 (Hugging Face's initializer_range), biases zeros; the
-- token embedding's row 0 (the padding token) starts at zeros.
local tpu = require "tpu"
local errors = require "tpu.errors"
local nn = tpu.nn
local text_config = require "tpu.applications.text_config"

-- The first position of a sequence: [batch, length, features] -> [batch, features].
local FirstToken = nn.Module:extend("FirstToken")

function FirstToken:call(x, _ctx)
  local s = x.shape
  return x:slice({{1, s[1]}, {1, 1}}):reshape({s[1], s[3]})
end

function FirstToken:compute_output_shape(input_shape)
  return {input_shape[1], input_shape[3]}
end

-- model:export: position 0 of axis 1 (a Gather with a scalar index drops the axis).
function FirstToken:export_onnx(onnx, x, out_shape)
  return onnx:op("Gather", {x, onnx:constant(0, {}, "i64")}, {axis = 1}, out_shape)
end

local init = text_config.std_002

-- The token embedding's initializer: std 0.02 with row 0 (the padding token, id 0) zeros, as
-- Hugging Face's nn.Embedding(padding_idx = pad_token_id = 0) starts it (training may move it).
local function token_init(key, shape, dtype)
  local t = init(key, shape, dtype)
  local zero = tpu.zeros({1, shape[2]}, {dtype = t.dtype})
  if shape[1] == 1 then return zero end
  return tpu.concat({zero, t:slice({{2, shape[1]}})}, 1)
end

local defaults = {vocab_size = 30522, max_length = 512, num_layers = 12, hidden_dim = 768,
                  num_heads = 12, intermediate_dim = 3072, num_segments = 2, dropout = 0.1}

return function(opts, extra)
  errors.none(2, "BertBase", extra)
  local c = text_config.read("BertBase", opts, defaults, {num_classes = "integer"})
  local ids = nn.Input {shape = {-1}, dtype = "i32", name = "token_ids"}
  local segments = nn.Input {shape = {-1}, dtype = "i32", name = "segment_ids"}
  local mask = nn.Input {shape = {-1}, dtype = "i32", name = "padding_mask"}
  local tokens = nn.Embedding(c.vocab_size, c.hidden_dim, {embeddings_initializer = token_init,
                                                            name = "token_embedding"})(ids)
  local positions = nn.PositionEmbedding {sequence_length = c.max_length, initializer = init,
                                          name = "position_embedding"}(tokens)
  local segment = nn.Embedding(c.num_segments, c.hidden_dim, {embeddings_initializer = init,
                                                              name = "segment_embedding"})(segments)
  local x = nn.Add {name = "embeddings_add"} {tokens, positions, segment}
  x = nn.LayerNorm {epsilon = 1e-12, name = "embeddings_layer_norm"}(x)
  x = nn.Dropout(c.dropout, {name = "embeddings_dropout"})(x)
  for i = 1, c.num_layers do
    x = nn.TransformerEncoder {num_heads = c.num_heads, intermediate_dim = c.intermediate_dim,
      dropout = c.dropout, activation = "gelu", epsilon = 1e-12, kernel_initializer = init,
      name = "transformer_layer_" .. i} {x, mask = mask}
  end
  local pooled = nn.Dense(c.hidden_dim, {activation = "tanh", kernel_initializer = init,
                                         name = "pooled_dense"})(FirstToken {name = "first_token"}(x))
  local outputs = {x, pooled}
  if c.num_classes then
    pooled = nn.Dropout(c.dropout, {name = "classifier_dropout"})(pooled)
    outputs = nn.Dense(c.num_classes, {kernel_initializer = init, name = "logits"})(pooled)
  end
  return nn.Model {inputs = {ids, segments, mask}, outputs = outputs, name = "bert"}
end
