-- Multiply, the swish family of activations, PositionEmbedding, causal attention,
-- TransformerDecoder and the BertBase / GPT2Small builders: values, gradients against finite
-- differences, argument errors, and one real training run of each builder at a small size.
local tpu = require "tpu"
local check = require "check"
local jacobian = require "jacobian"
local nn_check = require "nn_check"
local nn = tpu.nn
local rand = nn_check.rand

local T = {}

---------------------------------------------------------------- Multiply

function T.multiply_values_and_broadcast()
  local a, b = tpu.tensor {{1, 2}, {3, 4}}, tpu.tensor {{2, 3}, {4, 5}}
  check.eq(nn.Multiply() {a, b, b}:totable(), {{4, 18}, {48, 100}})
  local scale = tpu.tensor {{{{2, 3}}}}                           -- [1, 1, 1, 2]
  local y = nn.Multiply() {tpu.ones({1, 2, 2, 2}), scale}
  check.eq(y.shape, {1, 2, 2, 2})
  check.eq(y:totable()[1][2][1], {2, 3})
  check.eq(tostring(nn.Multiply()), "nn.Multiply")
end

function T.multiply_gradients()
  nn_check.gradients(nn.Multiply(), {rand({2, 3}, 1), rand({2, 3}, 2), rand({2, 3}, 3)})
  nn_check.gradients(nn.Multiply(), {rand({2, 2, 3}, 4), rand({2, 1, 3}, 5)})
end

function T.multiply_errors()
  check.raises(function() nn.Multiply() {rand({2, 3}), rand({2, 4})} end,
    "Multiply 'multiply_%d+' needs inputs of one rank whose sizes are equal or 1 on each axis, "
    .. "got %(None, 3%), %(None, 4%)")
  check.raises(function() nn.Multiply()(rand({2, 3})) end, "expects a list of at least 2 tensors")
  check.raises(function() nn.Multiply {axis = 1} end, "Multiply: unknown option 'axis'")
end

---------------------------------------------------------------- activations

-- Values of Keras's definitions: swish = x sigmoid(x), hard_sigmoid = relu6(x + 3) / 6,
-- hard_swish = x hard_sigmoid(x).
function T.swish_family_values()
  local x = tpu.tensor {-4, -1, 0, 1, 2.5, 4}
  local function sig(v) return 1 / (1 + math.exp(-v)) end
  local want_swish, want_hs, want_hsw = {}, {}, {}
  for i, v in ipairs(x:totable()) do
    want_swish[i] = v * sig(v)
    want_hs[i] = math.min(math.max(v + 3, 0), 6) / 6
    want_hsw[i] = v * want_hs[i]
  end
  check.near(x:swish():totable(), want_swish, 1e-6)
  check.near(tpu.silu(x):totable(), want_swish, 1e-6)
  check.near(x:hard_sigmoid():totable(), want_hs, 1e-6)
  check.near(tpu.hard_swish(x):totable(), want_hsw, 1e-6)
  check.near(x:hard_silu():totable(), want_hsw, 1e-6)
  check.eq(x:relu6():totable(), {0, 0, 0, 1, 2.5, 4})
  for _, name in ipairs {"swish", "silu", "hard_sigmoid", "hard_swish", "hard_silu", "relu6"} do
    local fn = name == "hard_silu" and "hard_swish" or name == "silu" and "swish" or name
    check.near(nn.Activation(name)(x):totable(), x[fn](x):totable(), 1e-7, name)
    check.eq(nn.Dense(2, {activation = name})(rand({3, 4})).shape, {3, 2}, name)
  end
end

function T.swish_family_gradients()
  -- points away from the kinks of the piecewise ones (-3, 3 and 0, 6 for relu6)
  local x = tpu.tensor {{-4.2, -2.1, -0.7, 0.4}, {1.3, 2.6, 3.5, 7.0}}
  for _, name in ipairs {"swish", "hard_sigmoid", "hard_swish", "relu6"} do
    check.near(jacobian.max_error(function(v) return v[name](v) end, x), 0, 1e-2, name)
  end
  nn_check.gradients(nn.Dense(3, {activation = "swish"}), rand({2, 4}, 7))
