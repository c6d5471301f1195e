-- One transformer encoder block: self-attention and a feed-forward network, each with dropout,
-- a residual connection and layer normalization (after the residual by default; before each
-- sub-block with normalize_first = true).
--
--   local enc = nn.TransformerEncoder {num_heads = 4, intermediate_dim = 128, dropout = 0.1}
--   enc(x)                      -- x: [batch, length, features]; features divisible by num_heads
--   enc {x, mask = m}           -- m: [batch, length] padding mask (1/true = token, 0 = padding)
local Module = require "tpu.nn.Module"
local Dense = require "tpu.nn.Dense"
local Dropout = require "tpu.nn.Dropout"
local LayerNorm = require "tpu.nn.LayerNorm"
local MultiHeadAttention = require "tpu.nn.MultiHeadAttention"
local util = require "tpu.nn.util"

local TransformerEncoder = Module:extend("TransformerEncoder")
TransformerEncoder.token_wise = true  -- model:generate runs it through ctx.decode, which refuses its non-causal attention by name

-- keras_hub's names (layer_norm_epsilon, the initializers), and epsilon as before.
local options = util.options {"num_heads", "intermediate_dim", "dropout", "activation", "epsilon",
                              "layer_norm_epsilon", "normalize_first", "kernel_initializer",
                              "bias_initializer"}
local who = "TransformerEncoder"

function TransformerEncoder:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  self.num_heads = util.check_integer(who, "num_heads", opts.num_heads)
  self.intermediate_dim = util.check_integer(who, "intermediate_dim", opts.intermediate_dim)
  self.dropout = util.check_range(who, "dropout", opts.dropout or 0, 0, 1, true)
  self.activation = opts.activation or "relu"
  require("tpu.nn.Activation")._get(self.activation, who)
  if opts.epsilon ~= nil and opts.layer_norm_epsilon ~= nil then
    util.fail("TransformerEncoder: give epsilon or layer_norm_epsilon, not both")
  end
  local epsilon_name = opts.epsilon ~= nil and "epsilon" or "layer_norm_epsilon"
  self.epsilon = util.check_positive(who, epsilon_name, opts[epsilon_name] or 1e-5)
  self.kernel_initializer = util.initializer(opts, who, "kernel_initializer", "glorot_uniform")
  self.bias_initializer = util.initializer(opts, who, "bias_initializer", "zeros")
  self.normalize_first = util.flag(who, opts, "normalize_first", false)
end

function TransformerEncoder:build(input_shape)
  local shape = type(input_shape[1]) == "table" and input_shape[1] or input_shape
  local d = shape[#shape]
  if #shape ~= 3 or d % self.num_heads ~= 0 then
    util.fail("TransformerEncoder '%s' expects input [batch, length, features] with features "
      .. "divisible by num_heads = %d, got %s", self.name, self.num_heads, util.shape_text(shape))
  end
  local dtype = self.dtype or self.dtype_policy.name  -- the sublayers follow this layer's policy
  self.attention = MultiHeadAttention {num_heads = self.num_heads, key_dim = d // self.num_heads,
                                       dropout = self.dropout, dtype = dtype,
                                       kernel_initializer = self.kernel_initializer,
                                       bias_initializer = self.bias_initializer}
  self.attention_dropout = Dropout(self.dropout)
  self.attention_norm = LayerNorm {epsilon = self.epsilon, dtype = dtype}
  self.ffn_in = Dense(self.intermediate_dim, {activation = self.activation, dtype = dtype,
                      kernel_initializer = self.kernel_initializer, bias_initializer = self.bias_initializer})
  self.ffn_out = Dense(d, {dtype = dtype, kernel_initializer = self.kernel_initializer,
                           bias_initializer = self.bias_initializer})
  self.ffn_dropout = Dropout(self.dropout)
  self.ffn_norm = LayerNorm {epsilon = self.epsilon, dtype = dtype}
  self.modules = {self.attention, self.attention_dropout, self.attention_norm, self.ffn_in,
                  self.ffn_out, self.ffn_dropout, self.ffn_norm}
  local ffn_shape = util.copy(shape)
  ffn_shape[3] = self.intermediate_dim
  self.attention:maybe_build({shape, shape})
  for _, m in ipairs {self.attention_norm, self.ffn_in, self.ffn_norm} do m:maybe_build(shape) end
  self.ffn_out:maybe_build(ffn_shape)
end

function TransformerEncoder:call(x, ctx)
  local seq, mask = x, nil
  if not util.is_tensor(x) then seq, mask = x[1], x.mask end
  local first = self.normalize_first
  local h = first and self.attention_norm(seq, ctx) or seq
  h = self.attention_dropout(self.attention({h, mask = mask}, ctx), ctx) + seq
  if not first then h = self.attention_norm(h, ctx) end
  local f = first and self.ffn_norm(h, ctx) or h
  f = self.ffn_dropout(self.ffn_out(self.ffn_in(f, ctx), ctx), ctx) + h
  if not first then f = self.ffn_norm(f, ctx) end
  return f
end

function TransformerEncoder:compute_output_shape(input_shape)
  return util.copy(type(input_shape[1]) == "table" and input_shape[1] or input_shape)
end

function TransformerEncoder:repr()
  local head = string.format("nn.TransformerEncoder(%d heads, ff %d, dropout %g%s)", self.num_heads,
    self.intermediate_dim, self.dropout, self.normalize_first and ", normalize_first" or "")
  if not self.built then return head end
  local lines = {head .. " {"}
  for i, m in ipairs(self.modules) do
    lines[#lines + 1] = string.format("  (%d): %s", i, (tostring(m):gsub("\n", "\n  ")))
  end
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n")
end

return TransformerEncoder
