-- Tests of the layers that need no convolution or random ops: values against hand-computed
-- ones, gradients against finite differences (input and every weight), argument errors.
local tpu = require "tpu"
local check = require "check"
local nn_check = require "nn_check"
local nn = tpu.nn
local rand = nn_check.rand

local T = {}

local function shape_str(t) return table.concat(t.shape, ",") end

---------------------------------------------------------------- LayerNorm

function T.layer_norm_values()
  local ln = nn.LayerNorm {epsilon = 1e-6}
  local y = ln(tpu.tensor {{1, 2, 3}, {2, 2, 5}}):totable()
  local s = math.sqrt(2 / 3)
  check.near(y[1], {-1 / s, 0, 1 / s}, 1e-4)
  check.near(y[2], {-1 / math.sqrt(2), -1 / math.sqrt(2), math.sqrt(2)}, 1e-4)
  check.eq(tostring(ln), "nn.LayerNorm(3)")
end

function T.layer_norm_gradients()
  local ln = nn.LayerNorm()
  ln(rand({2, 4}, 3))
  ln:set_parameters {rand({4}, 4, 0.5, 1.5), rand({4}, 5)}
  nn_check.gradients(ln, rand({2, 4}, 6, -2, 2))
end

function T.layer_norm_errors()
  check.raises(function() nn.LayerNorm {epsilon = 0} end, "LayerNorm: epsilon must be a positive number, got 0")
  check.raises(function() nn.LayerNorm {center = "yes"} end, 'LayerNorm: center must be true or false, got "yes"')
  check.raises(function() nn.LayerNorm {axis = 2} end, "LayerNorm: unknown option 'axis'")
end

---------------------------------------------------------------- Embedding

function T.embedding_looks_up_rows()
  local e = nn.Embedding(4, 2)
  local ids = tpu.tensor({{3, 0}, {1, 1}}, {dtype = "i32"})
  e(ids)
  e:set_parameters {tpu.tensor {{0, 1}, {2, 3}, {4, 5}, {6, 7}}}
  check.eq(e(ids):totable(), {{{6, 7}, {0, 1}}, {{2, 3}, {2, 3}}})
  check.eq(e(ids:cast("u8")).shape, {2, 2, 2})
  check.eq(tostring(e), "nn.Embedding(4 -> 2)")
  check.raises(function() e(tpu.tensor {{1.5}}) end,
    "Embedding 'embedding_%d+' expects integer ids %(i32 or u8%), got f32%[1,1%]")
end

function T.embedding_gradient_wrt_table()
  local e = nn.Embedding(5, 3)
  local ids = tpu.tensor({{4, 0, 4}}, {dtype = "i32"})
  nn_check.gradients(e, ids)
end

function T.embedding_errors()
  check.raises(function() nn.Embedding(0, 8) end, "Embedding: input_dim (the vocabulary size) must be a positive integer, got 0")
  check.raises(function() nn.Embedding(10, "8") end, 'Embedding: output_dim must be a positive integer, got "8"')
  check.raises(function() nn.Embedding(10, 8, {embeddings_regularizer = "l3"}) end, 'unknown regularizer "l3"')
end

---------------------------------------------------------------- Flatten, Activation, Sequential

function T.flatten_activation_sequential_gradients()
  nn_check.gradients(nn.Flatten(), rand({2, 2, 3}, 7))
  for _, name in ipairs {"relu", "tanh", "sigmoid", "softmax", "gelu"} do
    nn_check.gradients(nn.Activation(name), rand({2, 3}, 8, -2, 2))
  end
  nn_check.gradients(nn.Sequential {nn.Dense(3, {activation = "tanh"}), nn.LayerNorm(), nn.Dense(2)},
    rand({2, 4}, 9))
end

---------------------------------------------------------------- Reshape, Concatenate, Add

function T.reshape()
  local r = nn.Reshape {2, -1}
  check.eq(shape_str(r(rand({3, 4, 2}))), "3,2,4")
  check.eq(tostring(r), "nn.Reshape(2, -1)")
  check.raises(function() nn.Reshape {3, 5}(rand({2, 8})) end,
    "Reshape 'reshape_%d+' cannot reshape %(None, 8%) %(8 values per example%) into %(None, 3, 5%)")
  check.raises(function() nn.Reshape {-1, -1} end, "(at most one -1), e.g. {7, 7, 16}; got {-1, -1}")
  check.raises(function() nn.Reshape(6) end, "target_shape must be a list of positive sizes")
  nn_check.gradients(nn.Reshape {4}, rand({2, 2, 2}))
