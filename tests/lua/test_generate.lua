-- model:generate: the key/value cache gives the tokens greedy decoding gives by re-running the
-- whole model on the growing sequence; one compiled decode step serves every position;
-- sampling is repeatable for a seed.
local tpu = require "tpu"
local check = require "check"
local nn = tpu.nn

local T = {}

-- A tiny GPT-2 whose matrices are scaled up so that its tokens depend on the position and the
-- context (at GPT-2's initial scale a random model repeats one token).
local function tiny_gpt(max_length)
  nn.set_seed(1)
  local lm = tpu.applications.GPT2Small {vocab_size = 11, max_length = max_length or 16,
    num_layers = 2, hidden_dim = 8, num_heads = 2, intermediate_dim = 16, logits = true}
  local ps = lm:parameters()
  for i, p in ipairs(ps) do if p.ndim == 2 then ps[i] = p * 30 end end
  lm:set_parameters(ps)
  return lm
end

-- Greedy decoding without a cache: the full model on the growing sequence, every token.
local function rerun(model, ids, max_length, call)
  local seq = ids
  while seq.shape[2] < max_length do
    local b, t = seq.shape[1], seq.shape[2]
    local y = call(model, seq)
    local next = y:slice {{1, b}, {t, t}}:reshape({b, y.shape[3]}):argmax(-1)
    seq = tpu.concat({seq, next:reshape({b, 1})}, 2)
  end
  return seq:totable()
end

local function gpt_call(model, seq) return model {seq, tpu.ones(seq.shape, {dtype = "i32"})} end

function T.cached_greedy_equals_rerunning_the_full_model()
  local lm = tiny_gpt()
  local ids = tpu.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = "i32"})
  local want = rerun(lm, ids, 16, gpt_call)
  check.eq(lm:generate(ids, {max_length = 16}):totable(), want)
  -- the tokens vary (the test would catch a cache read at the wrong position)
  local seen = {}
  for _, v in ipairs(want[2]) do seen[v] = true end
  local distinct = 0
  for _ in pairs(seen) do distinct = distinct + 1 end
  check.is_true(distinct >= 5)
  -- a 1-D prompt and a Lua list give a 1-D result
  check.eq(lm:generate(tpu.tensor({4, 5, 6}, {dtype = "i32"}), {max_length = 16}):totable(),
    want[2])
  check.eq(lm:generate({4, 5, 6}, {max_length = 16}):totable(), want[2])
  -- a Lua list of prompts of one length is a batch [2, 3]
  check.eq(lm:generate({{1, 2, 3}, {4, 5, 6}}, {max_length = 16}):totable(), want)
end

function T.a_sequential_decoder_generates_too()
  nn.set_seed(2)
  local model = nn.Sequential {nn.Embedding(9, 8),
    nn.TransformerDecoder {num_heads = 2, intermediate_dim = 16},
    nn.TransformerDecoder {num_heads = 2, intermediate_dim = 16}, nn.Dense(9)}
  local ids = tpu.tensor({{3, 1}, {2, 8}, {5, 5}}, {dtype = "i32"})
  local want = rerun(model, ids, 10, function(m, seq) return m(seq) end)
  check.eq(model:generate(ids, {max_length = 10}):totable(), want)
end

function T.the_decode_step_compiles_once_for_50_tokens()
  local lm = tiny_gpt(64)
  local out = lm:generate({1, 2}, {max_length = 52})
  check.eq(out.shape, {52})
  local decode, prefill = lm.generate_steps.decode:stats(), lm.generate_steps.prefill:stats()
  check.eq({decode.compiles, decode.executions, prefill.compiles}, {1, 49, 1})
  -- another prompt of the same length: no compile at all
  lm:generate({7, 3}, {max_length = 52})
  decode = lm.generate_steps.decode:stats()
  check.eq({decode.compiles, decode.executions, lm.generate_steps.prefill:stats().compiles},
    {1, 98, 1})
end

-- temperature and top_p reach the compiled steps as f32 scalar tensors: a sweep over their
-- values compiles each step once (as Lua numbers they were baked into the trace, a compile
-- per value); top_k and greedy vs sampling change the computation and stay in the signature.
function T.a_temperature_or_top_p_sweep_compiles_once()
  local lm = tiny_gpt()
  local ids = tpu.tensor({{1, 2, 3}}, {dtype = "i32"})
  local function compiles()
    return {lm.generate_steps.prefill:stats().compiles, lm.generate_steps.decode:stats().compiles}
  end
  for _, t in ipairs {0.5, 0.6, 0.7, 0.8, 2} do lm:generate(ids, {max_length = 8, temperature = t}) end
  check.eq(compiles(), {1, 1})
  for _, p in ipairs {0.3, 0.5, 0.9} do
    lm:generate(ids, {max_length = 8, temperature = 1.5, top_p = p})
  end
  check.eq(compiles(), {2, 2})
  lm:generate(ids, {max_length = 8, top_k = 3, temperature = 0.4})
  lm:generate(ids, {max_length = 8, top_k = 3, temperature = 0.9})
  check.eq(compiles(), {3, 3})