end

function T.swish_errors()
  check.raises(function() tpu.swish(3) end, "swish")
  check.raises(function() tpu.tensor {1}:hard_swish(2) end, "hard_swish")
end

---------------------------------------------------------------- PositionEmbedding

function T.position_embedding_values()
  local pe = nn.PositionEmbedding {sequence_length = 5}
  local y = pe(rand({2, 3, 4}, 10))
  check.eq(y.shape, {2, 3, 4})
  local rows = pe.embeddings:totable()
  check.near(y:totable()[2], {rows[1], rows[2], rows[3]}, 1e-7)
  check.eq(tostring(pe), "nn.PositionEmbedding(5 x 4)")
  check.eq(pe:count_params(), 20)
  check.eq(pe(rand({1, 5, 4})).shape, {1, 5, 4})       -- the whole table
end

function T.position_embedding_gradients()
  local pe = nn.PositionEmbedding {sequence_length = 4}
  local x = rand({2, 3, 2}, 11)
  pe(x)
  -- the output does not depend on the input's values: only the table's gradient is checked
  for name, err in pairs(nn_check.weight_errors(pe, function() return pe(x) end)) do
    check.near(err, 0, 1e-2, name)
  end
  -- added to the input, each position's row gets the sum of its rows' gradients
  local g = tpu.grad(function(w)
    pe:set_parameters {w}
    return (pe(tpu.ones({2, 3, 2})) * tpu.ones({2, 3, 2})):sum()
  end)(pe.embeddings)
  check.eq(g:totable(), {{2, 2}, {2, 2}, {2, 2}, {0, 0}})
end

function T.position_embedding_errors()
  check.raises(function() nn.PositionEmbedding {} end,
    "PositionEmbedding: sequence_length must be a positive integer, got nil")
  check.raises(function() nn.PositionEmbedding {sequence_length = 4, initializer = "zero"} end,
    'PositionEmbedding: initializer: unknown initializer "zero"')
  check.raises(function() nn.PositionEmbedding {sequence_length = 2}(rand({1, 3, 4})) end,
    "expects input %[batch, length, features%] with length at most sequence_length = 2, got "
    .. "%(None, 3, 4%)")
end

---------------------------------------------------------------- causal attention

-- Output t of a causal layer depends only on inputs 1..t: changing the later ones changes nothing.
local function check_causal(layer, call)
  local x = rand({1, 4, 4}, 20)
  local changed = tpu.concat({x:slice {{1, 1}, {1, 2}}, rand({1, 2, 4}, 21)}, 2)
  local y1, y2 = call(layer, x), call(layer, changed)
  check.near(y1:slice {{1, 1}, {1, 2}}:totable(), y2:slice {{1, 1}, {1, 2}}:totable(), 1e-5)
  check.is_true((y1 - y2):abs():max():item() > 1e-3, "later positions do change")
end

function T.attention_use_causal_mask()
  local mha = nn.MultiHeadAttention {num_heads = 2, key_dim = 2}
  check_causal(mha, function(l, x) return l {x, use_causal_mask = true} end)
  -- without it, the first output sees every position
  local x = rand({1, 3, 4}, 22)
  local full = mha(x)
  local causal = mha {x, use_causal_mask = true}
  check.is_true((full - causal):slice({{1, 1}, {1, 1}}):abs():max():item() > 1e-4)
  check.near(full:slice({{1, 1}, {3, 3}}):totable(), causal:slice({{1, 1}, {3, 3}}):totable(), 1e-5)
  nn_check.gradients(mha, {rand({1, 3, 4}, 23), use_causal_mask = true})
  check.raises(function() mha {x, use_causal_mask = 1} end,
    "MultiHeadAttention: use_causal_mask must be true or false, got 1")
end

