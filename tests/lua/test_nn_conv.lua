-- Tests of the image layers (Conv2D, MaxPool2D, AvgPool2D) and Dropout: values against plain
-- Lua loops, gradients against finite differences, output shapes, random keys in fit.
local tpu = require "tpu"
local check = require "check"
local nn_check = require "nn_check"
local nn = tpu.nn
local rand = nn_check.rand

local T = {}

-- Convolution by definition (NHWC, HWIO), with "same" padding (the extra row/column at the
-- end).
local function reference_conv(x, w, stride, padding)
  local X, W = x:totable(), w:totable()
  local n, h, wd, c = table.unpack(x.shape)
  local kh, kw, _, f = table.unpack(w.shape)
  local oh, ow, ph, pw = (h - kh) // stride + 1, (wd - kw) // stride + 1, 0, 0
  if padding == "same" then
    oh, ow = (h + stride - 1) // stride, (wd + stride - 1) // stride
    ph = math.max((oh - 1) * stride + kh - h, 0) // 2
    pw = math.max((ow - 1) * stride + kw - wd, 0) // 2
  end
  local out = {}
  for b = 1, n do
    out[b] = {}
    for i = 1, oh do
      out[b][i] = {}
      for j = 1, ow do
        out[b][i][j] = {}
        for o = 1, f do
          local s = 0
          for di = 1, kh do
            for dj = 1, kw do
              local r, q = (i - 1) * stride + di - ph, (j - 1) * stride + dj - pw
              if r >= 1 and r <= h and q >= 1 and q <= wd then
                for ci = 1, c do s = s + X[b][r][q][ci] * W[di][dj][ci][o] end
              end
            end
          end
          out[b][i][j][o] = s
        end
      end
    end
  end
  return out
end

function T.conv2d_matches_definition()
  local x = rand({2, 5, 6, 3}, 1)
  for _, case in ipairs {{1, "valid"}, {1, "same"}, {2, "valid"}, {2, "same"}} do
    local stride, padding = case[1], case[2]
    local conv = nn.Conv2D(4, {3, 2}, {strides = stride, padding = padding, use_bias = false})
    local y = conv(x)
    check.near(y:totable(), reference_conv(x, conv.kernel, stride, padding), 1e-4, padding .. stride)
    check.eq(y.shape, conv:compute_output_shape(x.shape))
  end
end

function T.conv2d_bias_activation_and_shapes()
  local conv = nn.Conv2D(2, 1, {activation = "relu"})
  conv(tpu.zeros({1, 2, 2, 1}))
  conv:set_parameters {tpu.tensor {{{{1, -1}}}}, tpu.tensor {0.5, 0.5}}
  check.eq(conv(tpu.tensor {{{{1}, {2}}, {{-3}, {0}}}}):totable(),
    {{{{1.5, 0}, {2.5, 0}}, {{0, 3.5}, {0.5, 0.5}}}})
  check.eq(nn.Conv2D(8, 3, {strides = 2, padding = "same"})(tpu.zeros({1, 28, 28, 1})).shape, {1, 14, 14, 8})
  check.eq(nn.Conv2D(8, 5)(tpu.zeros({1, 28, 28, 1})).shape, {1, 24, 24, 8})
  check.eq(nn.Conv2D(8, 3):count_params(), 0)
  local c = nn.Conv2D(8, 3)
  c:build({1, 28, 28, 3})
  check.eq(c:count_params(), 3 * 3 * 3 * 8 + 8)
  check.eq(c.kernel.shape, {3, 3, 3, 8})
end

function T.conv2d_gradients()
  local conv = nn.Conv2D(2, 2, {padding = "same", activation = "tanh"})
  conv(rand({1, 3, 3, 2}))
  conv:set_parameters {conv.kernel, rand({2}, 9)}
  nn_check.gradients(conv, rand({1, 3, 3, 2}, 8))
  nn_check.gradients(nn.Conv2D(1, {2, 3}, {strides = 2}), rand({2, 4, 5, 1}, 10))