end

function T.sampling_repeats_for_a_seed()
  local lm = tiny_gpt()
  local ids = tpu.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = "i32"})
  local opts = {max_length = 16, temperature = 2, top_k = 4, seed = 7}
  local a = lm:generate(ids, opts):totable()
  check.eq(lm:generate(ids, opts):totable(), a)
  local differs = false
  for seed = 1, 4 do
    opts.seed = seed
    local b = lm:generate(ids, opts):totable()
    for r = 1, 2 do
      for t = 4, 16 do differs = differs or a[r][t] ~= b[r][t] end
    end
  end
  check.is_true(differs)
  -- top_k = 1 keeps the most likely token only: greedy, whatever the temperature and seed
  check.eq(lm:generate(ids, {max_length = 16, top_k = 1, temperature = 5, seed = 3}):totable(),
    lm:generate(ids, {max_length = 16}):totable())
end

function T.top_k_sampling_draws_among_the_k_most_likely()
  -- a one-token continuation: its logits are the prefill's, so the draw is checked directly
  local lm = tiny_gpt()
  local ids = tpu.tensor({{1, 2, 3}}, {dtype = "i32"})
  local logits = gpt_call(lm, ids):slice {{1, 1}, {3, 3}}:reshape({11}):totable()
  local order = {}
  for i = 1, 11 do order[i] = i - 1 end
  table.sort(order, function(a, b) return logits[a + 1] > logits[b + 1] end)
  local allowed = {[order[1]] = true, [order[2]] = true, [order[3]] = true}
  local drawn = {}
  for seed = 1, 30 do
    local t = lm:generate(ids, {max_length = 4, temperature = 100, top_k = 3, seed = seed})
    local v = t:totable()[1][4]
    check.is_true(allowed[v], "token " .. v .. " is not among the 3 most likely")
    drawn[v] = true
  end
  local n = 0
  for _ in pairs(drawn) do n = n + 1 end
  check.eq(n, 3)  -- at a high temperature the three are about equally likely
end

-- One block called twice (its weights shared, as ALBERT shares them) keeps a cache per call:
-- one cache per layer object made the two calls overwrite each other's keys and values.
function T.a_block_called_twice_keeps_a_cache_per_call()
  nn.set_seed(3)
  local block = nn.TransformerDecoder {num_heads = 2, intermediate_dim = 16}
  local model = nn.Sequential {nn.Embedding(9, 8), nn.PositionEmbedding {sequence_length = 12}, block, block,
                               nn.Dense(9)}
  local ids = tpu.tensor({{3, 1, 4}, {2, 8, 5}}, {dtype = "i32"})
  model(ids)
  local ps = model:parameters()
  for i, p in ipairs(ps) do if p.ndim == 2 then ps[i] = p * 8 end end
  model:set_parameters(ps)
  local want = rerun(model, ids, 12, function(m, seq) return m(seq) end)
  check.eq(model:generate(ids, {max_length = 12}):totable(), want)
end

-- A layer that mixes positions would see the decode step's one token alone: refused, named.
function T.a_layer_that_mixes_positions_is_refused()
  local model = nn.Sequential {nn.Embedding(9, 8), nn.Conv1D(8, 3, {padding = "causal", name = "mixer"}),
                               nn.TransformerDecoder {num_heads = 2, intermediate_dim = 16}, nn.Dense(9)}
  local ids = tpu.tensor({{3, 1}}, {dtype = "i32"})
  model(ids)
  check.raises(function() model:generate(ids, {max_length = 6}) end,
    "generate: Conv1D 'mixer' may mix positions")
end