-- The padding mask and the causal triangle are ANDed and applied once, as Keras: a query with
-- no key left attends to every key uniformly (with each added, a key masked twice got -2e9
-- and the first query read only the keys masked once: 3 where 5 is right). Reference: numpy
-- in f32, scores + (1 - allowed) * -1e9.
function T.attention_mask_and_causal_mask_combine_once()
  local mha = nn.MultiHeadAttention {num_heads = 1, key_dim = 1, use_bias = false, kernel_initializer = "ones"}
  local x = tpu.tensor {{{1}, {5}, {9}}}
  check.near(mha {x, mask = tpu.tensor {{0, 1, 0}}, use_causal_mask = true}:reshape {3}:totable(), {5, 5, 5}, 1e-5)
  local x2 = tpu.tensor {{{1}, {2}, {4}}}
  local mask = tpu.tensor {{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}}}
  check.near(mha {x2, mask = mask, use_causal_mask = true}:reshape {3}:totable(), {2.3333335, 1, 1.9820137}, 1e-5)
end

-- The layer runs one attention op (core.attention), which never stores the probabilities, a
-- padding mask entering it as a score bias; flash_attention = false takes the separate scores,
-- softmax and dropout. Both must agree: values, gradients, and in training the same dropped
-- weights (the same key, shape and rate), with no mask, a padding mask [batch, S] and one
-- [batch, T, S] that leaves a query no key at all (which then attends to every key evenly, as
-- the -1e9 the unfused path adds makes it), causal or not.
function T.fused_attention_agrees_with_the_unfused_path()
  local fused_mha = nn.MultiHeadAttention {num_heads = 2, key_dim = 3, dropout = 0.3}
  local unfused_mha = nn.MultiHeadAttention {num_heads = 2, key_dim = 3, dropout = 0.3, flash_attention = false}
  local x = rand({2, 5, 4}, 41)
  fused_mha(x)
  unfused_mha(x)
  local p0 = fused_mha:parameters()
  unfused_mha:set_parameters(p0)
  local padding = tpu.tensor({{1, 1, 1, 0, 0}, {1, 1, 1, 1, 1}}):cast("bool")
  local rows = rand({2, 5, 5}, 42):gt(0.4)
  rows = rows * tpu.tensor({1, 1, 0, 1, 1}):reshape({1, 5, 1}):cast("bool")  -- query 3 attends to nothing
  for _, mask in ipairs({false, padding, rows}) do
    mask = mask or nil
    for _, causal in ipairs({false, true}) do
      for _, training in ipairs({false, true}) do
        local function run(mha)
          return mha({x, mask = mask, use_causal_mask = causal}, {training = training, key = tpu.random.key(7)})
        end
        local fused, unfused = run(fused_mha), run(unfused_mha)
        check.near(fused:totable(), unfused:totable(), 1e-5)
        check.is_true(fused:abs():max():item() > 0.01)
      end
    end
    local function grads(mha)
      return tpu.grad(function(params)
        mha:set_parameters(params)
        local y = mha({x, mask = mask}, {training = true, key = tpu.random.key(3)})
        mha:set_parameters(p0)
        return (y * y):sum()
      end)(p0)
    end
    local fused, unfused = grads(fused_mha), grads(unfused_mha)
    for i = 1, #fused do check.near(fused[i]:totable(), unfused[i]:totable(), 1e-5) end
  end
  local text = tpu.jit(function(v) return fused_mha {v, mask = padding} end, {name = "fused"}):lower(x)
  check.is_true(text:find("= attention f32[2,2,5,3]", 1, true) ~= nil, text)
  check.is_true(text:find("[2,2,5,5]", 1, true) == nil, text)  -- no [batch, heads, T, S] value
  nn_check.gradients(fused_mha, {rand({1, 4, 4}, 43)})
  -- A gradient of a gradient (a gradient penalty): an error at the caller's line on the fused
  -- path (not zeros); the unfused one differentiates twice.
  local function penalty(mha)
    local inner = tpu.grad(function(v) return (mha {v, mask = padding} ^ 2):sum() end)
    return tpu.grad(function(v) return (inner(v) ^ 2):sum() end)(x)
  end
  local err = check.raises(function() penalty(fused_mha) end, "second-order gradient")
  check.is_true(err:find("test_nn_text_layers.lua:%d+:") ~= nil, err)
  check.is_true(err:find("flash_attention = false", 1, true) ~= nil, err)
  check.is_true(err:find("tpu.nn.disable_flash_attention()", 1, true) ~= nil, err)
  check.is_true(penalty(unfused_mha):abs():max():item() > 0)
  -- By default heads of 64 features or more take the separate products (the faster path there),
  -- smaller ones the fused op, in f32 and bf16; flash_attention = true or false decides.
  local initial = tpu.mixed_precision.policy().name
  local function takes_fused(opts, policy)
    tpu.mixed_precision.set_policy(policy)
    local ok, text = pcall(function()
      local mha = nn.MultiHeadAttention(opts)
      return tpu.jit(function(v) return mha(v) end, {name = "choice"}):lower(x)
    end)
    tpu.mixed_precision.set_policy(initial)
    assert(ok, text)
    return text:find("= attention ", 1, true) ~= nil
  end
  check.is_true(not takes_fused({num_heads = 2, key_dim = 64}, "float32"))
  check.is_true(takes_fused({num_heads = 2, key_dim = 32}, "float32"))
  check.is_true(takes_fused({num_heads = 2, key_dim = 32}, "mixed_bfloat16"))
  check.is_true(not takes_fused({num_heads = 2, key_dim = 64}, "mixed_bfloat16"))
  check.is_true(takes_fused({num_heads = 2, key_dim = 64, flash_attention = true}, "mixed_bfloat16"))
  check.is_true(not takes_fused({num_heads = 2, key_dim = 16, flash_attention = false}, "float32"))
  -- The process-wide switch decides for layers without their own choice (BERT's and GPT-2's):
  -- disabled, a second-order gradient through them works; enabled, bf16 heads of 64 fuse.
  check.eq(nn.is_flash_attention_enabled(), nil)
  local ok, problem = pcall(function()
    nn.disable_flash_attention()
    check.eq(nn.is_flash_attention_enabled(), false)
    check.is_true(not takes_fused({num_heads = 2, key_dim = 8}, "float32"))
    check.is_true(takes_fused({num_heads = 2, key_dim = 8, flash_attention = true}, "float32"))
    local default_mha = nn.MultiHeadAttention {num_heads = 2, key_dim = 3}
    local inner = tpu.grad(function(v) return (default_mha {v, mask = padding} ^ 2):sum() end)
    check.is_true(tpu.grad(function(v) return (inner(v) ^ 2):sum() end)(x):abs():max():item() > 0)
    nn.enable_flash_attention()
    check.eq(nn.is_flash_attention_enabled(), true)
    check.is_true(takes_fused({num_heads = 2, key_dim = 64}, "mixed_bfloat16"))
  end)
  require("tpu.nn.flash_attention")._reset()
  assert(ok, problem)
  -- A mask of the wrong shape: the layer says which shapes it takes.
  check.raises(function() fused_mha {x, mask = tpu.ones({2, 4})} end, "the mask must be [batch, S] = [2, 5]")
  check.raises(function() fused_mha {x, mask = 1} end, "the mask must be a tensor")
