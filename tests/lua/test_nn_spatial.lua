-- Tests of ZeroPadding2D, Cropping2D and GlobalMaxPool2D: values against plain Lua loops,
-- gradients against finite differences, the argument forms, and the functional probe that
-- declares a model without computing (tpu.nn.Node).
local tpu = require "tpu"
local check = require "check"
local nn_check = require "nn_check"
local nn = tpu.nn
local rand = nn_check.rand

local T = {}

-- out[b][i][j][c] = x[b][i - top][j - left][c], or 0 outside x.
local function reference_pad(x, top, bottom, left, right)
  local X, n, h, w, c = x:totable(), table.unpack(x.shape)
  local out = {}
  for b = 1, n do
    out[b] = {}
    for i = 1, top + h + bottom do
      out[b][i] = {}
      for j = 1, left + w + right do
        out[b][i][j] = {}
        for k = 1, c do
          local r = X[b][i - top]
          out[b][i][j][k] = r and r[j - left] and r[j - left][k] or 0
        end
      end
    end
  end
  return out
end

-- An input of unknown height and width (None, as Keras's Input((None, None, 3))) builds: the
-- sizes that follow from it stay unknown; known ones are still checked, with the layer's padding.
function T.unknown_spatial_sizes_stay_unknown()
  local function out(layer, shape)
    return nn.Sequential {nn.Input {shape = shape}, layer}.output_shape
  end
  check.eq(out(nn.Conv2D(4, 3, {padding = "same"}), {-1, -1, 3}), {-1, -1, -1, 4})
  check.eq(out(nn.Conv2D(4, 3), {-1, 9, 3}), {-1, -1, 7, 4})
  check.eq(out(nn.Conv1D(4, 3), {-1, 3}), {-1, -1, 4})
  check.eq(out(nn.DepthwiseConv2D(3), {-1, -1, 2}), {-1, -1, -1, 2})
  check.eq(out(nn.MaxPool2D(), {-1, -1, 3}), {-1, -1, -1, 3})
  check.eq(out(nn.UpSampling2D(2), {-1, 5, 3}), {-1, -1, 10, 3})
  check.eq(out(nn.Conv2DTranspose(2, 3, {strides = 2, padding = "same"}), {-1, -1, 3}), {-1, -1, -1, 2})
  check.eq(out(nn.Flatten(), {-1, 3}), {-1, -1})
  check.eq(out(nn.ZeroPadding2D(3), {-1, 5, 3}), {-1, -1, 11, 3})
  check.eq(out(nn.Cropping2D(1), {-1, 5, 3}), {-1, -1, 3, 3})
  check.raises(function() nn.Sequential {nn.Input {shape = {-1, 3}}, nn.Flatten(), nn.Dense(4)} end,
    "Dense 'dense_%d+' needs the size of its input's last dimension, got %(None, None%)")
  check.raises(function() out(nn.Conv2D(4, 5), {-1, 3, 3}) end,
    'a 5x5 kernel does not fit input (None, None, 3, 3) with padding "valid"')
  check.raises(function() out(nn.MaxPool2D {pool_size = 4}, {2, -1, 3}) end,
    'a 4x4 window does not fit input (None, 2, None, 3) with padding "valid"')
end

function T.zero_padding_matches_definition()
  local x = rand({2, 3, 4, 2}, 1)
  check.near(nn.ZeroPadding2D {padding = {{1, 0}, {2, 3}}}(x):totable(), reference_pad(x, 1, 0, 2, 3), 0)
  check.near(nn.ZeroPadding2D()(x):totable(), reference_pad(x, 1, 1, 1, 1), 0)
  check.near(nn.ZeroPadding2D({2, 0})(x):totable(), reference_pad(x, 2, 2, 0, 0), 0)
end

function T.cropping_undoes_padding()
  local x = rand({2, 3, 4, 2}, 2)
  local padded = nn.ZeroPadding2D {padding = {{1, 2}, {0, 3}}}(x)
  check.near(nn.Cropping2D {cropping = {{1, 2}, {0, 3}}}(padded):totable(), x:totable(), 0)
  check.near(nn.Cropping2D()(x):totable(), x:totable(), 0)
end

function T.cropping_matches_definition()
  local x = rand({2, 5, 6, 2}, 3)
  local X, y = x:totable(), nn.Cropping2D({1, 2})(x)
  check.eq(y.shape, {2, 3, 2, 2})
  local Y = y:totable()
  for b = 1, 2 do
    for i = 1, 3 do
      for j = 1, 2 do check.near(Y[b][i][j], X[b][i + 1][j + 2], 0) end
    end
  end
end

function T.global_max_pool_matches_definition()
  local x = rand({2, 3, 4, 5}, 4)
  local X, Y = x:totable(), nn.GlobalMaxPool2D()(x):totable()
  for b = 1, 2 do
    for c = 1, 5 do
      local m = -math.huge
      for i = 1, 3 do for j = 1, 4 do m = math.max(m, X[b][i][j][c]) end end
      check.near(Y[b][c], m, 0)
    end
  end
  check.eq(nn.GlobalMaxPooling2D {keepdims = true}(x).shape, {2, 1, 1, 5})
  check.is_true(nn.GlobalMaxPooling2D == nn.GlobalMaxPool2D and nn.GlobalAveragePooling2D == nn.GlobalAvgPool2D)
end

function T.gradients()
  nn_check.gradients(nn.ZeroPadding2D {padding = {{1, 0}, {2, 1}}}, rand({1, 2, 3, 2}, 5))
  nn_check.gradients(nn.Cropping2D {cropping = {{1, 0}, {0, 1}}}, rand({1, 3, 3, 2}, 6))
  nn_check.gradients(nn.GlobalMaxPool2D(), rand({2, 2, 3, 2}, 7))
end

function T.output_shapes_match_compute_output_shape()
  local x = rand({2, 5, 6, 3}, 8)
  for _, layer in ipairs {nn.ZeroPadding2D(2), nn.Cropping2D {cropping = {{2, 1}, {0, 3}}},
                          nn.GlobalMaxPool2D(), nn.GlobalMaxPool2D {keepdims = true}} do
    check.eq(layer(x).shape, layer:compute_output_shape(x.shape), layer.name)
  end
end

-- Declaring a functional model traces each layer on symbolic inputs: no forward pass runs.
function T.functional_declaration_traces_instead_of_computing()
  local seen = {}
  local Probe = nn.Module:extend("Probe")
  function Probe:call(x, _ctx)
    seen[#seen + 1] = tpu.is_traced(x)
    return x
  end
  local input = nn.Input {shape = {4, 4, 3}}
  local y = Probe()(nn.ZeroPadding2D(1)(input))
  check.eq(seen, {true})
  check.eq(y.shape, {-1, 6, 6, 3})
end

-- A custom layer whose call only works eagerly still declares (it runs on zeros instead).
function T.functional_declaration_of_an_eager_only_layer()
  local Eager = nn.Module:extend("Eager")
  function Eager:call(x, _ctx)
    local _ = x:sum():item()  -- eager only
    return x
  end
  local input = nn.Input {shape = {3}}
  local model = nn.Model {inputs = input, outputs = nn.Dense(2)(Eager()(input))}
  check.eq(model.output_shape, {-1, 2})
end

-- count_params: total, trainable and non-trainable, as Keras's summary counts them.
function T.count_params_returns_three_counts()
  local model = nn.Sequential {nn.Conv2D(4, 3), nn.BatchNorm(), nn.Dense(2, {trainable = false})}
  model:build({1, 5, 5, 3})
  local conv, bn, dense = 3 * 3 * 3 * 4 + 4, 4 * 4, 4 * 2 + 2
  check.eq({model:count_params()}, {conv + bn + dense, conv + 2 * 4, 2 * 4 + dense})
end

return T