end

function T.conv2d_regularizer_and_wrong_channels()
  local conv = nn.Conv2D(2, 1, {kernel_regularizer = nn.regularizers.l2(0.5), name = "c"})
  conv(tpu.zeros({1, 2, 2, 3}))
  check.near(conv:regularization_loss():item(), 0.5 * conv.kernel:square():sum():item(), 1e-6)
  check.raises(function() conv(tpu.zeros({1, 2, 2, 4})) end,
    "Conv2D 'c' expects input with last dimension 3, got f32[1,2,2,4]")
end

---------------------------------------------------------------- pools

local function reference_pool(x, k, stride, kind)
  local X = x:totable()
  local n, h, w, c = table.unpack(x.shape)
  local out = {}
  for b = 1, n do
    out[b] = {}
    for i = 1, (h - k) // stride + 1 do
      out[b][i] = {}
      for j = 1, (w - k) // stride + 1 do
        out[b][i][j] = {}
        for ch = 1, c do
          local acc = kind == "max" and -math.huge or 0
          for di = 1, k do
            for dj = 1, k do
              local v = X[b][(i - 1) * stride + di][(j - 1) * stride + dj][ch]
              acc = kind == "max" and math.max(acc, v) or acc + v / (k * k)
            end
          end
          out[b][i][j][ch] = acc
        end
      end
    end
  end
  return out
end

function T.pools_match_definition()
  local x = rand({2, 6, 7, 3}, 11)
  check.near(nn.MaxPool2D()(x):totable(), reference_pool(x, 2, 2, "max"), 1e-6)
  check.near(nn.AvgPool2D()(x):totable(), reference_pool(x, 2, 2, "avg"), 1e-6)
  check.near(nn.MaxPool2D(3, {strides = 1})(x):totable(), reference_pool(x, 3, 1, "max"), 1e-6)
  check.near(nn.AvgPool2D {pool_size = 3, strides = 2}(x):totable(), reference_pool(x, 3, 2, "avg"), 1e-6)
  check.eq(nn.MaxPool2D {padding = "same"}(x).shape, {2, 3, 4, 3})
  check.eq(nn.AvgPool2D(3, {strides = 1, padding = "same"})(x).shape, {2, 6, 7, 3})
  check.eq(tostring(nn.MaxPool2D {pool_size = {2, 3}, strides = 1}), "nn.MaxPool2D(2x3, strides 1x1, valid)")
  -- "same" averages leave the padding out: a corner of all ones stays 1
  check.near(nn.AvgPool2D(3, {strides = 1, padding = "same"})(tpu.ones({1, 3, 3, 1})):totable(),
    tpu.ones({1, 3, 3, 1}):totable(), 1e-6)
end

function T.pool_gradients()
  nn_check.gradients(nn.MaxPool2D(), rand({1, 4, 4, 2}, 12))
  nn_check.gradients(nn.MaxPool2D(3, {strides = 2, padding = "same"}), rand({1, 5, 5, 1}, 13))
  nn_check.gradients(nn.AvgPool2D(), rand({2, 4, 4, 1}, 14))
  nn_check.gradients(nn.AvgPool2D(3, {strides = 1, padding = "same"}), rand({1, 3, 4, 1}, 15))
end

function T.pool_errors()
  check.raises(function() nn.MaxPool2D()(tpu.zeros({1, 4, 4})) end,
    "MaxPool2D 'max_pool2d_%d+' expects NHWC input %[batch, height, width, channels%], got %(None, 4, 4%)")
  check.raises(function() nn.AvgPool2D(5)(tpu.zeros({1, 4, 4, 1})) end,
    'a 5x5 window does not fit input (None, 4, 4, 1) with padding "valid"')
end

---------------------------------------------------------------- Dropout