end

---------------------------------------------------------------- TransformerDecoder

-- Weights of keras_hub's TransformerDecoder for features d, feed-forward f: self-attention
-- 4 (d d + d), two LayerNorms 2 (2 d), feed-forward (d f + f) + (f d + d); cross-attention adds
-- 4 (d d + d) and a LayerNorm.
local function decoder_params(d, f, cross)
  local attention = 4 * (d * d + d)
  return attention + 4 * d + d * f + f + f * d + d + (cross and attention + 2 * d or 0)
end

function T.transformer_decoder_shapes_and_counts()
  local dec = nn.TransformerDecoder {num_heads = 2, intermediate_dim = 8, dropout = 0.1}
  check.eq(tostring(dec), "nn.TransformerDecoder(2 heads, ff 8, dropout 0.1)")
  check.eq(dec(rand({2, 5, 4}, 30)).shape, {2, 5, 4})
  check.eq(dec:count_params(), decoder_params(4, 8, false))
  local text = tostring(dec)
  check.is_true(text:find("(4): nn.Dense(4 -> 8, relu)", 1, true) ~= nil, text)
  local cross = nn.TransformerDecoder {num_heads = 2, intermediate_dim = 8, normalize_first = true}
  check.eq(cross({rand({2, 3, 4}, 31), rand({2, 6, 4}, 32)}).shape, {2, 3, 4})
  check.eq(cross:count_params(), decoder_params(4, 8, true))
  check.is_true(tostring(cross):find("cross-attention, normalize_first) {", 1, true) ~= nil)
  -- GPT-2 small's block: 7,087,872 weights (Hugging Face's GPT2Block)
  check.eq(decoder_params(768, 3072, false), 7087872)
