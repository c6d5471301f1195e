-- Callbacks: objects whose hooks fit calls at fixed points of training.
--
--   local cb = tpu.callbacks
--   model:fit(train, {epochs = 50, validation_data = test, callbacks = {
--     cb.early_stopping {monitor = "val_loss", patience = 3, restore_best = true},
--     cb.checkpoint {path = "run/best.safetensors", save_best_only = true},
--     cb.csv_logger {path = "run/log.csv"},
--     cb.lr_scheduler {fn = function(epoch, lr) return epoch > 10 and lr * 0.9 or lr end},
--   }})
--
-- A custom callback extends the base class and overrides the hooks it needs:
--   local Printer = tpu.callbacks.Callback:extend("Printer")
--   function Printer:on_epoch_end(epoch, logs) print(epoch, logs.loss) end
--   ... callbacks = {Printer()} ...
--
-- Hooks (all do nothing in the base class). `logs` maps names to numbers: at the end of an
-- epoch "loss", each metric ("accuracy") and, with validation data, "val_loss",
-- "val_accuracy", ...; at the end of a batch the running averages of the epoch so far.
--   on_train_begin(logs)          before the first epoch
--   on_train_end(logs)            after the last epoch (also after early stopping)
--   on_epoch_begin(epoch, logs)   epoch counts from 1, as fit prints it
--   on_epoch_end(epoch, logs)     after validation; a callback may set
--                                 self.model.stop_training = true to end training
--   on_batch_end(batch, logs)     after each training step; batch counts from 1 in the epoch
--                                 (on_train_batch_end is the same hook under its longer name)
-- Fields fit sets: self.model (the model being trained, through set_model) and self.params
-- ({epochs=, steps=, verbose=, train_data=, validation_data=}, through set_params).
-- Each class lives in its own file (tpu/callbacks/EarlyStopping.lua, ...).
local errors = require "tpu.errors"

local fail, show = errors.fail, errors.show

local M = {}

for _, name in ipairs {"Callback", "EarlyStopping", "Checkpoint", "CsvLogger", "LrScheduler",
                       "LearningRateScheduler"} do
  M[name] = require("tpu.callbacks." .. name)
end

-- Keras 3's class names: keras.callbacks.ModelCheckpoint and CSVLogger are our classes
-- (EarlyStopping has its Keras name already; LearningRateScheduler is LrScheduler with Keras's
-- epoch count, in its own file).
M.ModelCheckpoint, M.CSVLogger = M.Checkpoint, M.CsvLogger

-- fit's callback list, ready to call: each one gets set_model(model) and set_params(params)
-- (plain tables with hook functions get the fields model and params).
function M._prepare(list, model, params)
  if list == nil then return {} end
  if type(list) ~= "table" or getmetatable(list) ~= nil then
    fail("fit: callbacks must be a list, e.g. {tpu.callbacks.early_stopping{}}, got %s", show(list))
  end
  for i, cb in ipairs(list) do
    if type(cb) ~= "table" then fail("fit: callbacks[%d] is a %s, not a callback", i, type(cb)) end
    if type(cb.set_model) == "function" then cb:set_model(model) else cb.model = model end
    if type(cb.set_params) == "function" then cb:set_params(params) else cb.params = params end
  end
  return list
end

-- The constructors users call: tpu.callbacks.early_stopping{...}, ...
function M.early_stopping(opts, extra)
  errors.none(2, "early_stopping", extra)
  return M.EarlyStopping(opts)
end

function M.checkpoint(opts, extra)
  errors.none(2, "checkpoint", extra)
  return M.Checkpoint(opts)
end

function M.csv_logger(opts, more, extra)
  errors.none(3, "csv_logger", extra)
  return M.CsvLogger(opts, more)
end

function M.lr_scheduler(opts, extra)
  errors.none(2, "lr_scheduler", extra)
  return M.LrScheduler(opts)
end

-- A name tpu.callbacks lacks is an error listing what it has (rawget probes without one).
return errors.strict_namespace(M, "tpu.callbacks")
