-- Tests of Rescaling and Normalization (Keras's preprocessing layers, EfficientNet's input)
-- and Dropout's noise_shape: values against the definitions, Normalization's non-trainable
-- weights and adapt, training through fit, and the errors.
local tpu = require "tpu"
local check = require "check"
local nn_check = require "nn_check"
local nn = tpu.nn
local rand = nn_check.rand

local T = {}

function T.rescaling_scales_and_offsets()
  local x = tpu.tensor({{0, 127.5, 255}})
  check.near(nn.Rescaling(1 / 255)(x):totable(), {{0, 0.5, 1}}, 1e-6)
  check.near(nn.Rescaling(1 / 127.5, {offset = -1})(x):totable(), {{-1, 0, 1}}, 1e-6)
  check.near(nn.Rescaling({1, 2, 3}, {offset = {0, 0, 1}})(x):totable(), {{0, 255, 766}}, 1e-3)
  check.eq(nn.Rescaling(2)(tpu.tensor({{1, 2}}, {dtype = "i32"})).dtype, "f32")
  check.eq({nn.Rescaling(2):count_params()}, {0, 0, 0})
end

function T.normalization_with_given_statistics_is_constant()
  local layer = nn.Normalization {mean = {1, 2}, variance = {4, 0}}
  local y = layer(tpu.tensor({{3, 2}, {1, 3}}))
  check.near(y:totable(), {{1, 0}, {0, 1e7}}, 1e-3)  -- a zero variance divides by 1e-7
  check.eq(#layer:parameters(), 0)
end

function T.normalization_weights_are_non_trainable_and_adapt_sets_them()
  local layer = nn.Normalization()
  local x = rand({4, 3, 3, 2}, 1, -2, 5)
  check.eq(layer(x).shape, x.shape)
  check.eq({layer:count_params()}, {5, 0, 5})  -- mean 2, variance 2, count 1
  check.near(layer(x):totable(), x:totable(), 1e-6)  -- mean 0, variance 1 until adapted
  layer:adapt(x)
  local y = layer(x)
  check.near(y:mean({1, 2, 3}):totable(), {0, 0}, 1e-5)
  check.near(y:square():mean({1, 2, 3}):totable(), {1, 1}, 1e-4)
  check.eq(layer.count:item(), 36)
  local per_row = nn.Normalization {axis = 2}
  per_row:adapt(rand({5, 3, 2}, 2))
  check.eq(per_row.mean.shape, {3})
end

-- adapt on a data set combines its batches' moments, as Keras's adapt streams one: the same
-- statistics as adapt on the whole tensor (to rounding); elements with labels are refused.
function T.normalization_adapts_to_a_data_set()
  local x = rand({50, 3, 2}, 4, -3, 40)
  local whole, streamed = nn.Normalization(), nn.Normalization()
  whole:adapt(x)
  streamed:adapt(tpu.data.from_tensors(x):batch(8))
  check.near(streamed.mean:totable(), whole.mean:totable(), 1e-4)
  check.near(streamed.variance:totable(), whole.variance:totable(), 1e-3)
  check.eq(streamed.count:item(), whole.count:item())
  local per_row = nn.Normalization {axis = 2}
  per_row:adapt(tpu.data.from_tensors(x):batch(16))
  check.eq(per_row.mean.shape, {3})
  check.raises(function() nn.Normalization():adapt(tpu.data.from_tensors {x, x}:batch(8)) end,
    "adapt takes a data set of inputs alone")
  check.raises(function() nn.Normalization():adapt(tpu.data.from_tensors(x):batch(8):cycle()) end,
    "adapt's data set never ends")
  check.raises(function() nn.Normalization():adapt({1}) end,
    "Normalization: adapt needs a tensor or a data set (tpu.data), got {1}")
end

function T.normalization_stays_fixed_through_fit()
  local input = nn.Input {shape = {2}}
  local norm = nn.Normalization()
  local model = nn.Model {inputs = input, outputs = nn.Dense(1)(norm(input))}
  local x = rand({8, 2}, 3, 0, 10)
  norm:adapt(x)
  local mean = norm.mean:totable()
  model:compile {optimizer = "sgd", loss = "mse"}
  model:fit(x, tpu.zeros({8, 1}), {epochs = 1, batch_size = 4, verbose = 0})
  check.near(norm.mean:totable(), mean, 0)
end

function T.dropout_noise_shape_drops_whole_examples()
  local x = tpu.ones({64, 2, 3, 4})
  local y = nn.Dropout(0.5, {noise_shape = {-1, 1, 1, 1}})(x, {training = true, key = tpu.random.key(4)})
  local per_example = y:reshape({64, 24})
  local kept = 0
  for _, row in ipairs(per_example:totable()) do
    local first = row[1]
    for _, v in ipairs(row) do check.eq(v, first) end
    check.is_true(first == 0 or first == 2, "an example is dropped or scaled by 2, got " .. first)
    if first > 0 then kept = kept + 1 end
  end
  check.is_true(kept > 10 and kept < 54, "about half kept, got " .. kept)
end

function T.errors()
  check.raises(function() nn.Rescaling("a") end, "Rescaling: scale must be a number or a list of numbers")
  check.raises(function() nn.Rescaling({1, 2})(tpu.ones({1, 3})) end, "scale has 2 entries for 3 channels")
  check.raises(function() nn.Normalization {mean = 1} end, "give both mean and variance")
  check.raises(function() nn.Normalization {axis = 1} end, "axis must be a feature axis")
  check.raises(function() nn.Normalization {mean = {1, 2}, variance = {1, 2}}(tpu.ones({1, 3})) end,
    "mean has 2 entries for 3 features")
  check.raises(function() nn.Normalization {mean = 0, variance = 1}:adapt(tpu.ones({2, 2})) end,
    "adapt sets the statistics of a layer built without mean and variance")
  check.raises(function() nn.Dropout(0.5, {noise_shape = {1, 2}})(tpu.ones({2, 3})) end,
    "noise_shape {1, 2} does not broadcast to the input (None, 3)")
  check.raises(function() nn.Dropout(0.5, {noise_shape = "x"}) end, "noise_shape must be a list of sizes")
end

return T
