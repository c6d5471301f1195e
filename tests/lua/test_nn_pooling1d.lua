-- The 1-D poolings over [batch, steps, channels] (MaxPool1D, AvgPool1D and their global forms):
-- values against a numpy reference of Keras's definition ("same" pads (out - 1) * strides +
-- pool_size - steps, the odd one after, and an edge window averages only the steps it covers),
-- gradients against finite differences, printing and errors.
local tpu = require "tpu"
local check = require "check"
local jacobian = require "jacobian"
local nn_check = require "nn_check"
local nn = tpu.nn
local rand = nn_check.rand

local T = {}

local x = tpu.tensor {{{1, -1}, {3, 0}, {2, 5}, {-4, 2}, {0, 1}, {6, -3}, {1, 1}}}  -- [1, 7, 2]

-- numpy: for each window [i * s - before, i * s - before + k) clipped to the steps, max / mean
local want = {
  {2, nil, "valid", {{{3, 0}, {2, 5}, {6, 1}}}, {{{2, -0.5}, {-1, 3.5}, {3, -1}}}},
  {3, 2, "valid", {{{3, 5}, {2, 5}, {6, 1}}},
   {{{2, 1.3333333333333333}, {-0.6666666666666666, 2.6666666666666665}, {2.3333333333333335, -0.3333333333333333}}}},
  {3, 2, "same", {{{3, 0}, {3, 5}, {6, 2}, {6, 1}}},
   {{{2, -0.5}, {0.3333333333333333, 2.3333333333333335}, {0.6666666666666666, 0}, {3.5, -1}}}},
  {2, 1, "same", {{{3, 0}, {3, 5}, {2, 5}, {0, 2}, {6, 1}, {6, 1}, {1, 1}}},
   {{{2, -0.5}, {2.5, 2.5}, {-1, 3.5}, {-2, 1.5}, {3, -1}, {3.5, -1}, {1, 1}}}},
  {4, 3, "same", {{{3, 5}, {6, 5}, {6, 1}}}, {{{2, 1.3333333333333333}, {1, 1.25}, {3.5, -1}}}},
}

function T.pool1d_values()
  for _, c in ipairs(want) do
    local k, s, padding, max, avg = table.unpack(c)
    local opts = {strides = s, padding = padding}
    local what = string.format("%d/%s/%s", k, tostring(s), padding)
    local mp, ap = nn.MaxPool1D(k, opts), nn.AvgPool1D(k, opts)
    check.near(mp(x):totable(), max, 1e-6, "max " .. what)
    check.near(ap(x):totable(), avg, 1e-6, "avg " .. what)
    check.eq(mp:compute_output_shape({-1, 7, 2}), {-1, #max[1], 2}, what)
  end
  check.near(nn.MaxPooling1D {pool_size = 3, strides = 2}(x):totable(), want[2][4], 0)
  check.near(nn.AveragePooling1D({3}, {strides = {2}})(x):totable(), want[2][5], 1e-6)
  check.eq(nn.MaxPooling1D == nn.MaxPool1D, true)
  check.eq(nn.AveragePooling1D == nn.AvgPool1D, true)
end

function T.global_pool1d_values()
  check.near(nn.GlobalAvgPool1D()(x):totable(), {{1.2857142857142858, 0.7142857142857143}}, 1e-6)
  check.near(nn.GlobalMaxPool1D()(x):totable(), {{6, 5}}, 0)
  check.near(nn.GlobalAveragePooling1D {keepdims = true}(x):totable(), {{{1.2857142857142858, 0.7142857142857143}}}, 1e-6)
  check.eq(nn.GlobalMaxPooling1D {keepdims = true}(x).shape, {1, 1, 2})
  check.eq(nn.GlobalAveragePooling1D == nn.GlobalAvgPool1D, true)
  check.eq(nn.GlobalMaxPooling1D == nn.GlobalMaxPool1D, true)
end

function T.pool1d_in_models()
  local model = nn.Sequential {nn.Input {shape = {8, 3}}, nn.Conv1D(4, 3, {padding = "same"}),
                               nn.MaxPool1D(), nn.AvgPool1D(2, {strides = 1, padding = "same"}),
                               nn.GlobalMaxPool1D(), nn.Dense(1)}
  check.eq(model(rand({5, 8, 3})).shape, {5, 1})
  local text = tostring(model)
  check.eq(text:match("nn.MaxPool1D%(2, valid%)") ~= nil, true, text)
  check.eq(text:match("nn.AvgPool1D%(2, strides 1, same%)") ~= nil, true, text)
  check.eq(tostring(nn.GlobalAvgPool1D()), "nn.GlobalAvgPool1D")
  local summary = require("tpu.nn.summary")(model)  -- the text model:summary() prints
  check.eq(summary:match("%(None, 4, 4%)") ~= nil, true, summary)
  check.eq(summary:match("GlobalMaxPool1D") ~= nil, true, summary)
  model:compile {optimizer = "adam", loss = "mse"}
  local h = model:fit(rand({8, 8, 3}), rand({8, 1}), {epochs = 2, batch_size = 4, verbose = 0})
  check.eq(#h.history.loss, 2)
end

function T.pool1d_gradients()
  -- distinct values, so no window has a tie for its max
  local v = tpu.tensor {{{0.1, 0.9}, {0.5, -0.3}, {-0.8, 0.2}, {0.7, 0.45}, {0.3, -0.6}}}
  for _, layer in ipairs {nn.MaxPool1D(), nn.MaxPool1D(3, {strides = 2, padding = "same"}),
                          nn.AvgPool1D(), nn.AvgPool1D(2, {strides = 1, padding = "same"}),
                          nn.GlobalAvgPool1D(), nn.GlobalMaxPool1D {keepdims = true}} do
    check.near(jacobian.max_error(function(t) return layer(t) end, v), 0, 1e-2, tostring(layer))
  end
end

function T.pool1d_errors()
  check.raises(function() nn.MaxPool1D(5)(tpu.ones {1, 4, 2}) end,
    "MaxPool1D 'max_pool1d_%d+': a window of 5 steps does not fit input %(None, 4, 2%) with padding \"valid\"")
  check.raises(function() nn.AvgPool1D()(tpu.ones {1, 4, 4, 2}) end, "expects input %[batch, steps, channels%]")
  check.raises(function() nn.MaxPool1D(2, {pool_size = 2}) end, "MaxPool1D: pool_size given twice")
  check.raises(function() nn.MaxPool1D {pool_size = {2, 2}} end, "MaxPool1D: pool_size must be a positive integer")
  check.raises(function() nn.AvgPool1D {strides = 0} end, "AvgPool1D: strides must be a positive integer")
  check.raises(function() nn.AvgPool1D {padding = "causal"} end, "padding must be")
  check.raises(function() nn.GlobalAvgPool1D()(tpu.ones {2, 3}) end, "GlobalAvgPool1D '.*' expects input")
  check.raises(function() nn.GlobalMaxPool1D {keepdim = true} end, "unknown option 'keepdim'")
end

return T