-- top_k counts tied values above the k-th one by one: logits {5, 5, 3, 1} with top_k = 2 keep
-- the two 5s only (the third-largest, 3, was drawn about 6% of the time).
function T.top_k_counts_tied_values_one_by_one()
  local model = nn.Sequential {nn.Embedding(4, 4), nn.TransformerDecoder {num_heads = 2, intermediate_dim = 8},
                               nn.Dense(4, {kernel_initializer = "zeros"})}
  local ids = tpu.zeros({400, 1}, {dtype = "i32"})
  model(ids)
  local ps = model:parameters()
  ps[#ps] = tpu.tensor {5, 5, 3, 1}
  model:set_parameters(ps)
  local counts = {0, 0, 0, 0}
  local out = model:generate(ids, {max_length = 2, top_k = 2, seed = 1})
  for _, row in ipairs(out:totable()) do counts[row[2] + 1] = counts[row[2] + 1] + 1 end
  check.eq(counts[3] + counts[4], 0, table.concat(counts, " "))
  check.is_true(counts[1] > 100 and counts[2] > 100, table.concat(counts, " "))
end

-- stop_token_ids (Keras Hub): the generation ends once every row has produced a stop token
-- after its prompt; tokens before it are the full generation's, the ones after it are 0 and
-- masked out, and the ids end where the last row stopped.
function T.stop_token_ids_end_each_row_and_the_generation()
  local lm = tiny_gpt()
  local ids = tpu.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = "i32"})
  local full = lm:generate(ids, {max_length = 16}):totable()
  local function first_stop(row, v)
    for j = 4, 16 do if row[j] == v then return j end end
  end
  -- a stop token both rows produce, at different columns, before the last one
  local stop, ends
  for v = 0, 10 do
    local e = {first_stop(full[1], v), first_stop(full[2], v)}
    if e[1] and e[2] and e[1] ~= e[2] and math.max(e[1], e[2]) < 16 then stop, ends = v, e break end
  end
  check.is_true(stop ~= nil, "the tiny model's continuations share a token")
  local n = math.max(ends[1], ends[2])
  local out, mask = lm:generate(ids, {max_length = 16, stop_token_ids = {99, stop}})
  check.eq(out.shape, {2, n})
  local got, kept = out:totable(), mask:totable()
  for b = 1, 2 do
    for j = 1, n do
      local real = j <= ends[b]
      check.eq(kept[b][j], real, string.format("mask[%d][%d]", b, j))
      check.eq(got[b][j], real and full[b][j] or 0, string.format("ids[%d][%d]", b, j))
    end
  end
  -- one id, a 1-D prompt: a 1-D result and mask
  local one, one_mask = lm:generate({4, 5, 6}, {max_length = 16, stop_token_ids = stop})
  check.eq(one.shape, {ends[2]})
  check.eq(one:totable(), {table.unpack(full[2], 1, ends[2])})
  check.eq(one_mask:cast("i32"):sum():item(), ends[2])
  -- without stop tokens: the ids alone, max_length columns
  local alone = table.pack(lm:generate(ids, {max_length = 16}))
  check.eq(alone.n, 1)
  check.eq(alone[1].shape, {2, 16})
  check.raises(function() lm:generate(ids, {max_length = 16, stop_token_ids = {1.5}}) end,
    "generate: stop_token_ids[1] must be an integer token id, got 1.5")
  check.raises(function() lm:generate(ids, {max_length = 16, stop_token_ids = {}}) end,
    "stop_token_ids must be a token id or a non-empty list of them")
end

-- top_p (Keras Hub's TopPSampler): every sampled first token lies in the nucleus computed by
-- sorting (a token is kept when the tokens more likely than it sum to at most p), several of
-- them are drawn over the seeds, a tiny p leaves the greedy token and p = 1 samples as without.
function T.top_p_samples_from_the_nucleus()
  local lm = tiny_gpt()
  local ids = tpu.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = "i32"})
  local temperature = 3
  local y = gpt_call(lm, ids)
  local probs = (y:slice {{1, 2}, {3, 3}}:reshape({2, 11}) / temperature):softmax(-1):totable()
  local function nucleus(row, p)
    local order = {}
    for v = 1, #row do order[v] = v end
    table.sort(order, function(a, b) return row[a] > row[b] end)
    local kept, above = {}, 0
    for _, v in ipairs(order) do
      if above <= p then kept[v - 1] = true end
      above = above + row[v]
    end
    return kept
  end
  for _, p in ipairs {0.3, 0.7} do
    local seen = {{}, {}}
    for seed = 1, 30 do
      local t = lm:generate(ids, {max_length = 4, temperature = temperature, top_p = p, seed = seed}):totable()
      for b = 1, 2 do seen[b][t[b][4]] = true end
    end
    for b = 1, 2 do
      local kept, count, drawn = nucleus(probs[b], p), 0, 0
      for _ in pairs(kept) do count = count + 1 end
      for v in pairs(seen[b]) do
        check.is_true(kept[v], string.format("p = %g, row %d: token %d is outside the nucleus", p, b, v))
        drawn = drawn + 1
      end
      check.is_true(count < 11, "the nucleus leaves tokens out")
      if count > 1 then check.is_true(drawn > 1, "several tokens of the nucleus are drawn") end
    end
  end
  local greedy = lm:generate(ids, {max_length = 8}):totable()
  check.eq(lm:generate(ids, {max_length = 8, temperature = temperature, top_p = 1e-6, seed = 3}):totable(), greedy)
  check.eq(lm:generate(ids, {max_length = 8, temperature = temperature, top_p = 1, seed = 3}):totable(),
           lm:generate(ids, {max_length = 8, temperature = temperature, seed = 3}):totable())
  check.raises(function() lm:generate(ids, {max_length = 8, top_p = 0}) end,
    "generate: top_p must be a number in (0, 1], got 0")
  check.raises(function() lm:generate(ids, {max_length = 8, top_p = 0 / 0}) end, "top_p must be a number")
end

return T