end

function T.transformer_decoder_is_causal()
  local dec = nn.TransformerDecoder {num_heads = 2, intermediate_dim = 8}
  check_causal(dec, function(l, x) return l(x) end)
  local pre = nn.TransformerDecoder {num_heads = 1, intermediate_dim = 8, normalize_first = true}
  check_causal(pre, function(l, x) return l {x, rand({1, 2, 4}, 33)} end)
  -- use_causal_mask = false lets the first position see the later ones
  local x = rand({1, 3, 4}, 34)
  check.is_true((dec(x) - dec {x, use_causal_mask = false}):abs():max():item() > 1e-4)
end

function T.transformer_decoder_padding_masks()
  local dec = nn.TransformerDecoder {num_heads = 1, intermediate_dim = 4}
  local x, enc = rand({1, 3, 4}, 35), rand({1, 4, 4}, 36)
  local mask = tpu.tensor {{1, 1, 0, 0}}
  local y1 = dec {x, enc, encoder_padding_mask = mask}
  local y2 = dec {x, tpu.concat({enc:slice {{1, 1}, {1, 2}}, rand({1, 2, 4}, 37)}, 2),
                  encoder_padding_mask = mask}
  check.near(y1:totable(), y2:totable(), 1e-5)
  check.eq(dec {x, enc, decoder_padding_mask = tpu.tensor {{1, 1, 0}}}.shape, {1, 3, 4})
end

function T.transformer_decoder_gradients()
  local dec = nn.TransformerDecoder {num_heads = 2, intermediate_dim = 3}
  nn_check.gradients(dec, rand({1, 3, 2}, 38), {tol = 2e-2})
  local cross = nn.TransformerDecoder {num_heads = 1, intermediate_dim = 3, normalize_first = true,
                                       activation = "swish"}
  nn_check.gradients(cross, {rand({1, 2, 2}, 39), rand({1, 3, 2}, 40),
                             encoder_padding_mask = tpu.tensor {{1, 1, 0}}}, {tol = 2e-2})
end

function T.transformer_decoder_errors()
  check.raises(function() nn.TransformerDecoder {num_heads = 2} end,
    "TransformerDecoder: intermediate_dim must be a positive integer, got nil")
  check.raises(function() nn.TransformerDecoder {num_heads = 2, intermediate_dim = 4, epsilon = 1} end,
    "TransformerDecoder: unknown option 'epsilon'")
  local dec = nn.TransformerDecoder {num_heads = 2, intermediate_dim = 4}
  dec(rand({1, 2, 4}))
  check.raises(function() dec {rand({1, 2, 4}), rand({1, 3, 4})} end,
    "was built without cross%-attention: call it as layer%(x%) every time")
  check.raises(function() dec {rand({1, 2, 4}), encoder_mask = 1} end,
    "unknown call option 'encoder_mask'")
  check.raises(function() nn.TransformerDecoder {num_heads = 3, intermediate_dim = 4}(rand({1, 2, 4})) end,
    "features divisible by num_heads = 3 %(and an encoder sequence %[batch, length, features%]%), got "
    .. "%(None, 2, 4%)")
