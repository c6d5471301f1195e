-- Tests of what the train step does beyond the MLP case: non-trainable state (BatchNorm's moving
-- statistics) coming back from the step, weight regularizers in the loss, one compile per model.
local tpu = require "tpu"
local check = require "check"
local nn_check = require "nn_check"
local nn, data, optim = tpu.nn, tpu.data, tpu.optim
local rand = nn_check.rand

local T = {}

-- A copy that owns its buffer (fit donates the weights' buffers to the step).
local function copy(t) return tpu.tensor(t:totable()) end

-- Keras's transfer-learning recipe: base.trainable = false freezes every layer inside it, so
-- its BatchNorm normalizes with its moving statistics and keeps them (Sequential and functional).
function T.batchnorm_under_a_frozen_model_runs_in_inference_mode()
  for _, kind in ipairs {"sequential", "functional"} do
    local bn = nn.BatchNorm()
    local base
    if kind == "sequential" then
      base = nn.Sequential {nn.Input {shape = {2}}, bn}
    else
      local i = nn.Input {shape = {2}}
      base = nn.Model {inputs = i, outputs = bn(i)}
    end
    base.trainable = false
    local model = nn.Sequential {nn.Input {shape = {2}}, base, nn.Dense(1)}
    model:compile {optimizer = "sgd", loss = "mse"}
    local x = tpu.tensor {{1, 10}, {3, 30}}
    model:fit(x, tpu.ones {2, 1}, {batch_size = 2, verbose = 0})
    check.eq(bn.moving_mean:totable(), {0, 0}, kind)
    check.eq(bn.moving_variance:totable(), {1, 1}, kind)
    check.near(base(x, {training = true}):totable(), (x / math.sqrt(1.001)):totable(), 1e-5)
    base.trainable = true
    model:compile {optimizer = "sgd", loss = "mse"}  -- as in Keras, a change of trainable needs it
    model:fit(x, tpu.ones {2, 1}, {batch_size = 2, verbose = 0})
    check.is_true(bn.moving_mean:totable()[2] > 0, "trainable again, it moves")
  end
end

function T.fit_updates_moving_statistics()
  nn.set_seed(2)
  local dense, bn = nn.Dense(3), nn.BatchNorm {momentum = 0.5}
  local model = nn.Sequential {dense, bn}
  local x, y = rand({8, 4}, 1), rand({8, 3}, 2)
  model(x)
  local h, k0 = dense(x), copy(dense.kernel)
  local mean = h:mean(1)
  local var = (h - mean):square():mean(1)
  model:compile {optimizer = optim.SGD {lr = 0.1}, loss = "mse"}
  model:fit({x, y}, {batch_size = 8, epochs = 1, verbose = 0})
  check.near(bn.moving_mean:totable(), (mean * 0.5):totable(), 1e-5)
  check.near(bn.moving_variance:totable(), (var * 0.5 + 0.5):totable(), 1e-5)
  check.is_true((dense.kernel - k0):abs():sum():item() > 0, "the kernel moved too")
  model:fit({x, y}, {batch_size = 8, epochs = 2, verbose = 0})
  check.eq(model.compiled.steps.train:stats().compiles, 1)
end

function T.evaluate_uses_moving_statistics()
  local bn = nn.BatchNorm()
  local model = nn.Sequential {bn}
  local x = rand({4, 2}, 3, 5, 6)
  model:compile {optimizer = "sgd", loss = "mse"}
  local r = model:evaluate({x, x}, {verbose = 0})
  -- moving mean 0 and variance 1: the output is x / sqrt(1 + 1e-3)
  local expected = (x - x / math.sqrt(1 + 1e-3)):square():mean():item()
  check.near(r.loss, expected, 1e-5)
end

function T.l2_regularizer_adds_to_the_loss()
  nn.set_seed(4)
  local d = nn.Dense(2, {kernel_regularizer = nn.regularizers.l2(0.1), bias_regularizer = "l2"})
  local model = nn.Sequential {d}
  local x, y = rand({6, 3}, 5), rand({6, 2}, 6)
  model(x)
  d:set_parameters {d.kernel, tpu.tensor {1, -2}}
  model:compile {optimizer = "sgd", loss = "mse"}
  local r = model:evaluate({x, y}, {verbose = 0})
  local data_loss = tpu.losses.mse(y, model(x)):item()
  local penalty = 0.1 * d.kernel:square():sum():item() + 0.01 * 5
  check.near(r.loss, data_loss + penalty, 1e-5)
  check.near(model:regularization_loss():item(), penalty, 1e-6)
end

function T.l2_regularizer_gradient_shrinks_weights()
  -- no data gradient (zero inputs, zero bias, zero targets): the kernel decays by 1 - 2 lr f
  local d = nn.Dense(2, {kernel_regularizer = nn.regularizers.l2(0.5), use_bias = false})
  local model = nn.Sequential {d}
  local x, y = tpu.zeros({4, 3}), tpu.zeros({4, 2})
  model(x)
  local k0 = copy(d.kernel)
  model:compile {optimizer = optim.SGD {lr = 0.1}, loss = "mse"}
  model:fit({x, y}, {batch_size = 4, verbose = 0})
  check.near(d.kernel:totable(), (k0 * 0.9):totable(), 1e-6)
end

function T.regularizer_errors()
  check.raises(function() nn.Dense(2, {kernel_regularizer = "l3"}) end,
    'unknown regularizer "l3" (expected nn.regularizers.l2(factor), a function(w) or one of: l1, l2, l1_l2)')
  check.raises(function() nn.regularizers.l2(-1) end, "regularizers.l2: the factor must be a non-negative number, got -1")
  check.eq(tostring(nn.regularizers.l1_l2 {l1 = 0.1, l2 = 0.2}), "l1_l2(0.1, 0.2)")
  check.near(nn.regularizers.l1(0.5)(tpu.tensor {-1, 2}):item(), 1.5, 1e-6)
end

function T.custom_layer_with_state_and_regularizer()
  -- a layer that counts the examples it saw in training, in a non-trainable weight (fit pads
  -- the partial last batch: ctx.sample_weight is 1 for a real example, 0 for a padding row)
  local Counter = nn.Module:extend("Counter")
  function Counter:build(input_shape)
    self:add_weight {name = "seen", shape = {}, initializer = "zeros", trainable = false}
    self:add_weight {name = "scale", shape = {input_shape[2]}, initializer = "ones",
                     regularizer = nn.regularizers.l2(0.01)}
  end
  function Counter:call(x, ctx)
    if ctx.training then self:update_state(ctx, "seen", self.seen + ctx.sample_weight:sum()) end
    return x * self.scale
  end
  local c = Counter()
  local model = nn.Sequential {c, nn.Dense(1)}
  model:compile {optimizer = "sgd", loss = "mse"}
  model:fit(data.from_tensors {rand({10, 2}), rand({10, 1})}:batch(4), {epochs = 2, verbose = 0})
  check.eq(c.seen:item(), 20)
  check.eq(#model:_trainable_indices(), 3)
  check.raises(function() c:update_state({updates = {}}, "nope", tpu.zeros({})) end,
    "Counter 'counter_%d+': update_state of unknown weight 'nope'")
end

function T.compile_stats_reports_each_compiled_step()
  nn.set_seed(3)
  local model = nn.Sequential {nn.Dense(4, {activation = "relu"}), nn.Dense(2)}
  local x, y = rand({8, 3}, 1), rand({8, 2}, 2)
  check.eq(model:compile_stats(), {}, "nothing compiled yet")
  model:compile {optimizer = optim.Adam {lr = 0.01}, loss = "mse"}
  model:fit({x, y}, {batch_size = 4, epochs = 2, verbose = 0})
  local train = model:compile_stats().train
  check.eq({train.compiles, train.cache_hits, train.executions}, {1, 3, 4})
  check.is_true(train.compile_ms > 0 and train.run_ms > 0 and train.kernels > 0 and train.flops > 0)
  local f = model.compiled.steps.train
  check.eq(train.hbm_bytes, f.last.exe:info().hbm_bytes)
  check.is_true(train.hbm_bytes >= train.planned_bytes and train.planned_bytes > 0)
  check.eq(model:compile_stats().evaluate, nil)
  model:evaluate({x, y}, {batch_size = 8, verbose = 0})
  model:predict(x)
  local stats = model:compile_stats()
  check.eq({stats.evaluate.compiles, stats.predict.compiles}, {1, 1})
  check.raises(function() model:compile_stats({}) end, "compile_stats")
end

-- A model only a forward pass can build (a custom container: its child's input size comes from
-- running it) is built on one example, not on the whole batch or data set.
function T.a_model_is_built_by_a_forward_pass_over_one_example()
  local rows = {}
  local Wrap = nn.Module:extend("Wrap")
  function Wrap:__init(opts)
    self:init_common(opts or {})
    self.inner = nn.Dense(3)
    self.modules = {self.inner}
  end
  function Wrap:call(x, ctx)
    if not tpu.is_traced(x) then rows[#rows + 1] = x.shape[1] end
    return self.inner(x, ctx)
  end
  local model = Wrap {}
  model:compile {optimizer = optim.SGD {learning_rate = 0.1}, loss = "mse"}
  model:fit({rand({16, 4}), rand({16, 3})}, {epochs = 1, batch_size = 8, verbose = 0})
  check.eq(rows, {1})
  check.eq(model.inner.kernel.shape, {4, 3})
  check.eq(Wrap {}:predict(rand({10, 4})).shape, {10, 3})
end

-- get_weights and set_weights copy, as Keras's: what get_weights gave and a list given to
-- set_weights stay valid after fit; parameters() are the live weights, which fit donates, and
-- using one kept across fit says how to keep them.
function T.weights_taken_before_fit_stay_valid()
  nn.set_seed(2)
  local x = rand({8, 3}, 1)
  local y = x:sum(2, true)
  local model = nn.Sequential {nn.Dense(1)}
  model:compile {optimizer = optim.SGD {lr = 0.1}, loss = "mse"}
  model(x)
  local snap, kept = model:parameters(), model:get_weights()
  local before = snap[1]:totable()
  local first = model:fit(x, y, {verbose = 0}).history.loss[1]
  check.raises(function() return snap[1]:totable() end, "model:get_weights() copies a model's weights")
  check.eq(kept[1]:totable(), before)
  check.is_true(model:parameters()[1]:totable()[1][1] ~= before[1][1], "fit changed the weights")
  model:set_weights(kept)
  check.eq(model:fit(x, y, {verbose = 0}).history.loss[1], first)
  check.eq(kept[1]:totable(), before)
  check.raises(function() model:set_weights {kept[1]} end,
    "set_weights: expected a list of 2 tensors (model:get_weights() order)")
  check.raises(function() model:set_weights {kept[2], kept[1]} end, "set_weights: weight 1 is f32[3,1], got a tensor f32[1]")
end

-- Keras's fit shuffles tensors each epoch by default, from the model's seed and the epoch: the
-- same run twice is the same, fit{epochs = 1} then fit{initial_epoch = 1, epochs = 3} equals
-- fit{epochs = 3} bitwise, shuffle = false keeps the order, and a data set is left to itself.
function T.fit_shuffles_tensors_each_epoch()
  local x = rand({20, 3}, 1)
  local y = x:sum(2, true) * x:slice {{1, 20}, {1, 1}}
  local function model()
    nn.set_seed(1)
    local m = nn.Sequential {nn.Dense(4, {activation = "tanh"}), nn.Dropout(0.3), nn.Dense(1)}
    m:compile {optimizer = optim.Adam {lr = 0.05}, loss = "mse"}
    return m
  end
  local function weights(m)
    local out = {}
    for i, p in ipairs(m:parameters()) do out[i] = p:totable() end
    return out
  end
  local function run(opts, first)
    local m = model()
    if first then m:fit(x, y, first) end
    local h = m:fit(x, y, opts)
    return h.history.loss, weights(m)
  end
  local base = {epochs = 3, batch_size = 4, verbose = 0}
  local l1, w1 = run(base)
  local l2, w2 = run(base)
  check.eq({l1, w1}, {l2, w2})
  local l3, w3 = run({initial_epoch = 1, epochs = 3, batch_size = 4, verbose = 0},
                     {epochs = 1, batch_size = 4, verbose = 0})
  check.eq(l3[#l3], l1[3])
  check.eq(w3, w1)
  local l4, w4 = run {epochs = 3, batch_size = 4, verbose = 0, shuffle = false}
  check.is_true(l4[3] ~= l1[3], "shuffle = false trains in another order")
  local rows = tpu.arange(20):cast("f32"):reshape {20, 1}
  local probe = nn.Sequential {nn.Dense(1)}
  probe:compile {optimizer = "sgd", loss = "mse"}
  -- ignored for a data set: shuffle = true trains as shuffle = false (batches of 5 rows in order)
  local function trained(shuffle)
    nn.set_seed(4)
    local m = nn.Sequential {nn.Dense(1)}
    m:compile {optimizer = "sgd", loss = "mse"}
    m:fit(tpu.data.from_tensors {rows, rows}:batch(5), {epochs = 1, verbose = 0, shuffle = shuffle})
    return m:parameters()[1]:totable()
  end
  check.eq(trained(true), trained(false))
  -- tensors: each fit call takes a new order (the same call on the same start trains alike)
  local function two_calls()
    nn.set_seed(4)
    local m = nn.Sequential {nn.Dense(1)}
    m:compile {optimizer = "sgd", loss = "mse"}
    local first = m:fit(rows, rows, {epochs = 1, batch_size = 5, verbose = 0}).history.loss[1]
    local second = m:fit(rows, rows, {epochs = 1, batch_size = 5, verbose = 0}).history.loss[1]
    return first, second
  end
  local a1, a2 = two_calls()
  local b1, b2 = two_calls()
  check.eq({a1, a2}, {b1, b2})
  -- the second call's epoch is the uninterrupted run's second epoch
  nn.set_seed(4)
  local straight = nn.Sequential {nn.Dense(1)}
  straight:compile {optimizer = "sgd", loss = "mse"}
  local l = straight:fit(rows, rows, {epochs = 2, batch_size = 5, verbose = 0}).history.loss
  check.eq(l[2], a2)
  check.raises(function() probe:fit(rows, rows, {verbose = 0, shuffle = "batch"}) end,
    "fit: shuffle must be true or false, got \"batch\"")
end

return T
