-- GPT-2 (Radford et al. 2019) as a functional nn.Model, built from public layers. The defaults
-- are GPT-2 small: 12 pre-norm causal decoder blocks of 768 features, 12 heads, a feed-forward of
-- 3072 with the tanh-approximated GELU, 1024 positions, LayerNorm epsilon 1e-5, dropout 0.1 and
-- a final LayerNorm; count_params() = 124,439,808 as Hugging Face's GPT2Model. (GPT-2 fuses the
-- query, key and value projections into one [768, 2304] matrix; three [768, 768] ones hold the
-- same numbers of weights and compute the same.)
--
--   local gpt2 = tpu.applications.GPT2Small {vocab_size = 50257, max_length = 1024}
--   local hidden = gpt2 {token_ids, padding_mask}           -- [batch, length, hidden_dim]
--   local lm = tpu.applications.GPT2Small {num_layers = 2, hidden_dim = 64, num_heads = 2,
--                                          intermediate_dim = 256, logits = true}
--
-- Inputs (i32 [batch, length], length <= max_length): token ids and the padding mask (1 = token,
-- 0 = padding). The output is the last hidden states, or with logits = true the next-token logits
-- [batch, length, vocab_size] from the token embedding itself (tied, as GPT-2's LM head: no new
-- weights). Kernels and embeddings are drawn with standard deviation 0.02, biases zeros, but the
-- two projections ending on the residual stream in each block (the attention output and the
-- feed-forward output, GPT-2's c_proj) with 0.02 / sqrt(2 * num_layers), as Hugging Face's.
local tpu = require "tpu"
local errors = require "tpu.errors"
local nn = tpu.nn
local util = require "tpu.nn.util"
local text_config = require "tpu.applications.text_config"

-- hidden [batch, length, d] @ embeddings^T [d, vocab]: the logits of a language model whose
-- output projection is its token embedding (the weights stay the Embedding layer's).
local TiedLogits = nn.Module:extend("TiedLogits")
TiedLogits.token_wise = true  -- each position on its own: model:generate may run it a token at a time

function TiedLogits:__init(embedding, opts)
  self:init_common(opts or {})
  -- A reference, not a sublayer: the weights stay the Embedding layer's (the model lists it).
  rawset(self, "embedding", embedding)
end

function TiedLogits:call(h, _ctx)
  return util.policy_matmul(h, self.embedding.embeddings:transpose({2, 1}), self.dtype_policy)
end

function TiedLogits:repr()
  return string.format("TiedLogits(%s)", self.embedding.name)
end

-- model:export: h @ the transposed embedding table, the table written once (the Embedding's).
function TiedLogits:export_onnx(onnx, h, out_shape)
  local table_ = onnx:weight(self.embedding.embeddings)  -- [vocab, d]
  local vocab, d = table.unpack(table_.shape)
  local transposed = onnx:op("Transpose", {table_}, {perm = {1, 0}}, {d, vocab})
  return onnx:op("MatMul", {h, transposed}, nil, out_shape)
end

local init = text_config.std_002

-- Hugging Face's GPT-2 draws the two projections that end on a block's residual stream (c_proj:
-- the attention output and the feed-forward output) again with std 0.02 / sqrt(2 * n_layer),
-- so the residual sum of the 2 * n_layer branches keeps its scale: the block's kernel `name` of
-- `layer` is drawn again with that deviation (a key from the initializers' stream).
local function redraw(layer, name, initializer)
  local list = {}
  layer:each_weight(function(_, entry)
    local v = entry.value
    list[#list + 1] = entry.name == name
      and initializer(require("tpu.nn.initializers")._next_key(), v.shape, v.dtype) or v
  end)
  layer:set_parameters(list)
end

local defaults = {vocab_size = 50257, max_length = 1024, num_layers = 12, hidden_dim = 768,
                  num_heads = 12, intermediate_dim = 3072, dropout = 0.1}

return function(opts, extra)
  errors.none(2, "GPT2Small", extra)
  local c = text_config.read("GPT2Small", opts, defaults, {logits = "boolean"})
  local ids = nn.Input {shape = {-1}, dtype = "i32", name = "token_ids"}
  local mask = nn.Input {shape = {-1}, dtype = "i32", name = "padding_mask"}
  local embedding = nn.Embedding(c.vocab_size, c.hidden_dim, {embeddings_initializer = init,
                                                               name = "token_embedding"})
  local tokens = embedding(ids)
  local positions = nn.PositionEmbedding {sequence_length = c.max_length, initializer = init,
                                          name = "position_embedding"}(tokens)
  local x = nn.Add {name = "embeddings_add"} {tokens, positions}
  x = nn.Dropout(c.dropout, {name = "embeddings_dropout"})(x)
  local residual_init = text_config.uniform_std(0.02 / math.sqrt(2 * c.num_layers))
  for i = 1, c.num_layers do
    local block = nn.TransformerDecoder {num_heads = c.num_heads,
      intermediate_dim = c.intermediate_dim, dropout = c.dropout, activation = "gelu_approximate",
      layer_norm_epsilon = 1e-5, normalize_first = true, kernel_initializer = init,
      name = "transformer_layer_" .. i}
    x = block {x, decoder_padding_mask = mask}
    redraw(block.self_attention, "output_kernel", residual_init)
    redraw(block.ffn_out, "kernel", residual_init)
  end
  x = nn.LayerNorm {epsilon = 1e-5, name = "layer_norm"}(x)
  if c.logits then x = TiedLogits(embedding, {name = "logits"})(x) end
  return nn.Model {inputs = {ids, mask}, outputs = x, name = "gpt2"}
end