function T.dropout_inference_is_identity()
  local x = rand({4, 5}, 16)
  local d = nn.Dropout(0.5)
  check.eq(d(x):totable(), x:totable())
  check.eq(d(x, {training = false}):totable(), x:totable())
  check.eq(nn.Dropout(0)(x, {training = true}):totable(), x:totable())
  check.eq(tostring(d), "nn.Dropout(0.5)")
end

function T.dropout_training_masks_and_scales()
  local d = nn.Dropout(0.25)
  local x = tpu.ones({100, 100})
  local y = d(x, {training = true, key = tpu.random.key(1)})
  local kept = y:gt(0):cast("f32"):mean():item()
  check.near(kept, 0.75, 0.02)
  check.near(y:max():item(), 1 / 0.75, 1e-6)
  check.near(y:mean():item(), 1, 0.03)
  -- same key, same mask; another key, another mask
  local again = d(x, {training = true, key = tpu.random.key(1)})
  check.eq((again - y):abs():sum():item(), 0)
  local other = d(x, {training = true, key = tpu.random.key(2)})
  check.is_true((other - y):abs():sum():item() > 0)
  -- within one ctx (one step) each draw gets its own key: two layers, or one layer twice
  local ctx = {training = true, key = tpu.random.key(1)}
  local first = d(x, ctx)
  check.eq((first - y):abs():sum():item(), 0)
  check.is_true((nn.Dropout(0.25)(x, ctx) - first):abs():sum():item() > 0)
  check.is_true((d(x, ctx) - first):abs():sum():item() > 0)
end

function T.dropout_needs_a_key_in_training()
  check.raises(function() nn.Dropout(0.5, {name = "drop"})(tpu.ones({2}), {training = true}) end,
    "Dropout 'drop' needs a random key in training mode: call it as layer(x, {training = true, "
    .. "key = tpu.random.key(seed)}) (fit passes one per step)")
end

function T.dropout_gradient_with_a_fixed_key()
  nn_check.gradients(nn.Dropout(0.5), rand({3, 4}, 17), {ctx = {training = true, key = tpu.random.key(3)}})
end

function T.fit_passes_a_new_key_each_step_without_recompiling()
  -- a probe layer stores a random draw from its key in a non-trainable weight every step
  local Probe = nn.Module:extend("Probe")
  function Probe:build(_shape)
    self:add_weight {name = "draw", shape = {4}, initializer = "zeros", trainable = false}
  end
  function Probe:call(x, ctx)
    if ctx.training then self:update_state(ctx, "draw", tpu.random.uniform(self:random_key(ctx), {4})) end
    return x
  end
  local probe = Probe()
  local model = nn.Sequential {nn.Dropout(0.5), probe, nn.Dense(1)}
  model:compile {optimizer = "sgd", loss = "mse"}
  local x, y = rand({8, 3}, 18), rand({8, 1}, 19)
  local draws = {}
  for i = 1, 3 do
    model:fit({x, y}, {batch_size = 8, verbose = 0})
    draws[i] = probe.draw:totable()
  end
  check.is_true(draws[1][1] ~= draws[2][1] and draws[2][1] ~= draws[3][1], check.show(draws))
  check.eq(model.compiled.steps.train:stats().compiles, 1)
end

function T.dropout_in_a_trained_cnn_is_deterministic_per_seed()
  local function train_once()
    nn.set_seed(5)
    local model = nn.Sequential {nn.Conv2D(2, 3, {activation = "relu"}), nn.MaxPool2D(),
                                 nn.Dropout(0.5), nn.Flatten(), nn.Dense(3)}
    model:compile {optimizer = "adam", loss = "sparse_categorical_crossentropy"}
    local x = rand({6, 6, 6, 1}, 20)
    local y = tpu.tensor({0, 1, 2, 0, 1, 2}, {dtype = "i32"})
    return model:fit({x, y}, {batch_size = 3, epochs = 2, verbose = 0}).history.loss
  end
  local a, b = train_once(), train_once()
  check.eq(a, b)
end

return T
