-- Tests of tpu.callbacks: the hooks are called directly (as fit calls them), plus a few runs
-- through model:fit.
local tpu = require "tpu"
local check = require "check"
local cb = require "tpu.callbacks"
local ckpt = require "tpu.checkpoint"
require "tpu.nn.persistence"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data

local T = {}

local files = require "files"
local tmpdir, read = files.tmpdir, files.must_read

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- A small built, compiled model.
local function model(lr)
  nn.set_seed(1)
  local m = nn.Sequential {nn.Dense(4), nn.Dense(2)}
  m(tpu.zeros {1, 3})
  m:compile {optimizer = optim.Adam {lr = lr or 0.1}, loss = "sparse_categorical_crossentropy"}
  return m
end

local function run_epochs(c, m, values, monitor)
  c:set_model(m)
  c:on_train_begin({})
  for epoch, v in ipairs(values) do
    c:on_epoch_begin(epoch, {})
    c:on_epoch_end(epoch, {[monitor or "val_loss"] = v, loss = v})
    if m.stop_training then return epoch end
  end
  c:on_train_end({})
end

local function capture_warnings(fn)
  local seen, old = {}, tpu.warn
  tpu.warn = function(msg) seen[#seen + 1] = msg end
  local ok, err = pcall(fn)
  tpu.warn = old
  if not ok then error(err, 0) end
  return seen
end

---------------------------------------------------------------- base class

function T.base_hooks_do_nothing_and_subclasses_override_them()
  local c = cb.Callback()
  for _, hook in ipairs {"on_train_begin", "on_train_end"} do check.eq(c[hook](c, {}), nil) end
  for _, hook in ipairs {"on_epoch_begin", "on_epoch_end", "on_batch_end", "on_train_batch_end"} do
    check.eq(c[hook](c, 1, {}), nil)
  end
  local Counter = cb.Callback:extend("Counter")
  function Counter:on_batch_end(batch, logs) self.last = {batch, logs.loss} end
  local k = Counter()
  k:on_train_batch_end(3, {loss = 0.5})  -- the long name reaches on_batch_end
  check.eq(k.last, {3, 0.5})
  check.is_true(cb.Callback.is_instance(cb.early_stopping()))
  check.eq(tostring(cb.csv_logger {path = "x.csv"}), "callbacks.CsvLogger")
end

function T.plain_table_hooks_run_under_either_batch_name()
  local m = model()
  local x, y = tpu.ones {8, 3}, tpu.zeros({8}, {dtype = "i32"})
  local short, long = {batches = {}}, {batches = {}}
  function short:on_batch_end(batch, logs) self.batches[#self.batches + 1] = {batch, logs.loss ~= nil} end
  function long:on_train_batch_end(batch) self.batches[#self.batches + 1] = batch end
  m:fit(data.from_tensors {x, y}:batch(4), {epochs = 1, verbose = 0, callbacks = {short, long}})
  check.eq(short.batches, {{1, true}, {2, true}})
  check.eq(long.batches, {1, 2})
  check.is_true(short.model == m, "a plain table gets the model field")
end

---------------------------------------------------------------- early_stopping

function T.early_stopping_waits_patience_epochs()
  local m = model()
  check.eq(run_epochs(cb.early_stopping {patience = 2}, m, {1.0, 0.8, 0.9, 0.85, 0.7}), 4)
  m.stop_training = false
  check.eq(run_epochs(cb.early_stopping {}, m, {1.0, 0.8, 0.9}), 3, "patience 0 stops at once")
  m.stop_training = false
  check.eq(run_epochs(cb.early_stopping {patience = 1, min_delta = 0.1}, m, {1.0, 0.95, 0.5}), 2)
  m.stop_training = false
  check.eq(run_epochs(cb.early_stopping {monitor = "val_accuracy", patience = 1}, m, {0.5, 0.6, 0.7, 0.65}, "val_accuracy"), 4,
    "accuracies must grow")
  m.stop_training = false
  check.eq(run_epochs(cb.early_stopping {monitor = "val_accuracy", mode = "min", patience = 0}, m, {0.5, 0.6}, "val_accuracy"), 2)
end

function T.early_stopping_restores_the_best_weights()
  local m = model()
  local es = cb.early_stopping {monitor = "val_loss", patience = 1, restore_best = true}
  es:set_model(m)
  es:on_train_begin({})
  local snapshots = {}
  for epoch, v in ipairs {0.9, 0.5, 0.7, 0.8} do
    -- a "training step": new weights every epoch
    local new = {}
    for i, p in ipairs(m:parameters()) do new[i] = p + epoch end
    m:set_parameters(new)
    snapshots[epoch] = m:parameters()[1]:totable()
    es:on_epoch_end(epoch, {val_loss = v})
    if m.stop_training then break end
  end
  check.eq(es.stopped_epoch, 3)
  es:on_train_end({})
  check.eq(m:parameters()[1]:totable(), snapshots[2])
  check.eq(es.best, 0.5)
end

function T.early_stopping_warns_once_about_a_missing_quantity()
  local m = model()
  local warnings = capture_warnings(function() run_epochs(cb.early_stopping {}, m, {1, 2, 3}, "loss") end)
  check.eq(#warnings, 1)
  check.is_true(warnings[1]:find("early_stopping: 'val_loss' is not in the epoch's logs (available: loss", 1, true) ~= nil, warnings[1])
  check.is_true(warnings[1]:find("need validation_data", 1, true) ~= nil)
  check.is_true(not m.stop_training)
end

-- A NaN monitored value is no improvement, not a missing quantity (it warned "not in the
-- epoch's logs" and never stopped).
function T.a_nan_monitored_value_never_improves()
  local m = model()
  local stop = cb.early_stopping {patience = 2}
  local warnings = capture_warnings(function() check.eq(run_epochs(stop, m, {1.0, 0 / 0, 0 / 0, 0.5}), 3) end)
  check.eq(#warnings, 0)
  check.eq(stop.best, 1.0)
  m.stop_training = false
  local first = cb.early_stopping {patience = 3}
  check.eq(run_epochs(first, m, {0 / 0, 0.5}), nil, "a NaN first epoch is not the best")
  check.eq(first.best, 0.5)
end

function T.options_are_checked()
  check.raises(function() cb.early_stopping {patience = -1} end, "early_stopping: patience must be a non-negative integer, got -1")
  check.raises(function() cb.early_stopping {monitr = "loss"} end, "early_stopping: unknown option 'monitr'")
  check.raises(function() cb.early_stopping {mode = "up"} end, "mode must be \"auto\", \"min\" or \"max\"")
  check.raises(function() cb.checkpoint {} end, "checkpoint: path must be a file name")
  check.raises(function() cb.csv_logger {path = "x.csv", separator = "ab"} end, "separator must be one punctuation character")
  check.raises(function() cb.lr_scheduler {fn = 3} end, "lr_scheduler: fn must be a function(epoch, lr)")
end

---------------------------------------------------------------- checkpoint

function T.checkpoint_saves_every_epoch_or_the_best()
  local dir = tmpdir()
  local m = model()
  local every = cb.checkpoint {path = dir .. "/e{epoch:02d}.safetensors"}
  run_epochs(every, m, {0.5, 0.6})
  check.is_true(exists(dir .. "/e01.safetensors") and exists(dir .. "/e02.safetensors"))
  local s = ckpt.load(dir .. "/e02.safetensors")
  check.eq(s.epoch, 2)
  check.eq(s.step, 0)
  check.eq(s.model["1.kernel"].shape, {3, 4})

  local best = cb.checkpoint {path = dir .. "/best.safetensors", save_best_only = true, monitor = "val_loss"}
  local saved = {}
  best:set_model(m)
  best:on_train_begin({})
  for epoch, v in ipairs {0.5, 0.6, 0.4, 0.45} do
    local new = {}
    for i, p in ipairs(m:parameters()) do new[i] = p * 0 + epoch end
    m:set_parameters(new)
    best:on_epoch_end(epoch, {val_loss = v})
    saved[#saved + 1] = best.last_epoch
  end
  check.eq(saved, {1, 1, 3, 3})
  check.eq(ckpt.load(dir .. "/best.safetensors").model["2.bias"]:totable(), {3, 3})

  local weights = cb.checkpoint {path = dir .. "/w{epoch}.safetensors", weights_only = true}
  run_epochs(weights, m, {1})
  local fresh = model()
  fresh:load(dir .. "/w1.safetensors")
  check.eq(fresh:parameters()[4]:totable(), m:parameters()[4]:totable())
  os.execute("rm -rf " .. dir)
end

-- As Keras formats filepath: {name} is a value of the logs, with a Python format spec;
-- save_weights_only is Keras's weights_only; an unknown name or spec is an error.
function T.checkpoint_path_formats_the_logs()
  local dir = tmpdir()
  local m = model()
  local c = cb.checkpoint {filepath = dir .. "/c{epoch:03d}_{val_loss:.2f}_{loss}.safetensors",
                           save_weights_only = true}
  run_epochs(c, m, {0.5, 0.125})
  check.is_true(exists(dir .. "/c001_0.50_0.5.safetensors"), "epoch 1's file")
  check.is_true(exists(dir .. "/c002_0.12_0.125.safetensors"), "epoch 2's file")
  model():load(dir .. "/c002_0.12_0.125.safetensors")  -- weights, as model:save writes them
  local missing = cb.checkpoint {path = dir .. "/{val_acc}.safetensors"}
  check.raises(function() run_epochs(missing, m, {1}) end,
    "checkpoint: the path's {val_acc} names no value of the logs (there are: epoch, loss, val_loss)")
  check.raises(function() cb.checkpoint {path = "c{epoch:>3}.safetensors"} end,
    "the path's {epoch:>3} is not a format this checkpoint knows")
  check.raises(function() cb.checkpoint {path = "a", weights_only = true, save_weights_only = true} end,
    "give weights_only or its Keras name save_weights_only, not both")
  os.execute("rm -rf " .. dir)
end

-- model:load reads the weights of a training checkpoint (the callback's default file), as
-- Keras's load_weights reads a whole-model file; a mismatch is still named.
function T.model_load_reads_a_training_checkpoint()
  local dir = tmpdir()
  local m = model()
  run_epochs(cb.checkpoint {path = dir .. "/full.safetensors"}, m, {0.5})
  local fresh = model(0.5)
  local new = {}
  for i, p in ipairs(fresh:parameters()) do new[i] = p * 0 + i end
  fresh:set_parameters(new)
  fresh:load(dir .. "/full.safetensors")
  for i, p in ipairs(m:parameters()) do check.eq(fresh:parameters()[i]:totable(), p:totable()) end
  local other = nn.Sequential {nn.Dense(5)}
  other(tpu.zeros {1, 3})
  check.raises(function() other:load(dir .. "/full.safetensors") end, "model:load: " .. dir .. "/full.safetensors does not match")
  os.execute("rm -rf " .. dir)
end

-- save_best_only keeps its best across fits, as Keras: a later fit that does worse does not
-- overwrite the file (on_train_begin forgot the best).
function T.checkpoint_best_is_kept_across_fits()
  local dir = tmpdir()
  local m = model()
  local best = cb.checkpoint {path = dir .. "/best.safetensors", save_best_only = true, monitor = "val_loss"}
  run_epochs(best, m, {0.5, 0.4})
  check.eq(best.last_epoch, 2)
  best.last_epoch = nil
  run_epochs(best, m, {0.9, 0 / 0})
  check.eq(best.last_epoch, nil, "a worse second fit saved")
  run_epochs(best, m, {0.3})
  check.eq(best.last_epoch, 1)
  os.execute("rm -rf " .. dir)
end

function T.checkpoint_records_the_data_position_and_history()
  local dir = tmpdir()
  local m = model()
  local ds = data.from_tensors {tpu.zeros {8, 3}, tpu.zeros({8}, {dtype = "i32"})}:shuffle(8, {seed = 1}):batch(4)
  local c = cb.checkpoint {path = dir .. "/c.safetensors"}
  c:set_model(m)
  c:set_params {epochs = 3, train_data = ds}
  for _ in ds:iter() do end
  for _ in ds:iter() do end
  m.history = nn.History {}
  m.history:_append(1, {loss = 0.5}, {"loss"})
  c:on_epoch_end(2, {loss = 0.5})
  local s = ckpt.load(dir .. "/c.safetensors")
  check.eq(s.data_position, {pass = 2, batch = 0})
  check.eq(s.history, {values = {loss = {0.5}}, keys = {"loss"}, epochs = {1}})
  os.execute("rm -rf " .. dir)
end

---------------------------------------------------------------- csv_logger

function T.csv_logger_writes_one_flushed_line_per_epoch()
  local dir = tmpdir()
  local path = dir .. "/log.csv"
  local log = cb.csv_logger {path = path}
  log:on_train_begin({})
  log:on_epoch_end(1, {loss = 0.5, accuracy = 0.75, val_loss = 0.625})
  check.eq(read(path), "epoch,accuracy,loss,val_loss\n1,0.75,0.5,0.625\n", "flushed at once")
  log:on_epoch_end(2, {loss = 1 / 3, accuracy = 0.8})
  log:on_train_end({})
  check.eq(read(path), "epoch,accuracy,loss,val_loss\n1,0.75,0.5,0.625\n2,0.8,0.333333333,NA\n")
  -- append keeps the header and the columns
  local again = cb.csv_logger {path = path, append = true}
  again:on_train_begin({})
  again:on_epoch_end(3, {val_loss = 0.25, loss = 0.125, accuracy = 0 / 0})
  again:on_train_end({})
  check.eq(select(2, read(path):gsub("\n", "")), 4)
  check.is_true(read(path):find("\n3,nan,0.125,0.25\n$") ~= nil, read(path))
  -- a fresh logger overwrites
  local semi = cb.csv_logger {path = path, separator = ";"}
  semi:on_train_begin({})
  semi:on_epoch_end(1, {loss = 2})
  semi:on_train_end({})
  check.eq(read(path), "epoch;loss\n1;2\n")
  check.raises(function()
    local bad = cb.csv_logger {path = dir .. "/no/such/log.csv"}
    bad:on_train_begin({})
  end, "csv_logger: cannot write " .. dir .. "/no/such/log.csv")
  os.execute("rm -rf " .. dir)
end

---------------------------------------------------------------- lr_scheduler

function T.the_history_records_what_callbacks_add_to_the_logs()
  local m = model(0.1)
  local x, y = tpu.ones {8, 3}, tpu.zeros({8}, {dtype = "i32"})
  local log_path = tmpdir() .. "/log.csv"
  local h = m:fit(x, y, {epochs = 3, batch_size = 4, verbose = 0, callbacks = {
    cb.csv_logger(log_path), cb.lr_scheduler {fn = function(_, lr) return lr / 2 end}}})
  check.near(h.history.learning_rate, {0.05, 0.025, 0.0125}, 1e-9, "Keras 3's name")
  check.eq(h.keys, {"loss", "learning_rate"})
  check.eq(h.history.lr, nil)
  check.eq(#h.history.loss, 3)
end

function T.lr_scheduler_sets_the_rate_before_each_epoch()
  local m = model(0.1)
  local seen = {}
  local s = cb.lr_scheduler {fn = function(epoch, lr)
    seen[#seen + 1] = {epoch, lr}
    return lr / 2
  end}
  s:set_model(m)
  s:on_epoch_begin(1, {})
  check.eq(m.compiled.optimizer.lr, 0.05, "before the optimizer state exists: the optimizer's rate")
  m.optimizer_state = m.compiled.optimizer:init(m:parameters())
  check.near(m.optimizer_state.lr:item(), 0.05, 1e-9)
  s:on_epoch_begin(2, {})
  check.near(m.optimizer_state.lr:item(), 0.025, 1e-9)
  local logs = {}
  s:on_epoch_end(2, logs)
  check.near(logs.learning_rate, 0.025, 1e-9)
  check.eq(logs.lr, nil)
  check.eq(seen[1], {1, 0.1})
  check.eq(seen[2][1], 2)
  check.raises(function() cb.lr_scheduler(function() return -1 end):on_epoch_begin(1) end,
    "lr_scheduler: the model must be compiled")
  local bad = cb.lr_scheduler(function() return 0 / 0 end)
  bad:set_model(m)
  check.raises(function() bad:on_epoch_begin(3) end, "fn(3, lr) must return a positive finite number, got nan")
  local sched = model()
  sched:compile {optimizer = optim.SGD {lr = optim.schedule.cosine {lr = 0.1, decay_steps = 10}}, loss = "mse"}
  local s2 = cb.lr_scheduler(function(_, lr) return lr end)
  s2:set_model(sched)
  check.raises(function() s2:on_epoch_begin(1) end, "the optimizer already follows a schedule")
end

---------------------------------------------------------------- through fit

function T.lr_scheduler_never_recompiles_the_step()
  local m = model(0.1)
  local x = tpu.random.normal(tpu.random.key(6), {16, 3})
  local ds = data.from_tensors {x, (x:sum(2):gt(0)):cast("i32")}:batch(8)
  m:fit(ds, {epochs = 4, verbose = 0, callbacks = {cb.lr_scheduler(function(_, lr) return lr * 0.5 end)}})
  check.near(m.optimizer_state.lr:item(), 0.1 / 16, 1e-9)
  check.eq(m.compiled.steps.train:stats().compiles, 1)
end

-- metrics = {"acc"} is logged as "acc" and "val_acc", as Keras 3 logs it: a callback monitors it.
function T.acc_is_logged_and_monitored_under_its_own_name()
  local m = model(0.1)
  m:compile {optimizer = optim.Adam {lr = 0.1}, loss = "sparse_categorical_crossentropy", metrics = {"acc"}}
  local x, y = tpu.ones {8, 3}, tpu.zeros({8}, {dtype = "i32"})
  local h = m:fit(x, y, {epochs = 3, batch_size = 4, verbose = 0, validation_data = {x, y},
    callbacks = {cb.EarlyStopping {monitor = "val_acc", patience = 0}, cb.EarlyStopping {monitor = "acc"}}})
  check.eq(h.keys, {"loss", "acc", "val_loss", "val_acc"})
  check.eq(#h.history.acc, 2, "accuracy 1 from the first epoch does not improve (mode max for acc)")
end

function T.checkpoint_save_freq_saves_every_n_steps()
  local dir = tmpdir()
  local m = model()
  local c = cb.checkpoint {path = dir .. "/c.safetensors", save_freq = 3}
  c:set_model(m)
  m.train_steps, m.fit_progress = 3, {epoch = 2, batch = 1, sums = {1.5, 8}}
  c:on_train_batch_end(1, {loss = 0.1875})
  local s = ckpt.load(dir .. "/c.safetensors")
  check.eq(s.epoch, 1)
  check.eq(s.epoch_sums, {1.5, 8})
  m.train_steps = 4
  os.remove(dir .. "/c.safetensors")
  c:on_train_batch_end(2, {})
  c:on_epoch_end(2, {})
  check.eq(exists(dir .. "/c.safetensors"), false, "only every 3rd step")
  check.raises(function() cb.checkpoint {path = "x", save_freq = 0} end, "save_freq must be \"epoch\" or a positive number")
  check.raises(function() cb.checkpoint {path = "x", save_freq = 2, save_best_only = true} end, "cannot be used with save_freq")
  os.execute("rm -rf " .. dir)
end

function T.callbacks_run_inside_fit()
  local dir = tmpdir()
  local m = model(0.05)
  local x = tpu.random.normal(tpu.random.key(2), {32, 3})
  local y = (x:sum(2):gt(0)):cast("i32")
  local ds = data.from_tensors {x, y}:batch(8)
  local rates = {}
  local history = m:fit(ds, {epochs = 4, verbose = 0, validation_data = ds, callbacks = {
    cb.lr_scheduler(function(epoch, lr) rates[epoch] = lr; return epoch == 1 and lr or lr * 0.5 end),
    cb.csv_logger {path = dir .. "/log.csv"},
    cb.checkpoint {path = dir .. "/best.safetensors", save_best_only = true},
    cb.early_stopping {monitor = "loss", patience = 0},
  }})
  check.near(rates, {0.05, 0.05, 0.025, 0.0125}, 1e-9)
  local lines = {}
  for line in read(dir .. "/log.csv"):gmatch("[^\n]+") do lines[#lines + 1] = line end
  check.eq(lines[1], "epoch,learning_rate,loss,val_loss")
  check.eq(#lines, #history.epoch + 1)
  check.is_true(exists(dir .. "/best.safetensors"))
  local s = ckpt.load(dir .. "/best.safetensors")
  check.is_true(s.step > 0 and s.epoch >= 1)
  check.eq(#s.optimizer_state.m, 4)
  os.execute("rm -rf " .. dir)
end

T["tpu.callbacks: one class a file, the same public names"] = function()
  local names = {}
  for k in pairs(tpu.callbacks) do
    if not k:match("^_") then names[#names + 1] = k end
  end
  table.sort(names)
  check.eq(names, {"CSVLogger", "Callback", "Checkpoint", "CsvLogger", "EarlyStopping",
                   "LearningRateScheduler", "LrScheduler", "ModelCheckpoint", "checkpoint",
                   "csv_logger", "early_stopping", "lr_scheduler"})
  for _, class in ipairs {"Callback", "Checkpoint", "CsvLogger", "EarlyStopping", "LrScheduler",
                          "LearningRateScheduler"} do
    check.is_true(rawequal(tpu.callbacks[class], require("tpu.callbacks." .. class)), class)
  end
  check.is_true(cb.EarlyStopping.is_instance(cb.early_stopping {}))
  check.is_true(cb.Callback.is_instance(cb.lr_scheduler(function(_, lr) return lr end)))
end

return T
