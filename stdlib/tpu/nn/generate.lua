-- Text generation for decoder language models, the TPU way: a fixed-size key/value cache and
-- one compiled decode step for the whole generation.
--
--   local lm = tpu.applications.GPT2Small {vocab_size = 100, max_length = 128, num_layers = 2,
--                                          hidden_dim = 64, num_heads = 2,
--                                          intermediate_dim = 256, logits = true}
--   local out = lm:generate(prompt_ids, {max_length = 64})              -- greedy
--   local out = lm:generate(prompt_ids, {max_length = 64, temperature = 0.8, top_k = 10,
--                                        seed = 1})                     -- sampled, repeatable
--
-- ids: an integer tensor [batch, T] (or [T], or a Lua list of ids, or a list of such lists of
-- one length), prompts without padding; the result holds the prompt and the continuation,
-- [batch, max_length] (or [max_length]).
-- Options: max_length (total length, prompt included; at most the model's position table),
-- temperature (default 0: greedy, the most likely token; 1 when top_k or top_p is given),
-- top_k (sample among the k most likely tokens, tied ones counted one by one; ties with the
-- k-th are kept too), top_p (sample among the most likely tokens whose probabilities first sum
-- past p, as Keras Hub's TopPSampler; after top_k when both are given), seed (default 0: the
-- sampling keys are tpu.random.key(seed) folded with the position, so a seed repeats),
-- stop_token_ids (a list of ids, or one id: the generation ends once every row has produced
-- one of them after its prompt, as Keras Hub's generate does; a row's tokens after its stop
-- token are 0). Returns the ids; with stop_token_ids also a bool mask of the same shape, false
-- after a row's stop token (Keras Hub's padding_mask); the ids end where the last row stopped.
--
-- The model: its output is next-token logits [batch, length, vocab] (GPT2Small{logits = true},
-- or any model of causal TransformerDecoder blocks / MultiHeadAttention{use_causal_mask}),
-- token-wise layers otherwise (classes with token_wise = true: Embedding, Dense, LayerNorm,
-- PositionEmbedding, ...). A functional model's other integer inputs (GPT-2's padding_mask)
-- get ones.
--
-- How: each causal self-attention keeps its keys and values in a cache [batch, max_length,
-- heads, head_dim]. The prefill (compiled once per prompt length) runs the prompt, fills rows
-- 1..T and picks the first new token; then one decode step (compiled once, named
-- generate.decode_step) takes (caches, token, position) — the position an i32 tensor, not a
-- number baked into the trace — writes the token's keys and values at that row (a one-hot
-- where: the engine has no dynamic-update-slice), attends to rows <= position and picks the
-- next token. Every step costs the same (it reads all max_length rows, masked), so a
-- generation never recompiles as the sequence grows. temperature and top_p reach the steps as
-- f32 scalar tensors too, so new values reuse them; greedy vs sampling, top_k and whether top_p
-- filters (< 1) change the computation: each combination compiles its own steps.
local tpu = require "tpu"
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local M = {}

local who = "generate"

---------------------------------------------------------------- ctx.decode

-- The state layers see as ctx.decode while the model runs for generation. `start` is the
-- position of the first token of the call: 0 in the prefill, an i32 scalar tensor in the step.
local Decode = {}
Decode.__index = Decode

-- The caches are a list in the order of the attention calls (a layer called twice, its weights
-- shared, has a cache per call); `called` records the layers that ran.
local function new_decode(max_length, caches, start, vocab)
  return setmetatable({max_length = max_length, caches = caches or {}, start = start or 0,
                       step = caches ~= nil, vocab = vocab, new = {}, called = {}}, Decode)
end

-- The cache [B, L, H, D] with rows start..start+T-1 set to x [B, T, H, D].
function Decode:write(cache, x)
  if not cache then  -- prefill: the prompt's rows, then zeros
    local rest = {x.shape[1], self.max_length - x.shape[2], x.shape[3], x.shape[4]}
    if rest[2] == 0 then return x end
    return tpu.concat({x, tpu.zeros(rest, {dtype = x.dtype})}, 2)
  end
  local at = tpu.arange(self.max_length):eq(self.start):reshape({1, self.max_length, 1, 1})
  return tpu.where(at, x:cast(cache.dtype), cache)