end

function T.concatenate()
  local a, b = tpu.tensor {{1, 2}}, tpu.tensor {{3}}
  check.eq(nn.Concatenate()({a, b}):totable(), {{1, 2, 3}})
  check.eq(nn.Concatenate {axis = 1}({a, tpu.tensor {{5, 6}}}):totable(), {{1, 2}, {5, 6}})
  check.eq(tostring(nn.Concatenate {axis = 2}), "nn.Concatenate(axis 2)")
  check.raises(function() nn.Concatenate {axis = 0} end,
    "Concatenate: axis must be a non%-zero integer %(1%-based; %-1 is the last axis%), got 0")
  check.raises(function() nn.Concatenate()({rand({2, 3}), rand({2, 3, 1})}) end,
    "needs inputs of one rank whose sizes match except on that axis, got %(None, 3%), %(None, 3, 1%)")
  check.raises(function() nn.Concatenate()(rand({2, 3})) end,
    "expects a list of at least 2 tensors, e.g. layer {a, b}; got one tensor of shape %(None, 3%)")
  nn_check.gradients(nn.Concatenate(), {rand({2, 2}, 1), rand({2, 3}, 2)})
end

function T.add()
  check.eq(nn.Add()({tpu.tensor {1, 2}, tpu.tensor {3, 4}, tpu.tensor {5, 6}}):totable(), {9, 12})
  check.raises(function() nn.Add()({rand({2, 3}), rand({2, 4})}) end,
    "Add 'add_%d+' needs inputs of one rank whose sizes are equal or 1 on each axis, got %(None, 3%), %(None, 4%)")
  nn_check.gradients(nn.Add(), {rand({2, 2}, 1), rand({2, 2}, 2)})
  -- sizes of 1 broadcast, as in Keras: a [batch, 1] bias column plus a [batch, 3] map
  check.eq(nn.Add()({tpu.tensor {{1}, {2}}, tpu.tensor {{1, 2, 3}, {4, 5, 6}}}):totable(), {{2, 3, 4}, {6, 7, 8}})
  nn_check.gradients(nn.Add(), {rand({2, 1}, 1), rand({2, 3}, 2)})
end

---------------------------------------------------------------- BatchNorm

function T.batch_norm_training_uses_batch_statistics()
  local bn = nn.BatchNorm {epsilon = 1e-6}
  local x = tpu.tensor {{1, 10}, {3, 30}}
  local y = bn(x, {training = true}):totable()
  check.near(y, {{-1, -1}, {1, 1}}, 1e-4)
  -- inference uses the moving statistics, which that call moved from mean 0, variance 1 by
  -- 0.01 of the batch's (mean {2, 20}, variance {1, 100}), as Keras's training call does
  local m, v = {0.02, 0.2}, {0.99 + 0.01, 0.99 + 1}
  local want = {}
  for r, row in ipairs {{1, 10}, {3, 30}} do
    want[r] = {(row[1] - m[1]) / math.sqrt(v[1] + 1e-6), (row[2] - m[2]) / math.sqrt(v[2] + 1e-6)}
  end
  check.near(bn(x):totable(), want, 1e-4)
  check.eq(tostring(bn), "nn.BatchNorm(2)")
end

