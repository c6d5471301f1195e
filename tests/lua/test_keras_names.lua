-- DESIGN section 3: "Keras names work too (a Keras user's first try must not fail)". Each name
-- means the same as ours; giving both is an error.
local tpu = require "tpu"
local check = require "check"
local data_util = require "data_util"
local nn, optim, callbacks = tpu.nn, tpu.optim, tpu.callbacks

local T = {}

function T.optimizer_names()
  local a = optim.Adam {learning_rate = 0.01, beta_1 = 0.8, beta_2 = 0.99}
  check.eq({a.lr, a.beta1, a.beta2}, {0.01, 0.8, 0.99})
  check.eq(optim.SGD {learning_rate = 0.5}.lr, 0.5)
  check.eq(optim.AdamW {learning_rate = 0.5, beta_1 = 0.7}.beta1, 0.7)
  check.eq(optim.RMSprop {learning_rate = 0.5}.lr, 0.5)
  check.raises(function() optim.Adam {lr = 0.1, learning_rate = 0.2} end,
    "test_keras_names.lua:%d+: Adam: give lr or its Keras name learning_rate, not both")
  check.raises(function() optim.SGD {beta_1 = 0.9} end, "SGD: unknown option 'beta_1'")
end

function T.schedule_names()
  local schedule = optim.schedule
  check.eq(schedule.cosine {learning_rate = 0.5, decay_steps = 10}:value(0), 0.5)
  check.eq(schedule.exponential {initial_learning_rate = 0.5, decay_steps = 1, decay_rate = 0.5}:value(1), 0.25)
  check.eq(schedule.warmup {learning_rate = 2, warmup_steps = 2}:value(2), 2)
  check.raises(function() schedule.cosine {lr = 1, learning_rate = 2, decay_steps = 10} end,
    "schedule.cosine: give lr or its Keras name learning_rate, not both")
  check.raises(function() schedule.cosine {learning_rate = 1, initial_learning_rate = 2, decay_steps = 10} end,
    "schedule.cosine: give learning_rate or initial_learning_rate, not both")
end

function T.callback_names()
  local dir = data_util.temp_dir()
  check.eq(callbacks.early_stopping {restore_best_weights = true}.restore_best, true)
  check.eq(callbacks.checkpoint {filepath = dir .. "/c.safetensors"}.path, dir .. "/c.safetensors")
  local log = callbacks.csv_logger(dir .. "/log.csv", {separator = ";"})
  check.eq({log.path, log.separator}, {dir .. "/log.csv", ";"})
  check.eq(callbacks.lr_scheduler {schedule = function(_, lr) return lr end}.fn ~= nil, true)
  check.raises(function() callbacks.checkpoint {path = "a", filepath = "b"} end,
    "checkpoint: give path or its Keras name filepath, not both")
  check.raises(function() callbacks.csv_logger(dir .. "/log.csv", {path = "x"}) end, "csv_logger: unknown option 'path'")
  data_util.remove(dir)
end