end

-- -1e9 where key s comes after query start + t: [1, 1, T, L].
function Decode:later(T)
  local L = self.max_length
  local q = tpu.arange(T):reshape({T, 1}) + self.start
  return tpu.arange(L):reshape({1, L}):gt(q):cast("f32"):reshape({1, 1, T, L}) * -1e9
end

-- MultiHeadAttention's call under generation: causal self-attention over the cache.
function Decode:attention(layer, q, causal, cross)
  if cross or not causal then
    util.fail("%s: MultiHeadAttention '%s' is %s; generate needs a decoder whose attention is "
      .. "causal self-attention (TransformerDecoder without an encoder sequence)", who,
      layer.name, cross and "cross-attention" or "not causal (use_causal_mask is off)")
  end
  local call = #self.new + 1
  local cache = self.caches[call] or {}
  local key = layer:_project(q, "key", layer.key_dim):transpose({1, 3, 2, 4})
  local value = layer:_project(q, "value", layer.value_dim):transpose({1, 3, 2, 4})
  local k, v = self:write(cache[1], key), self:write(cache[2], value)
  self.new[call] = {k, v}
  self.called[layer] = true
  local policy = layer.dtype_policy
  local qh = layer:_project(q, "query", layer.key_dim) * (1 / math.sqrt(layer.key_dim))  -- as the layer's call
  local scores = util.cast_float(util.policy_matmul(qh, k:transpose({1, 3, 4, 2}), policy), "f32")
                 + self:later(q.shape[2])
  local out = util.policy_matmul(scores:softmax(-1), v:transpose({1, 3, 2, 4}), policy)
  return layer:_merge_heads(out, q.shape)
end

-- PositionEmbedding's call in the decode step: the row of the current position.
function Decode:positions(layer, x)
  local row = layer.embeddings:take(self.start)
  local dtype = util.output_dtype(layer.dtype_policy)
  return tpu.zeros(x.shape, {dtype = dtype}) + util.cast_float(row, dtype)
end

---------------------------------------------------------------- the model