end

-- As keras_hub's: the encoder sequence may have other features than the decoder's, and every
-- sublayer, the last LayerNorm too, computes in the layer's dtype.
-- The kernels are drawn as Keras draws its 3-D ones, whose glorot fans count the heads: 64
-- features, 8 heads of 8: the query kernel [64, 8, 8] has fans 512 and 512 (limit
-- sqrt(6 / 1024)), the output kernel [8, 8, 64] fans 64 and 512 (limit sqrt(6 / 576)).
function T.multi_head_attention_kernels_are_drawn_as_keras_draws_them()
  local attn = nn.MultiHeadAttention {num_heads = 8, key_dim = 8}
  attn(tpu.ones {1, 4, 64})
  for name, limit in pairs {query_kernel = math.sqrt(6 / 1024), key_kernel = math.sqrt(6 / 1024),
                            value_kernel = math.sqrt(6 / 1024), output_kernel = math.sqrt(6 / 576)} do
    local k = attn[name]
    check.eq(k.shape, {64, 64}, name)
    local top = k:abs():max():item()
    check.is_true(top <= limit and top > 0.95 * limit, string.format("%s: max %.4f, limit %.4f", name, top, limit))
  end
end

-- keras_hub's options: layer_norm_epsilon, kernel_initializer, bias_initializer.
function T.transformer_encoder_takes_keras_hub_options()
  local enc = nn.TransformerEncoder {num_heads = 2, intermediate_dim = 16, layer_norm_epsilon = 1e-6,
                                     kernel_initializer = "zeros", bias_initializer = "ones"}
  enc(rand({1, 4, 8}))
  check.eq(enc.attention_norm.epsilon, 1e-6)
  check.eq(enc.ffn_norm.epsilon, 1e-6)
  for _, w in ipairs {enc.attention.query_kernel, enc.attention.output_kernel, enc.ffn_in.kernel, enc.ffn_out.kernel} do
    check.eq(w:abs():max():item(), 0)
  end
  check.eq(enc.ffn_in.bias:min():item(), 1)
  check.eq(nn.TransformerEncoder {num_heads = 2, intermediate_dim = 16, epsilon = 1e-4}.epsilon, 1e-4)
  check.raises(function() nn.TransformerEncoder {num_heads = 2, intermediate_dim = 16, epsilon = 1e-4,
                                                 layer_norm_epsilon = 1e-4} end,
    "TransformerEncoder: give epsilon or layer_norm_epsilon, not both")
end

function T.transformer_decoder_takes_an_encoder_of_other_width_and_keeps_its_dtype()
  local dec = nn.TransformerDecoder {num_heads = 2, intermediate_dim = 16}
  check.eq(dec {rand({1, 4, 8}), rand({1, 6, 12})}.shape, {1, 4, 8})
  check.eq(dec.cross_attention.key_kernel.shape[1], 12)
  local half = nn.TransformerDecoder {num_heads = 2, intermediate_dim = 16, dtype = "bf16"}
  check.eq(half(rand({1, 4, 8})).dtype, "bf16")
  check.eq(half.ffn_norm.gamma.dtype, "bf16")
end

---------------------------------------------------------------- BertBase, GPT2Small

local small = {vocab_size = 40, max_length = 8, num_layers = 2, hidden_dim = 8, num_heads = 2,
               intermediate_dim = 16}

local function with(extra)
  local o = {}
  for k, v in pairs(small) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end

local function ids(seed, n, len)
  return (tpu.random.uniform(tpu.random.key(seed), {n, len}) * small.vocab_size):cast("i32")
end

-- Hugging Face's BertModel count for a config: embeddings + LayerNorm, blocks, pooler.
local function bert_params(v, p, s, d, f, layers)
  return (v + p + s) * d + 2 * d + layers * decoder_params(d, f, false) + d * d + d
end

