-- Multi-head scaled dot-product attention over sequences [batch, length, features].
--
--   local attn = nn.MultiHeadAttention {num_heads = 4, key_dim = 16}
--   attn(x)                                  -- self-attention
--   attn {query, value}                      -- cross-attention (key = value)
--   attn {query, value, key, mask = m}       -- m: [batch, S] padding mask (1/true = attend,
--                                            -- 0/false = padding) or [batch, T, S]
--   attn {x, use_causal_mask = true}         -- query t attends to keys 1..t only (decoders)
-- Options: value_dim (default key_dim), dropout (on the attention weights, in training),
-- use_bias, output_dim (default: the query's features), kernel_initializer, bias_initializer,
-- flash_attention (true: one fused op that never holds the [batch, heads, T, S] weights;
-- false: the separate ops, which differentiate twice; nil, the default: fused for heads of
-- fewer than 64 features, where it is the faster path).
local core = require "tpu.core"
local Module = require "tpu.nn.Module"
local Dropout = require "tpu.nn.Dropout"
local util = require "tpu.nn.util"
local flash_attention = require "tpu.nn.flash_attention"

local MultiHeadAttention = Module:extend("MultiHeadAttention")
MultiHeadAttention.token_wise = true  -- model:generate runs it a token at a time through ctx.decode (causal attention)

local options = util.options {"num_heads", "key_dim", "value_dim", "dropout", "use_bias",
                              "output_dim", "kernel_initializer", "bias_initializer", "flash_attention"}
local who = "MultiHeadAttention"

function MultiHeadAttention:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  self.num_heads = util.check_integer(who, "num_heads", opts.num_heads)
  self.key_dim = util.check_integer(who, "key_dim", opts.key_dim)
  self.value_dim = util.check_integer(who, "value_dim", opts.value_dim or self.key_dim)
  self.output_dim = opts.output_dim and util.check_integer(who, "output_dim", opts.output_dim)
  self.dropout = util.check_range(who, "dropout", opts.dropout or 0, 0, 1, true)
  self.use_bias = util.flag(who, opts, "use_bias", true)
  if opts.flash_attention ~= nil then self.flash_attention = util.flag(who, opts, "flash_attention") end
  self.kernel_initializer = util.initializer(opts, who, "kernel_initializer", "glorot_uniform")
  self.bias_initializer = util.initializer(opts, who, "bias_initializer", "zeros")
end

-- query, value, key, mask and use_causal_mask from a tensor (self-attention) or a list
-- {query, value, key, mask=, use_causal_mask=}.
local function parts(x)
  if util.is_tensor(x) then return x, x, x, nil, false end
  local v = x[2] or x[1]
  local causal = util.flag(who, x, "use_causal_mask", false)
  return x[1], v, x[3] or v, x.mask, causal
end

-- A projection's kernel, kept as the matrix its product takes, [n_in, n_out], and drawn as
-- Keras draws it in its own shape (`drawn`: [features, heads, dim] for the query, key and value,
-- [heads, dim, features] for the output), whose initializer fans count the heads too.
function MultiHeadAttention:_dense(name, n_in, n_out, drawn)
  local init = require("tpu.nn.initializers").get(self.kernel_initializer, "MultiHeadAttention: kernel_initializer")
  self:add_weight {name = name .. "_kernel", shape = {n_in, n_out},
                   initializer = function(key, shape, dtype) return init(key, drawn, dtype):reshape(shape) end}
  if self.use_bias then
    self:add_weight {name = name .. "_bias", shape = {n_out}, initializer = self.bias_initializer}
  end
end

-- Every call's query, value and key are [batch, length, features] (not only the first's).
local function check_ranks(self, shapes, q, v, k)
  for _, s in ipairs {q, v, k} do
    if #s ~= 3 then
      util.fail("MultiHeadAttention '%s' expects query, value and key of shape [batch, length, "
        .. "features], got %s", self.name, util.shapes_text(shapes))
    end
  end
end