-- Each of center and scale on and off, in training and in inference, against the formula.
function T.batch_norm_scale_and_center_each_on_and_off()
  local x = tpu.tensor {{1, 10}, {3, 30}, {8, -5}}
  local mean, var = {4, 35 / 3}, {26 / 3, 0}
  for _, i in ipairs {1, 2, 3} do var[2] = var[2] + (({10, 30, -5})[i] - 35 / 3) ^ 2 / 3 end
  local gamma, beta = {1.5, -0.5}, {0.25, 2}
  for _, scale in ipairs {true, false} do
    for _, center in ipairs {true, false} do
      local bn = nn.BatchNorm {scale = scale, center = center, epsilon = 1e-3}
      bn(x)
      local params = {}
      if scale then params[#params + 1] = tpu.tensor(gamma) end
      if center then params[#params + 1] = tpu.tensor(beta) end
      params[#params + 1] = tpu.tensor {-1, 2}   -- moving mean
      params[#params + 1] = tpu.tensor {4, 0.5}  -- moving variance
      bn:set_parameters(params)
      for _, training in ipairs {false, true} do  -- inference first: training moves the statistics
        local m = training and mean or {-1, 2}
        local v = training and var or {4, 0.5}
        local want = {}
        for r, row in ipairs(x:totable()) do
          want[r] = {}
          for c = 1, 2 do
            local y = (row[c] - m[c]) / math.sqrt(v[c] + 1e-3)
            if scale then y = y * gamma[c] end
            if center then y = y + beta[c] end
            want[r][c] = y
          end
        end
        local got = bn(x, {training = training}):totable()
        check.near(got, want, 1e-4, string.format("scale %s center %s training %s", scale, center, training))
      end
    end
  end
end

function T.batch_norm_records_moving_statistics()
  local bn = nn.BatchNorm {momentum = 0.9}
  local ctx = {training = true, updates = {}}
  bn(tpu.tensor {{1, 10}, {3, 30}}, ctx)
  local got = {}
  for e, v in pairs(ctx.updates) do got[e.name] = v:totable() end
  check.near(got.moving_mean, {0.2, 2.0}, 1e-5)           -- 0.9 * 0 + 0.1 * {2, 20}
  check.near(got.moving_variance, {0.9 + 0.1, 0.9 + 10}, 1e-4)  -- 0.9 * 1 + 0.1 * {1, 100}
  check.eq(#bn:_trainable_indices(), 2)
  check.eq(#bn:parameters(), 4)
end

-- As Keras's layer(x, training=True): an eager call moves the statistics at once; inside a
-- jit function of the user's (no ctx.updates) the traced values are dropped, not leaked.
function T.batch_norm_eager_training_call_moves_statistics()
  local bn = nn.BatchNorm {momentum = 0.9}
  local x = tpu.tensor {{1, 10}, {3, 30}}
  bn(x, {training = true})
  check.near(bn.moving_mean:totable(), {0.2, 2.0}, 1e-5)
  check.near(bn.moving_variance:totable(), {1.0, 10.9}, 1e-4)
  check.near(bn:parameters()[3]:totable(), {0.2, 2.0}, 1e-5)
  bn(x)  -- inference leaves them
  check.near(bn.moving_mean:totable(), {0.2, 2.0}, 1e-5)
  tpu.jit(function(v) return bn(v, {training = true}) end)(x)
  check.eq(tpu.is_traced(bn.moving_mean), false)
  check.near(bn.moving_mean:totable(), {0.2, 2.0}, 1e-5)
end

function T.batch_norm_frozen_runs_in_inference_mode()
  local bn = nn.BatchNorm {trainable = false}
  local ctx = {training = true, updates = {}}
  check.near(bn(tpu.tensor {{1, 10}, {3, 30}}, ctx):totable(), {{1, 10}, {3, 30}}, 2e-2)
  check.eq(next(ctx.updates), nil)
end

function T.batch_norm_gradients_training_and_inference()
  local bn = nn.BatchNorm()
  local x = rand({4, 3}, 11, -2, 2)
  bn(x)
  bn:set_parameters {rand({3}, 12, 0.5, 1.5), rand({3}, 13), rand({3}, 14), rand({3}, 15, 0.5, 2)}
  nn_check.gradients(bn, x, {ctx = {training = true}})
  nn_check.gradients(bn, rand({2, 2, 3}, 16))
end

-- The variance's gradient does not flow into the mean (zero but for rounding): a training
-- step's backward sums over x twice (the output gradient, and it times x), not three times,
-- beside the forward's two (mean, variance).
function T.batch_norm_backward_takes_two_sums_over_x()
  local bn = nn.BatchNorm()
  local x = rand({8, 4, 4, 3}, 17)
  bn(x)
  local dx = tpu.jit(tpu.grad(function(v) return (bn(v, {training = true, updates = {}}) ^ 2):sum() end))
  dx(x)
  local sums = 0
  for line in dx:lower():gmatch("[^\n]+") do
    if line:find("^%%%d+ = reduce") and line:find("dims=[0,1,2]", 1, true) then sums = sums + 1 end
  end
  check.eq(sums, 4)
end

-- Sample weights summing below 1 (four of 0.1): the mean is the weighted mean itself (divided
-- by 0.4, not by 1), so the variance's stopped gradient into it is zero and the gradient stays
-- exact (finite differences).
function T.batch_norm_fractional_sample_weights()
  local bn = nn.BatchNorm {momentum = 0}
  local x = tpu.tensor {{1, 10}, {3, 30}, {8, -5}, {2, 2}}
  bn(x)
  local w = tpu.tensor {0.1, 0.1, 0.1, 0.1}
  local ctx = {training = true, updates = {}, sample_weight = w}
  bn(x, ctx)
  local moved = {}
  for _, v in pairs(ctx.updates) do moved[#moved + 1] = v:totable() end
  table.sort(moved, function(a, b) return a[1] < b[1] end)
  check.near(moved[1], {3.5, 9.25}, 1e-5)  -- the moving mean: each column's plain mean
  nn_check.gradients(bn, x, {ctx = {training = true, sample_weight = w}})
end

function T.batch_norm_errors()
  check.raises(function() nn.BatchNorm {momentum = 1} end, "BatchNorm: momentum must be a number in [0, 1), got 1")
  check.raises(function() nn.BatchNorm {epsilon = -1} end, "BatchNorm: epsilon must be a positive number, got -1")
end

---------------------------------------------------------------- GlobalAvgPool2D

function T.global_avg_pool()
  local x = tpu.tensor {{{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}}}  -- [1, 2, 2, 2]
  check.eq(nn.GlobalAvgPool2D()(x):totable(), {{4, 5}})
  check.eq(nn.GlobalAvgPool2D {keepdims = true}(x).shape, {1, 1, 1, 2})
  check.raises(function() nn.GlobalAvgPool2D()(rand({2, 3})) end, "expects input with 4 dimensions, got f32%[2,3%]")
  nn_check.gradients(nn.GlobalAvgPool2D(), rand({2, 2, 3, 2}))
end

---------------------------------------------------------------- MultiHeadAttention

-- Attention computed from its definition, one head at a time, in plain Lua.
local function reference_attention(mha, q, v, mask)
  local function mat(t) return t:totable() end
  local x = mat(q)
  local vv = mat(v)
  local Wq, bq, Wk, bk = mat(mha.query_kernel), mat(mha.query_bias), mat(mha.key_kernel), mat(mha.key_bias)
  local Wv, bv, Wo, bo = mat(mha.value_kernel), mat(mha.value_bias), mat(mha.output_kernel), mat(mha.output_bias)
  local function proj(rows, W, b)
    local out = {}
    for i, r in ipairs(rows) do
      out[i] = {}
      for j = 1, #b do
        local s = b[j]
        for k = 1, #r do s = s + r[k] * W[k][j] end
        out[i][j] = s
      end
    end
    return out
  end
  local H, K = mha.num_heads, mha.key_dim
  local out = {}
  for bi = 1, #x do
    local Q, Kt, V = proj(x[bi], Wq, bq), proj(vv[bi], Wk, bk), proj(vv[bi], Wv, bv)
    local concat = {}
    for t = 1, #Q do concat[t] = {} end
    for h = 0, H - 1 do
      for t = 1, #Q do
        local scores, mx = {}, -math.huge
        for s = 1, #Kt do
          local d = 0
          for k = 1, K do d = d + Q[t][h * K + k] * Kt[s][h * K + k] end
          d = d / math.sqrt(K)
          if mask and mask[bi][s] == 0 then d = d - 1e9 end
          scores[s] = d
          mx = math.max(mx, d)
        end
        local z = 0
        for s = 1, #scores do scores[s] = math.exp(scores[s] - mx); z = z + scores[s] end
        for k = 1, K do
          local acc = 0
          for s = 1, #scores do acc = acc + scores[s] / z * V[s][h * K + k] end
          concat[t][h * K + k] = acc
        end
      end
    end
    out[bi] = proj(concat, Wo, bo)
  end
  return out
end

function T.attention_matches_definition()
  local mha = nn.MultiHeadAttention {num_heads = 2, key_dim = 3}
  local q, v = rand({2, 3, 4}, 21), rand({2, 5, 4}, 22)
  local y = mha {q, v}
  check.eq(y.shape, {2, 3, 4})
  for i, p in ipairs(mha:parameters()) do
    if p.ndim == 1 then
      local list = mha:parameters()
      list[i] = rand(p.shape, 30 + i)
      mha:set_parameters(list)
    end
  end
  check.near(mha({q, v}):totable(), reference_attention(mha, q, v), 1e-4)
  local mask = {{1, 1, 1, 0, 0}, {1, 1, 1, 1, 1}}
  check.near(mha({q, v, mask = tpu.tensor(mask)}):totable(), reference_attention(mha, q, v, mask), 1e-4)
  check.near(mha({q, v, mask = tpu.tensor(mask):gt(0)}):totable(), reference_attention(mha, q, v, mask), 1e-4)
  check.eq(tostring(mha), "nn.MultiHeadAttention(4 -> 4, 2 heads x 3)")
end

function T.attention_padding_is_ignored()
  local mha = nn.MultiHeadAttention {num_heads = 1, key_dim = 2}
  local x = rand({1, 4, 3}, 40)
  local mask = tpu.tensor {{1, 1, 0, 0}}
  local y1 = mha({x, mask = mask}):slice {{1, 1}, {1, 2}}
  local changed = tpu.concat({x:slice {{1, 1}, {1, 2}}, rand({1, 2, 3}, 41)}, 2)
  local y2 = mha({changed, x, mask = mask}):slice {{1, 1}, {1, 2}}
  -- queries 1..2 see only keys 1..2, whatever the padded positions hold
  check.near(y1:totable(), mha({x:slice {{1, 1}, {1, 2}}}):totable(), 1e-5)
  check.near(y2:totable(), y1:totable(), 1e-5)
end

function T.attention_gradients()
  local mha = nn.MultiHeadAttention {num_heads = 2, key_dim = 2, value_dim = 1, output_dim = 2}
  local q, v = rand({1, 2, 3}, 50), rand({1, 3, 3}, 51)
  nn_check.gradients(mha, {q, v, mask = tpu.tensor {{1, 1, 0}}})
  nn_check.gradients(nn.MultiHeadAttention {num_heads = 1, key_dim = 2, use_bias = false}, rand({2, 2, 2}, 52))
end

function T.attention_errors()
  check.raises(function() nn.MultiHeadAttention {key_dim = 4} end,
    "MultiHeadAttention: num_heads must be a positive integer, got nil")
  check.raises(function() nn.MultiHeadAttention {num_heads = 2, key_dim = 0.5} end,
    "MultiHeadAttention: key_dim must be a positive integer, got 0.5")
  check.raises(function() nn.MultiHeadAttention {num_heads = 2, key_dim = 4, dropout = 1.5} end,
    "MultiHeadAttention: dropout must be a number in [0, 1), got 1.5")
  check.raises(function() nn.MultiHeadAttention {num_heads = 2, key_dim = 4}(rand({2, 3})) end,
    "expects query, value and key of shape [batch, length, features], got (None, 3)")
  local built = nn.MultiHeadAttention {num_heads = 2, key_dim = 4}
  built(rand({2, 3, 8}))  -- a call after the first is checked too
  check.raises(function() built(rand({2, 8})) end,
    "expects query, value and key of shape [batch, length, features], got (None, 8)")
  check.raises(function() built {rand({2, 3, 8}), rand({2, 8})} end,
    "expects query, value and key of shape [batch, length, features], got (None, 3, 8), (None, 8)")
end

---------------------------------------------------------------- TransformerEncoder

function T.transformer_encoder_shapes_and_tree()
  local enc = nn.TransformerEncoder {num_heads = 2, intermediate_dim = 8, dropout = 0.1}
  check.eq(tostring(enc), "nn.TransformerEncoder(2 heads, ff 8, dropout 0.1)")
  local x = rand({2, 5, 4}, 60)
  check.eq(enc({x, mask = tpu.tensor {{1, 1, 1, 0, 0}, {1, 1, 1, 1, 1}}}).shape, {2, 5, 4})
  -- attention 4 x (4x4 + 4), two LayerNorms 2 x (4 + 4), ffn (4x8 + 8) + (8x4 + 4)
  check.eq(enc:count_params(), (4 * 4 + 4) * 4 + 2 * 8 + (4 * 8 + 8) + (8 * 4 + 4))
  local text = tostring(enc)
  check.is_true(text:find("(1): nn.MultiHeadAttention(4 -> 4, 2 heads x 2)", 1, true) ~= nil, text)
  check.is_true(text:find("(4): nn.Dense(4 -> 8, relu)", 1, true) ~= nil, text)
end

function T.transformer_encoder_output_is_normalized()
  local enc = nn.TransformerEncoder {num_heads = 1, intermediate_dim = 4}
  local y = enc(rand({1, 3, 4}, 61))
  check.near(y:mean(-1):totable(), {{0, 0, 0}}, 1e-5)
  local pre = nn.TransformerEncoder {num_heads = 1, intermediate_dim = 4, normalize_first = true}
  check.eq(pre(rand({1, 3, 4}, 61)).shape, {1, 3, 4})
end

function T.transformer_encoder_gradients()
  local enc = nn.TransformerEncoder {num_heads = 2, intermediate_dim = 3}
  nn_check.gradients(enc, {rand({1, 3, 2}, 62), mask = tpu.tensor {{1, 1, 0}}}, {tol = 2e-2})
end

function T.transformer_encoder_errors()
  check.raises(function() nn.TransformerEncoder {num_heads = 2} end,
    "TransformerEncoder: intermediate_dim must be a positive integer, got nil")
  check.raises(function() nn.TransformerEncoder {num_heads = 3, intermediate_dim = 8}(rand({1, 2, 4})) end,
    "features divisible by num_heads = 3, got (None, 2, 4)")
  check.raises(function() nn.TransformerEncoder {num_heads = 2, intermediate_dim = 8, activation = "swishy"} end,
    'TransformerEncoder: unknown activation "swishy"')
end

-- The options Dense and Conv2D share (nn/kernel_bias.lua), and those BatchNorm and LayerNorm
-- share (nn/scale_center.lua): which weights each combination makes, and errors naming the layer.
-- Named to run last in this file: each weight made moves the global initializer counter, and
-- transformer_encoder_gradients's finite differences are checked on the weights it draws.
function T.weights_of_the_shared_options()
  local function weights(layer, shape)
    layer(rand(shape))
    local names = {}
    for _, e in ipairs(layer:_weight_entries()) do names[#names + 1] = e.entry.name end
    return table.concat(names, " ")
  end
  check.eq(weights(nn.Dense(2, {kernel_initializer = "ones"}), {1, 3}), "kernel bias")
  check.eq(weights(nn.Conv2D(2, 1, {use_bias = false, kernel_initializer = "ones"}), {1, 2, 2, 1}), "kernel")
  check.eq(weights(nn.LayerNorm {center = false}, {2, 3}), "gamma")
  check.eq(weights(nn.LayerNorm {scale = false}, {2, 3}), "beta")
  check.eq(weights(nn.BatchNorm {scale = false, center = false}, {2, 3}), "moving_mean moving_variance")
  check.eq(weights(nn.BatchNorm(), {2, 3}), "gamma beta moving_mean moving_variance")
  local y = nn.LayerNorm {scale = false, center = false}(tpu.tensor {{1, 3}}):totable()
  check.near(y[1][1], -1, 1e-3); check.near(y[1][2], 1, 1e-3)
  check.raises(function() nn.Conv2D(2, 1, {use_bias = 1}) end, "Conv2D: use_bias must be")
  check.raises(function() nn.Dense(2, {kernel_initializer = "nope"}) end, "Dense")
  check.raises(function() nn.BatchNorm {epsilon = 0} end, "BatchNorm: epsilon")
  check.raises(function() nn.LayerNorm {center = "yes"} end, "LayerNorm: center must be")
end

-- A traced op of a library layer is reported at the line that built the layer (not at the
-- fit or jit call that traced it); an op of the user's own call() at its own line.
function T.traced_ops_point_at_the_line_that_built_their_layer()
  local built = debug.getinfo(1, "l").currentline + 1
  local dense = nn.Dense(2)
  local Twice = nn.Module:extend("Twice")
  local own = debug.getinfo(1, "l").currentline + 1
  function Twice:call(x) return x * 2 end
  local twice = Twice()
  local nodes = require("tpu.jit").cost_nodes(function(x) return twice(dense(x)) end, "where", tpu.ones {1, 3})
  local at = {}
  for _, n in ipairs(nodes) do at[n.op] = n.loc end
  local function line_and_layer(loc) return {tonumber(loc:match(":(%d+) %(")), loc:match("%((.-)%)$")} end
  check.eq(line_and_layer(at.dot), {built, dense.name})
  check.eq(line_and_layer(at.mul), {own, twice.name})
end

-- The base class's compute_output_shape builds an unbuilt layer and runs an unknown batch as 1,
-- so a custom layer with weights follows nn.Input in a Sequential.
function T.default_output_shape_builds_and_keeps_the_batch_unknown()
  local Scale = nn.Module:extend("Scale")
  function Scale:build(s) self.w = self:add_weight {shape = {s[#s]}, initializer = "ones"} end
  function Scale:call(x) return x * self.w end
  check.eq(Scale():compute_output_shape {-1, 2}, {-1, 2})
  check.eq(Scale():compute_output_shape {5, 2}, {5, 2})
  local model = nn.Sequential {nn.Input {shape = {2}}, Scale(), nn.Dense(3)}
  check.eq(model.output_shape, {-1, 3})
  check.eq({model:count_params()}, {11, 11, 0})
end

return T
