-- fit on `batch(n, {drop_remainder = true}):map(f):prefetch(2):cycle()` over tensors applies f
-- inside its train step (tpu.data.fusing): the step takes the raw (u8) batches, and the losses
-- and metrics are those of the map run on its own.
local tpu = require "tpu"
local check = require "check"
local nn, data = tpu.nn, tpu.data

local T = {}

local k1, k2 = table.unpack(tpu.random.key(3):split(2))
local X = (tpu.random.uniform(k1, {600, 20}) * 256):cast("u8")
local Y = (tpu.random.uniform(k2, {600}) * 3):cast("i32")

local function convert(a, b) return a:cast("f32") / 255, b end

local function model()
  nn.set_seed(5)
  local m = nn.Sequential {nn.Dense(16, {activation = "relu"}), nn.Dense(3)}
  m:compile {optimizer = tpu.optim.Adam {lr = 1e-2}, loss = "sparse_categorical_crossentropy",
             metrics = {"accuracy"}}
  return m
end

local function batched(opts)
  return data.from_tensors {X, Y}:shuffle(600, {seed = 1}):batch(64, opts or {drop_remainder = true})
end

-- Trains on ds; the history and the train step fit ran last.
local function train(ds, epochs)
  local m = model()
  local h = m:fit(ds, {epochs = epochs or 3, steps_per_epoch = 7, verbose = 0})
  return h.history, m.compiled.steps.train, m
end

local function takes_u8(step) return step.last.exe:text():find("u8", 1, true) ~= nil end

function T.the_train_step_applies_the_map_to_raw_batches()
  local fused, step = train(batched():map(convert):prefetch(2):cycle())
  check.eq(step:stats().compiles, 1)
  check.is_true(takes_u8(step), "the train step takes the u8 batches")
  -- The same map run by the data set: on the caller's thread (no prefetch), and as a host map.
  local plain, plain_step = train(batched():map(convert):cycle())
  check.is_true(not takes_u8(plain_step), "without prefetch the data set maps")
  local host = train(batched():map(convert, {host = true}):prefetch(2):cycle())
  for _, other in ipairs {plain, host} do
    check.eq(fused.loss, other.loss)
    check.eq(fused.accuracy, other.accuracy)
  end
end

function T.two_maps_and_a_data_set_that_ends()
  local ds = batched():map(function(a, b) return a:cast("f32"), b end)
    :map(function(a, b) return a / 255, b end):prefetch(2)
  local fused, step = train(ds, 2)
  check.is_true(takes_u8(step))
  local plain = train(batched():map(convert), 2)
  check.eq(fused.loss, plain.loss)
end

function T.a_map_with_a_key_or_a_partial_batch_is_not_fused()
  local keyed = batched():map(function(a, b, _key) return a:cast("f32") / 255, b end, {seed = 1})
  local _, step = train(keyed:prefetch(2):cycle(5))
  check.is_true(not takes_u8(step), "a keyed map runs in the data set")
  local _, step2 = train(batched({}):map(convert):prefetch(2):cycle())
  check.is_true(not takes_u8(step2), "batches that may be partial are not fused")
end

function T.validation_and_evaluate_map_as_before()
  local ds = batched():map(convert):prefetch(2)
  local test = data.from_tensors {X, Y}:batch(64, {drop_remainder = true}):map(convert):prefetch(2)
  local m = model()
  local h = m:fit(ds, {epochs = 1, validation_data = test, verbose = 0})
  check.is_true(takes_u8(m.compiled.steps.train))
  check.eq(h.history.val_loss[1], m:evaluate(test, {verbose = 0}).loss)
  -- The model trained on the fused data set evaluates like one trained on the plain one.
  local m2 = model()
  m2:fit(batched():map(convert), {epochs = 1, verbose = 0})
  check.eq(m:evaluate(test, {verbose = 0}).loss, m2:evaluate(test, {verbose = 0}).loss)
  check.eq(#m:predict(test), 576)
end

-- One model fitted on a fused data set, then on plain batches, then fused again: each fit runs
-- the step made for its data (the plain fit once took the fused step, which maps its input).
function T.a_model_fits_fused_then_plain_then_fused()
  local m = model()
  local ds = batched():map(convert):prefetch(2)
  m:fit(ds, {epochs = 1, verbose = 0})
  check.is_true(takes_u8(m.compiled.steps.train))
  m:fit(X:cast("f32") / 255, Y, {epochs = 1, batch_size = 64, verbose = 0})
  check.is_true(not takes_u8(m.compiled.steps.train), "plain batches take the plain step")
  m:fit(ds, {epochs = 1, verbose = 0})
  check.is_true(takes_u8(m.compiled.steps.train))
  check.eq(m.compiled.steps.train:stats().compiles, 1)
end

function T.errors_in_a_fused_map_name_the_users_line()
  local line = debug.getinfo(1, "l").currentline + 1
  local ds = batched():map(function(a, b) return a:cast("f32"):matmul(tpu.ones {3, 3}), b end)
  check.raises(function() train(ds:prefetch(2):cycle()) end, "test_fit_fused_maps.lua:" .. line)
end

return T