function MultiHeadAttention:build(input_shape)
  local shapes = type(input_shape[1]) == "table" and input_shape or {input_shape}
  local q, v = shapes[1], shapes[2] or shapes[1]
  local k = shapes[3] or v
  check_ranks(self, shapes, q, v, k)
  local h = self.num_heads
  self.query_dim = q[3]
  local out = self.output_dim or q[3]
  self:_dense("query", q[3], h * self.key_dim, {q[3], h, self.key_dim})
  self:_dense("key", k[3], h * self.key_dim, {k[3], h, self.key_dim})
  self:_dense("value", v[3], h * self.value_dim, {v[3], h, self.value_dim})
  self:_dense("output", h * self.value_dim, out, {h, self.value_dim, out})
end

-- [batch, len, features] @ kernel -> [batch, heads, len, dim]
function MultiHeadAttention:_project(t, name, dim)
  local y = util.policy_matmul(t, self[name .. "_kernel"], self.dtype_policy)
  if self.use_bias then y = y + util.cast_float(self[name .. "_bias"], y.dtype) end
  local s = t.shape
  return y:reshape({s[1], s[2], self.num_heads, dim}):transpose({1, 3, 2, 4})
end

-- The keys each query may attend to, 1 or 0 (f32) broadcast over heads: the padding mask
-- (0/false = padding; [batch, S] or [batch, T, S]) AND, with use_causal_mask, the lower
-- triangle (key s not after query t). One mask, applied once as Keras does: a key masked by
-- both gets -1e9 as any other, so a query with no key left attends to all keys uniformly.
local function allowed(mask, use_causal_mask, t, s)
  local m
  if mask then
    local ms = mask.shape
    m = mask.dtype == "bool" and mask:cast("f32") or mask:ne(0):cast("f32")
    m = #ms == 2 and m:reshape({ms[1], 1, 1, ms[2]}) or m:reshape({ms[1], 1, ms[2], ms[3]})
  end
  if use_causal_mask then
    local lower = core.arange(s):reshape({1, s}):le(core.arange(t):reshape({t, 1}))
    lower = lower:cast("f32"):reshape({1, 1, t, s})
    m = m and m * lower or lower
  end
  return m
end

-- [batch, heads, T, value_dim] attention outputs -> [batch, T, output_dim].
function MultiHeadAttention:_merge_heads(out, q_shape)
  out = out:transpose({1, 3, 2, 4}):reshape({q_shape[1], q_shape[2],
                                             self.num_heads * self.value_dim})
  out = util.policy_matmul(out, self.output_kernel, self.dtype_policy)
  if self.use_bias then out = out + util.cast_float(self.output_bias, out.dtype) end
  return out
end

-- One attention op (core.attention), which never holds the [batch, heads, T, S] probabilities
-- in memory. A padding mask enters as a score bias (0 where allowed, -1e9 where not, the causal
-- triangle folded in), [batch, 1, 1 or T, S]: the unfused path's numbers, the one row a
-- sequence shared by its heads and queries; without one the causal mask is the op's own. The
-- dropout's keep mask and scale are Dropout's draw (Dropout._keep: the same key, shape and
-- rate), so the same weights are dropped. The heads enter in the policy's compute dtype, as the
-- matmuls take them (bf16 ones are computed on in f32 and the result rounded once), and the
-- result stays in it: the output projection reads it in that dtype. Its gradient is not
-- differentiable again (a gradient of a gradient raises an error; flash_attention = false, or
-- nn.disable_flash_attention(), takes the unfused path).
function MultiHeadAttention:_fused(qh, kh, vh, mask, causal, ctx)
  local keep, scale, bias
  if ctx and ctx.training and self.dropout > 0 then
    local shape = {qh.shape[1], qh.shape[2], qh.shape[3], kh.shape[3]}
    keep, scale = Dropout._keep(self.dropout, self:random_key(ctx), shape)
  end
  if mask then
    bias = (1 - allowed(mask, causal, qh.shape[3], kh.shape[3])) * -1e9
    causal = false
  end
  local c = self.dtype_policy.compute_dtype
  return core.attention(util.cast_float(qh, c), util.cast_float(kh, c), util.cast_float(vh, c), keep, scale, causal, bias)
