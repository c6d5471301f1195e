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
local class = require "tpu.class"

local M = {}

local core = require "tpu.core"

local fail = require("tpu.errors").fail

local show = require("tpu.errors").show

---------------------------------------------------------------- base class

local Callback = class("Callback")
M.Callback = Callback

function Callback:__init() end
function Callback:set_model(model) self.model = model end
function Callback:set_params(params) self.params = params end
function Callback:on_train_begin(_logs) end
function Callback:on_train_end(_logs) end
function Callback:on_epoch_begin(_epoch, _logs) end
function Callback:on_epoch_end(_epoch, _logs) end
function Callback:on_batch_end(_batch, _logs) end
function Callback:on_train_batch_end(batch, logs) return self:on_batch_end(batch, logs) end

function Callback:__tostring() return "callbacks." .. self.__name end

-- fit's callback list, ready to call: each one gets set_model(model) and set_params(params)
-- (plain tables with hook functions get the fields model and params).
function M.prepare(list, model, params)
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

---------------------------------------------------------------- option checks

-- Keras's names for options (DESIGN section 3), turned into ours.
local keras_names = {restore_best_weights = "restore_best", filepath = "path", schedule = "fn"}

-- A copy of opts with Keras's names turned into ours, after refusing unknown keys.
local function check_options(who, opts, allowed)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then fail("%s: options must be a table, got %s", who, show(opts)) end
  local ok = {}
  for _, k in ipairs(allowed) do ok[k] = true end
  local out = {}
  for k, v in pairs(opts) do
    local ours = keras_names[k]
    if ours and ok[ours] then
      if opts[ours] ~= nil then fail("%s: give %s or its Keras name %s, not both", who, ours, k) end
      out[ours] = v
    elseif ok[k] then
      out[k] = v
    else
      table.sort(allowed)
      fail("%s: unknown option '%s' (known options: %s)", who, tostring(k), table.concat(allowed, ", "))
    end
  end
  return out
end

local function check_type(who, name, v, kind, default)
  if v == nil then return default end
  if type(v) ~= kind then fail("%s: %s must be a %s, got %s", who, name, kind, show(v)) end
  return v
end

local function check_count(who, name, v, default)
  if v == nil then return default end
  if math.type(v) ~= "integer" or v < 0 then
    fail("%s: %s must be a non-negative integer, got %s", who, name, show(v))
  end
  return v
end

-- "min" or "max" for a monitored quantity: accuracies grow, everything else shrinks.
local function check_mode(who, mode, monitor)
  mode = mode or "auto"
  if mode ~= "auto" and mode ~= "min" and mode ~= "max" then
    fail("%s: mode must be \"auto\", \"min\" or \"max\", got %s", who, show(mode))
  end
  if mode ~= "auto" then return mode end
  local base = monitor:gsub("^val_", "")
  if base:find("acc") or base == "auc" or base:find("precision") or base:find("recall") then return "max" end
  return "min"
end

-- Tracks the best value of a monitored quantity.
local function improved(mode, value, best, min_delta)
  if best == nil then return true end
  if mode == "min" then return value < best - min_delta end
  return value > best + min_delta
end