function T.fit_and_evaluate_take_x_and_y()
  local x = tpu.tensor {{1, 0}, {0, 1}, {1, 1}, {0, 0}}
  local y = tpu.tensor {{1}, {0}, {1}, {0}}
  local model = nn.Sequential {nn.Dense(1)}
  model:compile {optimizer = "sgd", loss = "mse"}
  local h = model:fit(x, y, {epochs = 2, batch_size = 2, verbose = 0})
  check.eq(#h.history.loss, 2)
  local pair = model:evaluate({x, y}, {verbose = 0}).loss
  check.near(model:evaluate(x, y, {verbose = 0}).loss, pair, 0)
  check.eq(model.layers[1], model.modules[1])
  check.eq(#model.layers, 1)
  -- validation_split: the last rows validate, as Keras takes them
  local hv = model:fit(x, y, {epochs = 1, batch_size = 2, verbose = 0, validation_split = 0.5})
  local after = model:evaluate(x:slice {{3, 4}}, y:slice {{3, 4}}, {verbose = 0}).loss
  check.near(hv.history.val_loss[1], after, 1e-6)
  check.raises(function() model:fit(x, y, {verbose = 0, validation_split = 1}) end,
    "fit: validation_split must be a number in (0, 1), got 1")
  check.raises(function() model:fit(x, y, {verbose = 0, validation_split = 0.5, validation_data = {x, y}}) end,
    "fit: give validation_split or validation_data, not both")
  check.raises(function() model:fit({x, y}, {verbose = 0}, 3) end,
    "test_keras_names.lua:%d+: bad argument #3 to 'fit' %(no value expected, got number%)")
end

-- initial_epoch: fit{epochs = 1} then fit{initial_epoch = 1, epochs = 3} trains the same numbers as
-- fit{epochs = 3}: the data set's shuffles start at the pass initial_epoch names.
function T.initial_epoch_continues_a_run()
  local x = tpu.random.normal(tpu.random.key(3), {16, 3})
  local y = x:sum {axis = 2, keepdims = true}:gt(0):cast("f32")
  local function run(parts)
    tpu.nn.initializers.set_seed(1)
    local model = nn.Sequential {nn.Dense(4, {activation = "relu"}), nn.Dense(1)}
    model:compile {optimizer = optim.Adam {learning_rate = 0.05}, loss = "mse"}
    local losses = {}
    for _, p in ipairs(parts) do  -- a new data set each call, as a script run again would make
      local ds = tpu.data.from_tensors {x, y}:shuffle(16, {seed = 7}):batch(4)
      local h = model:fit(ds, {epochs = p[2], initial_epoch = p[1], verbose = 0})
      for _, l in ipairs(h.history.loss) do losses[#losses + 1] = l end
      check.eq(h.epoch[1], p[1] + 1)
    end
    return losses
  end
  local whole, split = run {{0, 3}}, run {{0, 1}, {1, 3}}
  check.eq(#split, 3)
  for i = 1, 3 do check.near(split[i], whole[i], 0) end
  local model = nn.Sequential {nn.Dense(1)}
  model:compile {optimizer = "sgd", loss = "mse"}
  check.raises(function() model:fit(x, y, {epochs = 2, initial_epoch = 2, verbose = 0}) end,
    "test_keras_names.lua:%d+: fit: initial_epoch = 2 leaves nothing to train with epochs = 2 "
    .. "%(epochs is the number of the last epoch, as in Keras: fit{initial_epoch = 2, epochs = 3}%)")
  check.raises(function() model:fit(x, y, {initial_epoch = -1, verbose = 0}) end,
    "fit: initial_epoch must be a non%-negative integer, got %-1")
end

-- Keras's Sequential([Input(shape), ...]) and model.add(Input(...)): built at once, and layers
-- added later are built too.
function T.sequential_starts_with_an_input()
  local m = nn.Sequential {nn.Input {shape = {4}}, nn.Dense(3)}
  check.eq({m:count_params()}, {15, 15, 0})
  m:add(nn.Dense(2))
  check.eq({m:count_params()}, {23, 23, 0})
  check.eq(m.output_shape, {-1, 2})
  local m2 = nn.Sequential {}
  m2:add(nn.Input {shape = {5}})
  m2:add(nn.Dense(1))
  check.eq(m2:count_params(), 6)
  m2:compile {optimizer = "sgd", loss = "mse"}
  check.eq(#m2:fit(tpu.ones {4, 5}, tpu.ones {4, 1}, {verbose = 0}).history.loss, 1)
  check.raises(function() nn.Sequential {nn.Dense(2), nn.Input {shape = {3}}} end,
    "test_keras_names.lua:%d+: Sequential: layer 2 is an nn.Input; an Input can only come first")
end

function T.add_weight_names_an_unnamed_weight_as_keras_does()
  local Scale = nn.Module:extend("Scale")
  function Scale:build(shape)
    self.a = self:add_weight {shape = {shape[#shape]}, initializer = "ones"}
    self.b = self:add_weight {shape = {1}, initializer = "zeros", trainable = false}
    self.c = self:add_weight {name = "variable_2", shape = {1}, initializer = "ones"}
    self.d = self:add_weight {shape = {1}, initializer = "ones"}
  end
  function Scale:call(x) return x * self.a + self.b end
  local layer = Scale()
  local y = layer(tpu.tensor {{1, 2, 3}})
  check.eq(y:totable(), {{1, 2, 3}})
  local names = {}
  for _, e in ipairs(layer:named_parameters()) do names[#names + 1] = e.name end
  check.eq(names, {"variable", "variable_1", "variable_2", "variable_3"})
  check.is_true(layer.variable == layer.a and layer.variable_3 == layer.d)
  check.raises(function() Scale.add_weight(layer, {shape = {1}, name = 3}) end,
    "add_weight needs {shape = <table>, name = <string>, ...}")
end

function T.a_typo_in_a_name_gets_a_suggestion()
  local m = nn.Sequential {nn.Dense(1)}
  m:compile {optimizer = "sgd", loss = "mse"}
  local x, y = tpu.ones {4, 2}, tpu.ones {4, 1}
  check.raises(function() m:fit(x, y, {epoch = 2}) end, "fit: unknown option 'epoch'; did you mean 'epochs'%? %(known")
  check.raises(function() nn.Dense(3, {activation = "rleu"}) end, "unknown activation \"rleu\"; did you mean 'relu'%?")
  check.raises(function() tpu.losses.get("Sparse_Categorical_Cross_Entropy") end,
    "did you mean 'sparse_categorical_crossentropy'%?")
  check.raises(function() tpu.optim.get("adma") end, "did you mean 'adam'%?")
  check.raises(function() tpu.metrics.get("acuracy") end, "did you mean 'accuracy'%?")
  check.raises(function() callbacks.early_stopping {patiance = 2} end, "did you mean 'patience'%?")
  check.raises(function() tpu.data.range(4):batch(2, {drop_reminder = true}) end, "did you mean 'drop_remainder'%?")
  check.raises(function() nn.Dense(3, {kernel_initializer = "glorot_unifrom"}) end, "did you mean 'glorot_uniform'%?")
  check.raises(function() x:sum {axes = 2} end, "sum: unknown option 'axes'; did you mean 'axis'%?")
  -- Nothing close, or two names as close: no suggestion.
  local ok, err = pcall(nn.Dense, 3, {activation = "foo"})
  check.is_true(not ok and not err:find("did you mean"), err)
  ok, err = pcall(tpu.losses.get, "zzz")
  check.is_true(not ok and not err:find("did you mean"), err)
end

function T.a_method_called_with_a_dot_or_without_targets_shows_the_call()
  local m = nn.Sequential {nn.Dense(1)}
  m:compile {optimizer = "sgd", loss = "mse"}
  local x, y = tpu.ones {4, 2}, tpu.ones {4, 1}
  check.raises(function() m.fit(x, y) end,
    "fit is a method of the model: call it with a colon, model:fit(x, y, {epochs = ...}) or model:fit(dataset, {...})")
  check.raises(function() m.evaluate(x, y) end, "evaluate is a method of the model: call it with a colon")
  check.raises(function() m.predict(x) end, "predict is a method of the model: call it with a colon, model:predict(x)")
  check.raises(function() m.compile {optimizer = "sgd", loss = "mse"} end, "compile is a method of the model")
  check.raises(function() m:fit(x, {epochs = 1}) end,
    "fit: a tensor f32[4,2] needs the targets too: model:fit(x, y, {epochs = ...})")
  check.raises(function() m:evaluate(x) end, "evaluate: a tensor f32[4,2] needs the targets too: model:evaluate(x, y)")
end

-- Only methods (a first parameter named self) are checked for a dot call: plain functions
-- stored on a layer class, static constructors and methods copied from another class work.
function T.plain_functions_on_a_layer_class_are_not_checked_as_methods()
  local MyAct = nn.Module:extend("MyAct")
  MyAct.activation = function(v) return v:relu() end
  function MyAct:call(v) return self.activation(v) end
  check.eq(MyAct()(tpu.tensor {-1, 2}):totable(), {0, 2})
  local MyModel = nn.Module:extend("MyModel")
  function MyModel.create(cfg) local m = MyModel(); m.units = cfg.units; return m end
  function MyModel:call(v) return v * self.units end
  check.eq(MyModel.create({units = 3})(tpu.tensor {1, 2}):totable(), {3, 6})
  local Other = nn.Module:extend("Other")
  function Other:scale(v) return v * 2 end
  local o = Other()
  o.double = MyAct.activation  -- a field of an instance: never wrapped
  check.eq(o:scale(tpu.tensor {1}):totable(), {2})
  MyModel.scale = Other.scale  -- a method copied onto another class stays a checked method
  check.eq(MyModel.create({units = 1}):scale(tpu.tensor {2}):totable(), {4})
  check.raises(function() MyModel.scale(tpu.tensor {2}) end, "scale is a method of")
  check.raises(function() local d = nn.Dense(1); d.generate({1}) end, "generate is a method of the model")
  check.raises(function() MyAct.call(tpu.tensor {1}) end, "call is a method of")
end

-- Keras 3's class names are our classes; a name the module lacks is an error listing its names.
-- Keras's loss classes for the losses that exist as functions.
function T.loss_classes()
  local y, p = tpu.tensor {{0.2, 0.8}, {0.5, 0.5}}, tpu.tensor {{0.4, 0.6}, {0.9, 0.1}}
  check.eq(tpu.losses.MeanAbsoluteError()(y, p):item(), tpu.losses.mae(y, p):item())
  check.eq(tpu.losses.KLDivergence()(y, p):item(), tpu.losses.kl_divergence(y, p):item())
  check.eq(tostring(tpu.losses.KLDivergence()), "KLDivergence{}")
  check.raises(function() tpu.losses.MeanAbsoluteError {delta = 1} end, "MeanAbsoluteError: unknown option 'delta'")
  local model = nn.Sequential {nn.Dense(1)}
  model:compile {optimizer = "sgd", loss = tpu.losses.MeanAbsoluteError()}
  local x = tpu.ones {4, 2}
  check.is_true(model:fit(x, x:sum(2, true), {epochs = 1, verbose = 0}).history.loss[1] > 0)
end

function T.keras_class_names()
  check.is_true(nn.BatchNormalization == nn.BatchNorm and nn.LayerNormalization == nn.LayerNorm)
  check.is_true(nn.MaxPooling2D == nn.MaxPool2D and nn.AveragePooling2D == nn.AvgPool2D)
  check.is_true(nn.Convolution2D == nn.Conv2D and nn.Convolution1D == nn.Conv1D and nn.Layer == nn.Module)
  check.is_true(nn.Convolution2DTranspose == nn.Conv2DTranspose and nn.SeparableConvolution2D == nn.SeparableConv2D)
  check.raises(function() return nn.BatchNormalisation() end,
    "test_keras_names.lua:%d+: tpu.nn has no BatchNormalisation; did you mean 'BatchNormalization'%? %(its layers and models: Activation, .*Dense,")
  check.is_true(callbacks.ModelCheckpoint == callbacks.Checkpoint and callbacks.CSVLogger == callbacks.CsvLogger)
  check.raises(function() return callbacks.ModelChekpoint end,
    "tpu.callbacks has no ModelChekpoint; did you mean 'ModelCheckpoint'%? %(it has CSVLogger, ")
  -- every namespace refuses a name it lacks the same way, naming the caller's line
  for _, case in ipairs {
    {function() return optim.Nadam {} end, "tpu.optim has no Nadam; did you mean 'Adam'%? %(it has Adam, AdamW, "},
    {function() return optim.schedule.CosineDecay {} end, "tpu.optim.schedule has no CosineDecay %(it has cosine, "},
    {function() return tpu.losses.MeanSquaredLogarithmicError() end, "tpu.losses has no MeanSquaredLogarithmicError"},
    {function() return tpu.metrics.AUC() end, "tpu.metrics has no AUC %(it has "},
    {function() return tpu.data.from_tensor end, "tpu.data has no from_tensor; did you mean 'from_tensors'%?"},
    {function() return tpu.random.normall end, "tpu.random has no normall; did you mean 'normal'%?"},
    {function() return nn.initializers.GlorotUniform end, "tpu.nn.initializers has no GlorotUniform"},
    {function() return tpu.zeroes {2} end, "tpu has no zeroes; did you mean 'zeros'%? %(its libraries: applications, "},
    {function() return tpu.plott end, "tpu has no plott; did you mean 'plot'%?"},
  } do
    check.raises(case[1], "test_keras_names.lua:%d+: " .. case[2])
  end
  check.eq(rawget(optim, "Nadam"), nil)
  check.eq(tpu._no_such_hook, nil, "the host probes tpu's names starting with _")
  -- integer keys are not names: ipairs and tpu.nn[1] find nothing, without an error
  check.eq(nn[1], nil)
  check.eq(callbacks[1], nil)
  for _ in ipairs(callbacks) do error("callbacks has no list part") end
  local dir = data_util.temp_dir()
  local ckpt = callbacks.ModelCheckpoint(dir .. "/w.safetensors", {save_weights_only = true, monitor = "loss"})
  check.eq({ckpt.path, ckpt.weights_only, ckpt.monitor}, {dir .. "/w.safetensors", true, "loss"})
  check.raises(function() callbacks.ModelCheckpoint("a", {filepath = "b"}) end, "checkpoint: the path is given twice")
  local epochs = {}
  local sched = callbacks.LearningRateScheduler(function(epoch, lr) epochs[#epochs + 1] = epoch; return lr end)
  local model = nn.Sequential {nn.Dense(1)}
  model:compile {optimizer = "sgd", loss = "mse", metrics = {"mean_squared_error", "mae"}}
  local h = model:fit(tpu.ones {4, 2}, tpu.ones {4, 1}, {epochs = 2, verbose = 0, callbacks = {sched}})
  check.eq(epochs, {0, 1})  -- Keras counts the schedule's epochs from 0
  check.near(h.history.mean_squared_error[2], h.history.loss[2], 1e-5)
  check.eq(#h.history.mae, 2)
  check.eq(callbacks.LearningRateScheduler {schedule = function(_, lr) return lr end, verbose = 1}.verbose, 1)
  data_util.remove(dir)
end

function T.keras_metric_names()
  local metrics = tpu.metrics
  local yt, yp = tpu.tensor {{1}, {2}}, tpu.tensor {{0.5}, {3}}
  check.near(metrics.mae(yt, yp):item(), 0.75, 1e-6)
  check.near(metrics.mean_absolute_error(yt, yp):item(), 0.75, 1e-6)
  check.near(metrics.mean_squared_error(yt, yp):item(), 0.625, 1e-6)
  check.eq(metrics.get("mean_squared_error").name, "mean_squared_error")
  local ids = tpu.tensor({1, 0}, {dtype = "i32"})
  check.near(metrics.sparse_categorical_accuracy(ids, tpu.tensor {{0.1, 0.9}, {0.2, 0.8}}):item(), 0.5, 1e-6)
  check.raises(function() metrics.sparse_categorical_accuracy(ids, tpu.ones {3, 2}) end,
    "sparse_categorical_accuracy: labels i32%[2%] do not match predictions f32%[3,2%]")
end

return T