end

-- The separate ops (flash_attention = false): the scores, the mask as -1e9 added, the softmax,
-- the dropout, the product with the values.
function MultiHeadAttention:_unfused(qh, kh, vh, mask, use_causal_mask, ctx)
  local policy = self.dtype_policy
  local scores = util.cast_float(util.policy_matmul(qh, kh:transpose({1, 2, 4, 3}), policy), "f32")
  local m = allowed(mask, use_causal_mask, scores.shape[3], scores.shape[4])
  if m then scores = scores + (1 - m) * -1e9 end
  local weights = scores:softmax(-1)
  if ctx and ctx.training and self.dropout > 0 then
    weights = Dropout._apply(weights, self.dropout, self:random_key(ctx))
  end
  return util.policy_matmul(weights, vh, policy)
end

-- A mask is [batch, S] or [batch, T, S] for a query [batch, T, ...] and a key [batch, S, ...].
local function check_mask(self, mask, q, k)
  if not util.is_tensor(mask) then
    util.fail("MultiHeadAttention '%s': the mask must be a tensor, got %s", self.name, util.show(mask))
  end
  local ms, b, t, s = mask.shape, q[1], q[2], k[2]
  local fits = (#ms == 2 and ms[1] == b and ms[2] == s) or (#ms == 3 and ms[1] == b and ms[2] == t and ms[3] == s)
  if not fits then
    util.fail("MultiHeadAttention '%s': the mask must be [batch, S] = [%d, %d] or [batch, T, S] = [%d, %d, %d] "
      .. "for a query of %d steps and a key of %d, got [%s]", self.name, b, s, b, t, s, t, s, table.concat(ms, ", "))
  end
end

-- Whether the call takes the fused op: flash_attention, else the process-wide choice, else the
-- faster path. The fused kernel computes its products in f32 register tiles; from 64 features a
-- head the separate matmuls (oneDNN's, on the bf16 units under a bf16 policy) outrun it: a
-- BERT of 256 features in 4 heads of 64 trained about 8% faster unfused in f32 and 7% in bf16;
-- heads of 32 even, heads of 16 (the small bench transformer) 15% faster fused.
function MultiHeadAttention:_flash()
  if self.flash_attention ~= nil then return self.flash_attention end
  local everywhere = flash_attention.is_flash_attention_enabled()
  if everywhere ~= nil then return everywhere end
  return self.key_dim < 64
end

function MultiHeadAttention:call(x, ctx)
  local q, v, k, mask, use_causal_mask = parts(x)
  local given = util.is_tensor(x) and {q.shape} or {q.shape, x[2] and v.shape, x[3] and k.shape}
  check_ranks(self, given, q.shape, v.shape, k.shape)
  -- model:generate: attention over a key/value cache (tpu/nn/generate.lua)
  if ctx and ctx.decode then return ctx.decode:attention(self, q, use_causal_mask, v ~= q) end
  if mask ~= nil then check_mask(self, mask, q.shape, k.shape) end
  -- The query is scaled before the product, as Keras does: a pass over the [B, H, T, S] scores
  -- (5% of a small transformer's step) becomes one over the query, key_dim / S as large.
  local qh = self:_project(q, "query", self.key_dim) * (1 / math.sqrt(self.key_dim))
  local kh = self:_project(k, "key", self.key_dim)
  local vh = self:_project(v, "value", self.value_dim)
  local attend = self:_flash() and self._fused or self._unfused
  return self:_merge_heads(attend(self, qh, kh, vh, mask, use_causal_mask, ctx), q.shape)
end

function MultiHeadAttention:compute_output_shape(input_shape)
  local q = type(input_shape[1]) == "table" and input_shape[1] or input_shape
  return {q[1], q[2], self.output_dim or q[3]}
end

function MultiHeadAttention:repr()
  local dims = self.built
               and string.format("%d -> %d, ", self.query_dim, self.output_kernel.shape[2]) or ""
  return string.format("nn.MultiHeadAttention(%s%d heads x %d)", dims, self.num_heads, self.key_dim)
end

return MultiHeadAttention