-- The monitored value from logs, or nil with one warning naming what logs hold.
local function monitored(cb, who, logs)
  local v = logs and logs[cb.monitor]
  if type(v) == "number" and v == v then return v end
  if not cb.warned then
    cb.warned = true
    local names = {}
    for k in pairs(logs or {}) do names[#names + 1] = k end
    table.sort(names)
    local hint = cb.monitor:match("^val_") and " (val_ values need validation_data in fit)" or ""
    require("tpu").warn(string.format("%s: '%s' is not in the epoch's logs (available: %s)%s\n",
      who, cb.monitor, #names > 0 and table.concat(names, ", ") or "none", hint))
  end
  return nil
end

---------------------------------------------------------------- early_stopping

local EarlyStopping = Callback:extend("EarlyStopping")
M.EarlyStopping = EarlyStopping

-- A copy that owns its buffer (fit donates the weights' buffers to each step).
local function copy(t) return t * 1 end

-- early_stopping{monitor = "val_loss", patience = 0, min_delta = 0, mode = "auto",
--                restore_best = false, verbose = 0}
-- Stops when `monitor` has not improved by more than min_delta for `patience` epochs in a row
-- (patience = 0: at the first epoch without improvement). With
-- restore_best the model ends with the weights of its best epoch.
function EarlyStopping:__init(opts)
  local who = "early_stopping"
  opts = check_options(who, opts, {"monitor", "patience", "min_delta", "mode", "restore_best", "verbose"})
  self.monitor = check_type(who, "monitor", opts.monitor, "string", "val_loss")
  self.patience = check_count(who, "patience", opts.patience, 0)
  self.min_delta = math.abs(check_type(who, "min_delta", opts.min_delta, "number", 0))
  self.mode = check_mode(who, opts.mode, self.monitor)
  self.restore_best = check_type(who, "restore_best", opts.restore_best, "boolean", false)
  self.verbose = check_count(who, "verbose", opts.verbose, 0)
end

function EarlyStopping:on_train_begin()
  self.wait, self.best, self.best_epoch, self.best_weights, self.stopped_epoch = 0, nil, nil, nil, nil
end

function EarlyStopping:on_epoch_end(epoch, logs)
  local value = monitored(self, "early_stopping", logs)
  if value == nil then return end
  if self.wait == nil then self:on_train_begin() end
  if improved(self.mode, value, self.best, self.min_delta) then
    self.best, self.best_epoch, self.wait = value, epoch, 0
    if self.restore_best and self.model then
      local weights = {}
      for i, p in ipairs(self.model:parameters()) do weights[i] = copy(p) end
      self.best_weights = weights
    end
    return
  end
  self.wait = self.wait + 1
  if self.wait >= self.patience then
    self.stopped_epoch = epoch
    if self.model then self.model.stop_training = true end
  end
end

function EarlyStopping:on_train_end()
  if self.stopped_epoch and self.verbose > 0 then
    io.stdout:write(string.format("Epoch %d: early stopping\n", self.stopped_epoch))
  end
  if self.restore_best and self.best_weights and self.model then
    if self.verbose > 0 then
      io.stdout:write(string.format("Restoring model weights from the end of the best epoch: %d\n", self.best_epoch))
    end
    self.model:set_parameters(self.best_weights)
  end
end

function M.early_stopping(opts, extra)
  require("tpu.errors").none(2, "early_stopping", extra)
  return EarlyStopping(opts)
end

---------------------------------------------------------------- checkpoint

local Checkpoint = Callback:extend("Checkpoint")
M.Checkpoint = Checkpoint

-- checkpoint{path = "ckpt.safetensors", save_best_only = false, monitor = "val_loss",
--            mode = "auto", weights_only = false, save_freq = "epoch", verbose = 0}
-- Saves at the end of every epoch (or only when `monitor` improved); save_freq = n saves every
-- n training steps instead (inside epochs too; fit resumes there). The file is written to a
-- temporary file and renamed, so an interrupted save leaves the previous checkpoint. "{epoch}"
-- in the path becomes the epoch number ("{epoch:03d}" zero-pads it). By default the file is a
-- training checkpoint (tpu.checkpoint.load reads it; weights, optimizer state, step, random
-- key, epoch, data position, history); weights_only = true writes what model:save writes.
function Checkpoint:__init(opts)
  local who = "checkpoint"
  opts = check_options(who, opts, {"path", "save_best_only", "monitor", "mode", "weights_only", "save_freq", "verbose"})
  if type(opts.path) ~= "string" or opts.path == "" then
    fail("checkpoint: path must be a file name, e.g. checkpoint{path = \"ckpt.safetensors\"}, got %s", show(opts.path))
  end
  self.path = opts.path
  self.save_best_only = check_type(who, "save_best_only", opts.save_best_only, "boolean", false)
  self.monitor = check_type(who, "monitor", opts.monitor, "string", "val_loss")
  self.mode = check_mode(who, opts.mode, self.monitor)
  self.weights_only = check_type(who, "weights_only", opts.weights_only, "boolean", false)
  self.verbose = check_count(who, "verbose", opts.verbose, 0)
  local freq = opts.save_freq
  if freq ~= nil and freq ~= "epoch" and not (math.type(freq) == "integer" and freq > 0) then
    fail("checkpoint: save_freq must be \"epoch\" or a positive number of steps, got %s", show(freq))
  end
  if freq ~= nil and freq ~= "epoch" and self.save_best_only then
    fail("checkpoint: save_best_only compares epochs' results; it cannot be used with save_freq = %d", freq)
  end
  self.save_freq = freq ~= "epoch" and freq or nil
end

-- The path for an epoch: "{epoch}" and "{epoch:03d}" are replaced.
function Checkpoint:file_for(epoch)
  return (self.path:gsub("{epoch(:?)(%d*)d?}", function(colon, width)
    if colon == "" then return tostring(epoch) end
    return string.format("%0" .. (width ~= "" and width or "1") .. "d", epoch)
  end))
end

local function history_state(model)
  local h = model.history
  if type(h) ~= "table" or type(h.history) ~= "table" then return nil end
  return {values = h.history, keys = h.keys or {}, epochs = h.epoch or {}}
end

local function copy_list(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  return out
end

-- The training checkpoint's content after `epoch` epochs and `batch` steps of the next one
-- (fit keeps the running sums in model.fit_progress).
function Checkpoint:state(epoch, batch)
  local ckpt = require "tpu.checkpoint"
  local params = self.params or {}
  batch = batch or 0
  local extra = {epoch = epoch, history = history_state(self.model)}
  if type(params.train_data) == "table" then extra.data_position = ckpt.data_position(params.train_data, batch) end
  local progress = self.model.fit_progress
  if batch > 0 and progress and progress.sums then extra.epoch_sums = copy_list(progress.sums) end
  if params.validation_data and type(params.validation_data) == "table" and params.validation_data._epoch then
    extra.validation_position = ckpt.data_position(params.validation_data, 0)
  end
  return ckpt.training_state(self.model, extra)
end

function Checkpoint:save(epoch, logs, value, batch)
  local path = self:file_for(epoch + ((batch or 0) > 0 and 1 or 0))
  if self.weights_only then self.model:save(path)
  else require("tpu.checkpoint").save(path, self:state(epoch, batch)) end
  self.last_path, self.last_epoch = path, epoch
  if self.verbose > 0 then
    local why = value and string.format("%s improved to %.5f, ", self.monitor, value) or ""
    io.stdout:write(string.format("Epoch %d: %ssaving checkpoint to %s\n", epoch, why, path))
  end
  return logs
end

function Checkpoint:on_train_begin()
  self.best = nil
  if not self.model then fail("checkpoint: no model to save (fit sets callback.model)") end
end

-- With save_freq = n: every n-th training step (counted over the whole run).
function Checkpoint:on_batch_end(batch, logs)
  local steps = self.model and self.model.train_steps
  if not self.save_freq or not steps or steps % self.save_freq ~= 0 then return end
  local progress = self.model.fit_progress or {}
  local epoch = (progress.epoch or 1) - 1
  self:save(epoch, logs, nil, batch)
end

function Checkpoint:on_epoch_end(epoch, logs)
  if self.save_freq then return end
  if not self.save_best_only then return self:save(epoch, logs) end
  local value = monitored(self, "checkpoint", logs)
  if value == nil or not improved(self.mode, value, self.best, 0) then return end
  self.best = value
  self:save(epoch, logs, value)
end

function M.checkpoint(opts, extra)
  require("tpu.errors").none(2, "checkpoint", extra)
  return Checkpoint(opts)
end

---------------------------------------------------------------- csv_logger

local CsvLogger = Callback:extend("CsvLogger")
M.CsvLogger = CsvLogger

-- csv_logger{path = "log.csv", separator = ",", append = false}, or as Keras's CSVLogger:
-- csv_logger("log.csv"[, {separator = ",", append = false}]).
-- One line per epoch: "epoch" then the logs' names in sorted order (loss, metrics, val_...),
-- written and flushed as each epoch ends. `tputrain plot log.csv out.svg` draws it.
function CsvLogger:__init(opts, more)
  local who = "csv_logger"
  if type(opts) == "string" then
    more = check_options(who, more, {"separator", "append"})
    more.path = opts
    opts = more
  else
    require("tpu.errors").none(2, who, more)
  end
  opts = check_options(who, opts, {"path", "separator", "append"})
  if type(opts.path) ~= "string" or opts.path == "" then
    fail("csv_logger: path must be a file name, e.g. csv_logger{path = \"log.csv\"}, got %s", show(opts.path))
  end
  self.path = opts.path
  self.separator = check_type(who, "separator", opts.separator, "string", ",")
  if #self.separator ~= 1 or self.separator:match("[%w%.%-\"\n]") then
    fail("csv_logger: separator must be one punctuation character such as \",\" or \";\", got %s", show(self.separator))
  end
  self.append = check_type(who, "append", opts.append, "boolean", false)
end

local function file_has_content(path)
  local f = io.open(path, "rb")
  if not f then return false end
  local size = f:seek("end")
  f:close()
  return size > 0
end

function CsvLogger:on_train_begin()
  self:close()
  self.keys = nil
  local has_header = self.append and file_has_content(self.path)
  local f, err = io.open(self.path, self.append and "ab" or "wb")
  if not f then fail("csv_logger: cannot write %s", err) end
  self.file = f
  if has_header then self.keys = self:existing_keys() end
end

-- The columns of the header already in the file (append mode), without "epoch".
function CsvLogger:existing_keys()
  local f = io.open(self.path, "rb")
  local line = f and f:read("l")
  if f then f:close() end
  if not line then return nil end
  local keys = {}
  for field in (line .. self.separator):gmatch("(.-)" .. self.separator:gsub("%p", "%%%0")) do
    keys[#keys + 1] = field
  end
  if keys[1] ~= "epoch" then return nil end
  table.remove(keys, 1)
  return keys
end

local function format_value(v)
  if math.type(v) == "integer" then return tostring(v) end
  if type(v) ~= "number" then return v == nil and "NA" or tostring(v) end
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  return string.format("%.9g", v)
end

function CsvLogger:on_epoch_end(epoch, logs)
  if not self.file then self:on_train_begin() end
  logs = logs or {}
  local sep = self.separator
  if not self.keys then
    self.keys = {}
    for k, v in pairs(logs) do
      if type(v) == "number" then self.keys[#self.keys + 1] = k end
    end
    table.sort(self.keys)
    self.file:write("epoch", #self.keys > 0 and sep or "", table.concat(self.keys, sep), "\n")
  end
  local row = {tostring(epoch)}
  for _, k in ipairs(self.keys) do row[#row + 1] = format_value(logs[k]) end
  self.file:write(table.concat(row, sep), "\n")
  self.file:flush()
end

function CsvLogger:close()
  if self.file then self.file:close() end
  self.file = nil
end

function CsvLogger:on_train_end() self:close() end

function M.csv_logger(opts, more, extra)
  require("tpu.errors").none(3, "csv_logger", extra)
  return CsvLogger(opts, more)
end

---------------------------------------------------------------- lr_scheduler

local LrScheduler = Callback:extend("LrScheduler")
M.LrScheduler = LrScheduler

-- lr_scheduler{fn = function(epoch, lr) return new_lr end, verbose = 0} (Keras: schedule = fn)
-- Before each epoch sets the optimizer's learning rate to fn(epoch, current lr) (epoch counts
-- from 1). The rate is a tensor of the optimizer state, so changing it never recompiles the
-- step. At the end of the epoch logs.lr holds the rate used. An optimizer given an
-- optim.schedule already changes its rate per step; the two do not combine.
function LrScheduler:__init(opts)
  local who = "lr_scheduler"
  if type(opts) == "function" then opts = {fn = opts} end
  opts = check_options(who, opts, {"fn", "verbose"})
  if type(opts.fn) ~= "function" then
    fail("lr_scheduler: fn must be a function(epoch, lr) returning the new rate, got %s", show(opts.fn))
  end
  self.fn = opts.fn
  self.verbose = check_count(who, "verbose", opts.verbose, 0)
end

local function optimizer_of(model)
  local c = model and model.compiled
  local opt = c and c.optimizer
  if not opt then fail("lr_scheduler: the model must be compiled with an optimizer first") end
  if type(opt.lr) ~= "number" then
    fail("lr_scheduler: the optimizer already follows a schedule (%s); use one or the other", tostring(opt.lr))
  end
  return opt
end

-- The rate the next step will use.
function LrScheduler:current_lr()
  local opt = optimizer_of(self.model)
  local state = self.model.optimizer_state
  if state and state.lr then return state.lr:item() end
  return opt.lr
end

function LrScheduler:set_lr(lr)
  local opt = optimizer_of(self.model)
  opt.lr = lr  -- what the optimizer state starts from if it does not exist yet
  local state = self.model.optimizer_state
  if state and state.lr then state.lr = require("tpu").tensor(lr, {dtype = state.lr.dtype}) end
end

function LrScheduler:on_epoch_begin(epoch)
  local lr = self.fn(epoch, self:current_lr())
  if type(lr) ~= "number" or lr ~= lr or lr <= 0 or lr == math.huge then
    fail("lr_scheduler: fn(%d, lr) must return a positive finite number, got %s", epoch, show(lr))
  end
  self:set_lr(lr)
  if self.verbose > 0 then
    io.stdout:write(string.format("Epoch %d: lr_scheduler setting learning rate to %g.\n", epoch, lr))
  end
end

function LrScheduler:on_epoch_end(_epoch, logs)
  if logs then logs.lr = self:current_lr() end
end

function M.lr_scheduler(opts, extra)
  require("tpu.errors").none(2, "lr_scheduler", extra)
  return LrScheduler(opts)
end

return M