-- Every module of the model, depth first.
local function walk(m, out)
  out = out or {}
  out[#out + 1] = m
  for _, c in ipairs(m.modules or {}) do walk(c, out) end
  return out
end

local function fully_built(m)
  for _, c in ipairs(walk(m)) do if not c.built then return false end end
  return true
end

-- The model's attention layers, its position limit and its vocabulary size (the first
-- Embedding's, if any). The decode step runs one token through every layer, so a layer that
-- mixes positions (a convolution, a pooling, a flatten) would see that token alone: only
-- layers whose class says token_wise = true (and causal attention) may be in the model.
local function inspect(model)
  local MHA = require "tpu.nn.MultiHeadAttention"
  local PE = require "tpu.nn.PositionEmbedding"
  local Embedding = require "tpu.nn.Embedding"
  local attention, limit, vocab = {}, math.huge, nil
  for _, m in ipairs(walk(model)) do
    if not m.token_wise then
      util.fail("%s: %s '%s' may mix positions, and the decode step runs one token at a time through "
        .. "every layer; a language model for generate has token-wise layers (Embedding, Dense, "
        .. "LayerNorm, ...) and causal attention (a layer of your own that works token by token "
        .. "says so with token_wise = true on its class)", who, m.__name, m.name)
    end
    if MHA.is_instance(m) then attention[#attention + 1] = m end
    if PE.is_instance(m) then limit = math.min(limit, m.sequence_length) end
    if Embedding.is_instance(m) then vocab = vocab or m.input_dim end
  end
  if #attention == 0 then
    util.fail("%s: %s '%s' is not a decoder language model: it has no attention layer (generate "
      .. "needs causal TransformerDecoder blocks and next-token logits, e.g. "
      .. "tpu.applications.GPT2Small{..., logits = true})", who, model.__name, model.name)
  end
  return attention, limit, vocab
end

-- The model's input for token ids [B, T]: a functional model's other inputs (padding masks)
-- get ones.
local function model_input(model, ids)
  if not model.inputs or model.single_input then return ids end
  local xs = {ids}
  for i = 2, #model.inputs do
    local n = model.inputs[i]
    if #n.shape ~= 2 or n.dtype == "f32" or n.dtype == "bf16" then
      util.fail("%s: %s '%s' has an input '%s' %s that is neither token ids nor a padding mask",
        who, model.__name, model.name, n.name, util.shape_text(n.shape))
    end
    xs[i] = tpu.ones(ids.shape, {dtype = n.dtype})
  end
  return xs
end

-- The last position's logits [B, V] (f32).
local function last_logits(model, y, vocab)
  if not util.is_tensor(y) or y.ndim ~= 3 or (vocab and y.shape[3] ~= vocab) then
    util.fail("%s: %s '%s' must output next-token logits [batch, length, vocab%s], got %s (for "
      .. "GPT2Small, build it with logits = true)", who, model.__name, model.name,
      vocab and " = " .. vocab or "", util.is_tensor(y) and util.describe(y) or util.show(y))
  end
  local b, t, v = y.shape[1], y.shape[2], y.shape[3]
  return y:slice {{1, b}, {t, t}}:reshape({b, v}):cast("f32")
end

---------------------------------------------------------------- sampling

-- Logits below the k-th largest of each row set to -1e9: k - 1 rounds each remove one largest
-- entry (one only: values tied above the k-th must count one by one), then what is at least
-- the largest left, the k-th, is kept (ties with it too).
local function keep_top_k(z, k)
  local columns = tpu.arange(z.shape[2]):reshape({1, z.shape[2]})
  local rest = z
  for _ = 1, math.min(k, z.shape[2]) - 1 do
    rest = tpu.where(columns:eq(rest:argmax(-1, true)), rest * 0 - 1e9, rest)
  end
  return tpu.where(z:ge(rest:max(-1, true)), z, z * 0 - 1e9)
end

-- Logits outside the nucleus set to -1e9: as Keras Hub's TopPSampler, a token is kept when the
-- tokens more likely than it sum to at most p (tied tokens go together). Without a sort, the
-- smallest kept probability is found by bisection: `above` is the sum of the probabilities
-- over a threshold, which falls as the threshold rises; 64 halvings in f32 end on adjacent
-- floats around it (unless it is below 2^-40 of the largest probability).
local function keep_top_p(z, p)
  local probs = z:softmax(-1)
  local hi = probs:max(-1, true)
  local lo = hi * 0
  for _ = 1, 64 do
    local mid = (lo + hi) * 0.5
    local fits = tpu.where(probs:gt(mid), probs, probs * 0):sum(-1, true):le(p)
    hi, lo = tpu.where(fits, mid, hi), tpu.where(fits, lo, mid)
  end
  return tpu.where(probs:ge(hi), z, z * 0 - 1e9)
end

-- The next token of each row (i32 [B]): argmax when greedy, else a draw from
-- softmax(logits / temperature) (the Gumbel-max trick) with the key for this position.
-- `sampling` holds the static choices (greedy, top_k, whether top_p filters), which shape the
-- computation, and the f32 scalar tensors temperature and top_p, which do not: a new value
-- reuses the compiled step.
local function pick(logits, key, position, sampling)
  if sampling.greedy then return logits:argmax(-1) end
  local z = logits / sampling.temperature
  if sampling.top_k then z = keep_top_k(z, sampling.top_k) end
  if sampling.nucleus then z = keep_top_p(z, sampling.top_p) end
  local u = tpu.random.uniform(key:fold_in(position), z.shape):maximum(1e-20)
  return (z - (-(u:log())):log()):argmax(-1)
end

---------------------------------------------------------------- compiled steps

local with_params = util.with_params

-- Runs the model on ids under `state`; returns the next tokens and the caches (a list in
-- the order of `attention`).
local function run(model, attention, state, ids, key, position, sampling)
  local y = model(model_input(model, ids), {training = false, decode = state})
  local token = pick(last_logits(model, y, state.vocab), key, position, sampling)
  for _, layer in ipairs(attention) do
    if not state.called[layer] then
      util.fail("%s: attention layer '%s' was not called by %s '%s'", who, layer.name, model.__name, model.name)
    end
  end
  return token, state.new
end

-- The sampling for pick: temperature and top_p are f32 scalar tensors (traced, so any value
-- reuses the compiled step); greedy, top_k and nucleus (top_p < 1) are plain Lua values, part
-- of the jit signature, since they change what is computed.
local function sampling(temperature, top_p, greedy, top_k, nucleus)
  return {temperature = temperature, top_p = top_p, greedy = greedy, top_k = top_k,
          nucleus = nucleus}
end

local function make_steps(model, attention, vocab)
  local prefill = tpu.jit(function(params, ids, key, L, ...)
    local s = sampling(...)
    return with_params(model, params, function()
      return run(model, attention, new_decode(L, nil, nil, vocab), ids, key, ids.shape[2], s)
    end)
  end, {name = "generate.prefill"})
  local decode = tpu.jit(function(params, caches, token, position, key, L, ...)
    local s = sampling(...)
    return with_params(model, params, function()
      local ids = token:reshape({token.shape[1], 1})
      return run(model, attention, new_decode(L, caches, position, vocab), ids, key,
                 position + 1, s)
    end)
  end, {name = "generate.decode_step", donate_argnums = {2}})
  return {prefill = prefill, decode = decode}
end

---------------------------------------------------------------- arguments

local options = {"max_length", "temperature", "top_k", "top_p", "seed", "stop_token_ids"}

-- stop_token_ids as a set of ids, or nil.
local function stop_set(ids)
  if ids == nil then return nil end
  if math.type(ids) == "integer" then ids = {ids} end
  if type(ids) ~= "table" or util.is_tensor(ids) or #ids == 0 then
    util.fail("%s: stop_token_ids must be a token id or a non-empty list of them, got %s", who,
      util.show(ids))
  end
  local set = {}
  for i, v in ipairs(ids) do
    if math.type(v) ~= "integer" then
      util.fail("%s: stop_token_ids[%d] must be an integer token id, got %s", who, i, util.show(v))
    end
    set[v] = true
  end
  return set
end

-- Where each row stopped: ended[b] is the column of row b's first stop token. Notes the
-- tokens of column `col` (i32 [B]); true once every row has stopped.
local function note_stops(stop, ended, token, col)
  if not stop then return false end
  local all = true
  for b, v in ipairs(token:totable()) do
    if not ended[b] and stop[v] then ended[b] = col end
    all = all and ended[b] ~= nil
  end
  return all
end

-- The ids with 0 after each row's stop token, and the mask of the tokens kept.
local function cut_at_stops(out, ended)
  local B, n = out.shape[1], out.shape[2]
  local rows = {}
  for b = 1, B do
    local row, last = {}, ended[b] or n
    for j = 1, n do row[j] = j <= last end
    rows[b] = row
  end
  local mask = tpu.tensor(rows)
  return tpu.where(mask, out, out * 0), mask
end

-- Fails unless `row` (named `name`) is a non-empty list of integer token ids.
local function check_row(row, name)
  for i, v in ipairs(row) do
    if math.type(v) ~= "integer" then
      util.fail("%s: %s[%d] must be an integer token id, got %s", who, name, i, util.show(v))
    end
  end
  if #row == 0 then util.fail("%s: the prompt is empty (give at least one token id)", who) end
end

-- A Lua list of ids [T], or a list of such lists [B, T], as an i32 tensor. The rows must have
-- one length: a shorter prompt cannot be padded, generate having no padding mask for them.
local function list_prompt(ids)
  if type(ids[1]) ~= "table" then
    check_row(ids, "ids")
    return tpu.tensor(ids, {dtype = "i32"})
  end
  for b, row in ipairs(ids) do
    if type(row) ~= "table" or util.is_tensor(row) then
      util.fail("%s: ids[%d] must be a list of token ids, as ids[1] is, got %s", who, b,
        util.show(row))
    end
    check_row(row, ("ids[%d]"):format(b))
    if #row ~= #ids[1] then
      util.fail("%s: the prompts have different lengths (ids[1] has %d tokens, ids[%d] has %d); "
        .. "generate takes prompts of one length, without padding: call it once per length",
        who, #ids[1], b, #row)
    end
  end
  return tpu.tensor(ids, {dtype = "i32"})
end

-- ids as an i32 tensor [B, T] and the rank to give back.
local function prompt(ids)
  if type(ids) == "table" and not util.is_tensor(ids) then ids = list_prompt(ids) end
  errors.check(1, who, ids, "tensor")
  if (ids.ndim ~= 1 and ids.ndim ~= 2) or ids.dtype == "f32" or ids.dtype == "bf16"
     or ids.dtype == "bool" or ids.shape[ids.ndim] == 0 then
    util.fail("%s: ids must be integer token ids [batch, length] or [length], got %s", who,
      util.describe(ids))
  end
  local rank = ids.ndim
  if rank == 1 then ids = ids:reshape({1, ids.shape[1]}) end
  return ids.dtype == "i32" and ids or ids:cast("i32"), rank
end

local function check_options(opts, T, limit)
  util.check_options({__name = who}, opts, options)
  local L = opts.max_length
  if math.type(L) ~= "integer" or L <= T then
    util.fail("%s: max_length (the total length, prompt included) must be an integer larger "
      .. "than the prompt's %d tokens, got %s", who, T, util.show(L))
  end
  if L > limit then
    util.fail("%s: max_length = %d is beyond the model's %d positions (its PositionEmbedding's "
      .. "sequence_length); generate at most %d tokens in all", who, L, limit, limit)
  end
  local t = opts.temperature == nil and ((opts.top_k or opts.top_p) and 1 or 0) or opts.temperature
  if not util.is_finite(t) or t < 0 then
    util.fail("%s: temperature must be a number >= 0 (0: greedy), got %s", who, util.show(t))
  end
  if opts.top_k ~= nil and (math.type(opts.top_k) ~= "integer" or opts.top_k < 1) then
    util.fail("%s: top_k must be a positive integer, got %s", who, util.show(opts.top_k))
  end
  local top_p = opts.top_p
  if top_p ~= nil and not (util.is_finite(top_p) and top_p > 0 and top_p <= 1) then
    util.fail("%s: top_p must be a number in (0, 1], got %s", who, util.show(top_p))
  end
  if opts.seed ~= nil and math.type(opts.seed) ~= "integer" then
    util.fail("%s: seed must be an integer, got %s", who, util.show(opts.seed))
  end
  return L, t, opts.top_k, top_p, stop_set(opts.stop_token_ids)
end

-- The sampling arguments of the compiled steps (see sampling): temperature and top_p as f32
-- scalar tensors, then greedy, top_k and whether top_p filters (greedy ignores the others, so
-- they are left out of its signature).
local function sampling_args(temperature, top_k, top_p)
  local function f32(v) return tpu.tensor(v + 0.0, {dtype = "f32"}) end
  local greedy = temperature == 0
  return f32(temperature), f32(top_p or 1), greedy, not greedy and top_k or nil,
         not greedy and top_p ~= nil and top_p < 1
end

---------------------------------------------------------------- model:generate

function M.generate(model, ids, opts, extra)
  errors.none(3, who, extra)
  local x, rank = prompt(ids)
  opts = errors.options(2, who, opts or {}, options)
  -- layers make their sublayers (attention) when built: one eager pass builds them all
  if not fully_built(model) then model(model_input(model, x), {training = false}) end
  local attention, limit, vocab = inspect(model)
  local B, T = x.shape[1], x.shape[2]
  local L, temperature, top_k, top_p, stop = check_options(opts, T, limit)
  local choice = table.pack(sampling_args(temperature, top_k, top_p))
  model.generate_steps = model.generate_steps or make_steps(model, attention, vocab)
  local steps, params = model.generate_steps, model:parameters()
  local key = tpu.random.key(opts.seed or 0)
  local token, caches = steps.prefill(params, x, key, L, table.unpack(choice, 1, choice.n))
  local tokens, ended = {x, token:reshape({B, 1})}, {}
  local stopped = note_stops(stop, ended, token, T + 1)
  for p = T, L - 2 do
    if stopped then break end
    token, caches = steps.decode(params, caches, token, tpu.tensor(p, {dtype = "i32"}), key, L,
                                 table.unpack(choice, 1, choice.n))
    tokens[#tokens + 1] = token:reshape({B, 1})
    stopped = note_stops(stop, ended, token, p + 2)
  end
  local out = tpu.concat(tokens, 2)
  if not stop then return rank == 1 and out:reshape({L}) or out end
  local ids, mask = cut_at_stops(out, ended)
  if rank == 1 then return ids:reshape({ids.shape[2]}), mask:reshape({ids.shape[2]}) end
  return ids, mask
end

return M
