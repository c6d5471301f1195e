-- One transformer decoder block (keras_hub's TransformerDecoder): causal self-attention, then,
-- when called with an encoder sequence, cross-attention to it, then a feed-forward network;
-- each sub-block has dropout, a residual connection and layer normalization (after the residual
-- by default, as BERT; before each sub-block with normalize_first = true, as GPT-2).
--
--   local dec = nn.TransformerDecoder {num_heads = 4, intermediate_dim = 128, dropout = 0.1}
--   dec(x)                                 -- decoder only (GPT-2): x [batch, T, features]
--   dec {x, encoder_out}                   -- cross-attention to encoder_out [batch, S, features]
--   dec {x, encoder_out, decoder_padding_mask = mt, encoder_padding_mask = ms,
--        use_causal_mask = false}          -- masks [batch, T] / [batch, S]: 1/true = token
-- Options: activation (default "relu"), layer_norm_epsilon (default 1e-5), normalize_first,
-- kernel_initializer, bias_initializer. A block keeps the form of its first call: one called
-- with an encoder sequence must always get one, and the other way round.
local Module = require "tpu.nn.Module"
local Dense = require "tpu.nn.Dense"
local Dropout = require "tpu.nn.Dropout"
local LayerNorm = require "tpu.nn.LayerNorm"
local MultiHeadAttention = require "tpu.nn.MultiHeadAttention"
local util = require "tpu.nn.util"

local TransformerDecoder = Module:extend("TransformerDecoder")
TransformerDecoder.token_wise = true  -- model:generate runs it a token at a time through ctx.decode (causal attention)

local options = util.options {"num_heads", "intermediate_dim", "dropout", "activation",
                              "layer_norm_epsilon", "normalize_first", "kernel_initializer",
                              "bias_initializer"}
local call_keys = {decoder_padding_mask = true, encoder_padding_mask = true, use_causal_mask = true}
local who = "TransformerDecoder"

function TransformerDecoder:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  self.num_heads = util.check_integer(who, "num_heads", opts.num_heads)
  self.intermediate_dim = util.check_integer(who, "intermediate_dim", opts.intermediate_dim)
  self.dropout = util.check_range(who, "dropout", opts.dropout or 0, 0, 1, true)
  self.activation = opts.activation or "relu"
  require("tpu.nn.Activation")._get(self.activation, who)
  self.epsilon = util.check_positive(who, "layer_norm_epsilon", opts.layer_norm_epsilon or 1e-5)
  self.normalize_first = util.flag(who, opts, "normalize_first", false)
  self.kernel_initializer = util.initializer(opts, who, "kernel_initializer", "glorot_uniform")
  self.bias_initializer = util.initializer(opts, who, "bias_initializer", "zeros")
end

-- A sublayer, kept as self[name] and in self.modules (in order).
function TransformerDecoder:_add(name, layer)
  self[name] = layer
  self.modules[#self.modules + 1] = layer
  return layer
end

-- The policy every sublayer follows: this layer's.
function TransformerDecoder:_sublayer_dtype() return self.dtype or self.dtype_policy.name end

function TransformerDecoder:_attention_block(prefix, query_shape, value_shape)
  local d, dtype = query_shape[3], self:_sublayer_dtype()
  local attention = self:_add(prefix, MultiHeadAttention {num_heads = self.num_heads,
    key_dim = d // self.num_heads, dropout = self.dropout, dtype = dtype,
    kernel_initializer = self.kernel_initializer, bias_initializer = self.bias_initializer})
  attention:maybe_build({query_shape, value_shape})
  self:_add(prefix .. "_dropout", Dropout(self.dropout))
  self:_add(prefix .. "_norm", LayerNorm {epsilon = self.epsilon, dtype = dtype})
    :maybe_build(query_shape)
end

function TransformerDecoder:_dense_options(activation)
  return {activation = activation, kernel_initializer = self.kernel_initializer,
          bias_initializer = self.bias_initializer, dtype = self:_sublayer_dtype()}
end

function TransformerDecoder:build(input_shape)
  local nested = type(input_shape[1]) == "table"
  local shape, encoder = nested and input_shape[1] or input_shape, nested and input_shape[2] or nil
  local d = shape[#shape]
  -- The encoder sequence may have other features: cross-attention's key and value kernels take
  -- them, as keras_hub's value_shape does.
  if #shape ~= 3 or d % self.num_heads ~= 0 or (encoder and #encoder ~= 3) then
    util.fail("TransformerDecoder '%s' expects a decoder sequence [batch, length, features] with "
      .. "features divisible by num_heads = %d (and an encoder sequence [batch, length, features]), "
      .. "got %s", self.name, self.num_heads, util.shapes_text(nested and input_shape or {shape}))
  end
  self.cross = encoder ~= nil
  self:_attention_block("self_attention", shape, shape)
  if self.cross then self:_attention_block("cross_attention", shape, encoder) end
  local ffn_shape = util.copy(shape)
  ffn_shape[3] = self.intermediate_dim
  self:_add("ffn_in", Dense(self.intermediate_dim, self:_dense_options(self.activation)))
    :maybe_build(shape)
  self:_add("ffn_out", Dense(d, self:_dense_options())):maybe_build(ffn_shape)
  self:_add("ffn_dropout", Dropout(self.dropout))
  self:_add("ffn_norm", LayerNorm {epsilon = self.epsilon, dtype = self:_sublayer_dtype()}):maybe_build(shape)
end

-- The decoder sequence, the encoder sequence (or nil) and the call's options.
function TransformerDecoder:_parts(x)
  if util.is_tensor(x) then x = {x} end
  for k in pairs(x) do
    if math.type(k) ~= "integer" and not call_keys[k] then
      util.fail("TransformerDecoder '%s': unknown call option '%s' (expected decoder_padding_mask, "
        .. "encoder_padding_mask or use_causal_mask)", self.name, tostring(k))
    end
  end
  if (x[2] ~= nil) ~= self.cross then
    util.fail("TransformerDecoder '%s' was built %s cross-attention: call it as %s every time",
      self.name, self.cross and "with" or "without", self.cross and "layer {x, encoder_sequence}"
      or "layer(x)")
  end
  return x[1], x[2], x
end

-- x + dropout(sublayer(norm(x))) or norm(x + dropout(sublayer(x))).
function TransformerDecoder:_residual(prefix, x, ctx, fn)
  local first, norm = self.normalize_first, self[prefix .. "_norm"]
  local h = fn(first and norm(x, ctx) or x)
  h = self[prefix .. "_dropout"](h, ctx) + x
  return first and h or norm(h, ctx)
end

function TransformerDecoder:call(x, ctx)
  local seq, encoder, o = self:_parts(x)
  local causal = o.use_causal_mask ~= false
  local h = self:_residual("self_attention", seq, ctx, function(q)
    return self.self_attention({q, mask = o.decoder_padding_mask, use_causal_mask = causal}, ctx)
  end)
  if encoder then
    h = self:_residual("cross_attention", h, ctx, function(q)
      return self.cross_attention({q, encoder, mask = o.encoder_padding_mask}, ctx)
    end)
  end
  return self:_residual("ffn", h, ctx, function(f) return self.ffn_out(self.ffn_in(f, ctx), ctx) end)
end

function TransformerDecoder:compute_output_shape(input_shape)
  return util.copy(type(input_shape[1]) == "table" and input_shape[1] or input_shape)
end

function TransformerDecoder:repr()
  local head = string.format("nn.TransformerDecoder(%d heads, ff %d, dropout %g%s%s)",
    self.num_heads, self.intermediate_dim, self.dropout, self.cross and ", cross-attention" or "",
    self.normalize_first and ", normalize_first" or "")
  if not self.built then return head end
  local lines = {head .. " {"}
  for i, m in ipairs(self.modules) do
    lines[#lines + 1] = string.format("  (%d): %s", i, (tostring(m):gsub("\n", "\n  ")))
  end
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n")
end

return TransformerDecoder