function T.bert_counts_and_outputs()
  check.eq(bert_params(30522, 512, 2, 768, 3072, 12), 109482240)
  local bert = tpu.applications.BertBase(small)
  check.eq(bert:count_params(), bert_params(40, 8, 2, 8, 16, 2))
  local mask = tpu.tensor {{1, 1, 1, 0, 0}, {1, 1, 1, 1, 1}}:cast("i32")
  local out = bert {ids(1, 2, 5), tpu.zeros({2, 5}, {dtype = "i32"}), mask}
  check.eq(out[1].shape, {2, 5, 8})
  check.eq(out[2].shape, {2, 8})
  check.is_true(out[2]:abs():max():item() <= 1, "the pooler's tanh")
end

function T.bert_classifier_trains()
  local bert = tpu.applications.BertBase(with {num_classes = 3})
  local n = 16
  local x = {ids(2, n, 6), tpu.zeros({n, 6}, {dtype = "i32"}), tpu.ones({n, 6}, {dtype = "i32"})}
  local y = (tpu.random.uniform(tpu.random.key(3), {n}) * 3):cast("i32")
  bert:compile {optimizer = tpu.optim.Adam {lr = 1e-2}, loss = "sparse_categorical_crossentropy"}
  local h = bert:fit(tpu.data.from_tensors {x, y}:batch(8), {epochs = 4, verbose = 0})
  check.is_true(h.history.loss[4] < h.history.loss[1], "loss falls")
end

function T.gpt2_counts_and_causality()
  check.eq(50257 * 768 + 1024 * 768 + 12 * decoder_params(768, 3072, false) + 2 * 768, 124439808)
  local gpt = tpu.applications.GPT2Small(small)
  check.eq(gpt:count_params(), 40 * 8 + 8 * 8 + 2 * decoder_params(8, 16, false) + 16)
  local a = ids(4, 1, 5)
  local b = tpu.concat({a:slice {{1, 1}, {1, 3}}, ids(5, 1, 2)}, 2)
  local mask = tpu.ones({1, 5}, {dtype = "i32"})
  check.near(gpt {a, mask}:slice {{1, 1}, {1, 3}}:totable(),
             gpt {b, mask}:slice {{1, 1}, {1, 3}}:totable(), 1e-5)
end

function T.gpt2_language_model_trains()
  local gpt = tpu.applications.GPT2Small(with {logits = true})
  check.eq(gpt:count_params(), tpu.applications.GPT2Small(small):count_params())  -- tied
  local n = 16
  local tokens = ids(6, n, 7)
  local x = {tokens:slice {{1, n}, {1, 6}}, tpu.ones({n, 6}, {dtype = "i32"})}
  local y = tokens:slice {{1, n}, {2, 7}}
  check.eq(gpt(x).shape, {n, 6, 40})
  gpt:compile {optimizer = tpu.optim.Adam {lr = 1e-2}, loss = "sparse_categorical_crossentropy"}
  local h = gpt:fit(tpu.data.from_tensors {x, y}:batch(8), {epochs = 4, verbose = 0})
  check.is_true(h.history.loss[4] < h.history.loss[1], "loss falls")
end

function T.application_errors()
  check.raises(function() tpu.applications.BertBase {hidden_size = 64} end,
    "BertBase: unknown option 'hidden_size'")
  check.raises(function() tpu.applications.BertBase(with {num_heads = 3}) end,
    "BertBase: hidden_dim %(8%) must be divisible by num_heads %(3%)")
  check.raises(function() tpu.applications.GPT2Small(with {dropout = 1}) end,
    "GPT2Small: dropout must be a number in %[0, 1%), got 1")
  check.raises(function() tpu.applications.GPT2Small(with {logits = "yes"}) end,
    'GPT2Small: logits must be true or false, got "yes"')
  local gpt = tpu.applications.GPT2Small(small)
  check.raises(function() gpt {ids(7, 1, 9), tpu.ones({1, 9}, {dtype = "i32"})} end,
    "with length at most sequence_length = 8")
end

return T
