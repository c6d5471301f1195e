-- Saves a training checkpoint (or the weights) during training.
local Callback = require "tpu.callbacks.Callback"
local util = require "tpu.callbacks.util"
local errors = require "tpu.errors"

local fail, show = errors.fail, errors.show

local Checkpoint = Callback:extend("Checkpoint")

-- A Python format spec ("03d", ".2f", "e") as a string.format directive, or nil.
local function directive(spec, value)
  local zero, width, precision, kind = spec:match("^(0?)(%d*)(%.?%d*)([dfeg]?)$")
  if not zero or precision == "." then return nil end
  if kind == "" then kind = math.type(value) == "integer" and "d" or "g" end
  if kind == "d" and math.type(value) ~= "integer" then
    if value ~= math.floor(value) then return nil end
    value = math.tointeger(value)
  end
  return "%" .. zero .. width .. precision .. kind, value
end

-- checkpoint{path = "ckpt.safetensors", save_best_only = false, monitor = "val_loss",
--            mode = "auto", weights_only = false, save_freq = "epoch", verbose = 0}
-- Saves at the end of every epoch (or only when `monitor` improved); save_freq = n saves every
-- n training steps instead (inside epochs too; fit resumes there). The file is written to a
-- temporary file and renamed, so an interrupted save leaves the previous checkpoint. As in
-- Keras, "{epoch}" in the path becomes the epoch number and "{name}" a value of the logs
-- ("{epoch:03d}", "{val_loss:.2f}": a Python format spec). Keras's names filepath and
-- save_weights_only are accepted for path and weights_only. By default the file is a
-- training checkpoint (tpu.checkpoint.load reads it; weights, optimizer state, step, random
-- key, epoch, data position, history); weights_only = true writes what model:save writes.
function Checkpoint:__init(opts, more)
  local who = "checkpoint"
  if type(opts) == "string" then  -- Keras's ModelCheckpoint(filepath, ...)
    if more ~= nil and (type(more) ~= "table" or getmetatable(more) ~= nil) then
      errors.type_error(2, who, "option table", more)
    end
    local copy = {}
    for k, v in pairs(more or {}) do copy[k] = v end
    if copy.path ~= nil or copy.filepath ~= nil then
      fail("checkpoint: the path is given twice (first argument and option)")
    end
    copy.path, opts = opts, copy
  else
    errors.none(2, who, more)
  end
  opts = util.check_options(who, opts, {"path", "save_best_only", "monitor", "mode", "weights_only", "save_freq", "verbose"})
  if type(opts.path) ~= "string" or opts.path == "" then
    fail("checkpoint: path must be a file name, e.g. checkpoint{path = \"ckpt.safetensors\"}, got %s", show(opts.path))
  end
  self.path = opts.path
  for name, spec in opts.path:gmatch("{([%w_]+):?([^}]*)}") do
    if spec ~= "" and not directive(spec, 1.0) then
      fail("checkpoint: the path's {%s:%s} is not a format this checkpoint knows (0-padded width, "
        .. "precision and d, f, e or g, e.g. {epoch:03d} or {val_loss:.2f})", name, spec)
    end
  end
  self.save_best_only = util.check_type(who, "save_best_only", opts.save_best_only, "boolean", false)
  self.monitor = util.check_type(who, "monitor", opts.monitor, "string", "val_loss")
  self.mode = util.check_mode(who, opts.mode, self.monitor)
  self.weights_only = util.check_type(who, "weights_only", opts.weights_only, "boolean", false)
  self.verbose = util.check_count(who, "verbose", opts.verbose, 0)
  local freq = opts.save_freq
  if freq ~= nil and freq ~= "epoch" and not (math.type(freq) == "integer" and freq > 0) then
    fail("checkpoint: save_freq must be \"epoch\" or a positive number of steps, got %s", show(freq))
  end
  if freq ~= nil and freq ~= "epoch" and self.save_best_only then
    fail("checkpoint: save_best_only compares epochs' results; it cannot be used with save_freq = %d", freq)
  end
  self.save_freq = freq ~= "epoch" and freq or nil
end

-- The path for an epoch, as Keras formats it: "{epoch}" and "{name}" for a value of `logs`,
-- each with an optional format spec ("{epoch:03d}", "{val_loss:.4f}").
function Checkpoint:_file_for(epoch, logs)
  return (self.path:gsub("{([%w_]+):?([^}]*)}", function(name, spec)
    local value = name == "epoch" and epoch or (logs or {})[name]
    if value == nil then
      local known = {"epoch"}
      for k in pairs(logs or {}) do known[#known + 1] = k end
      table.sort(known)
      fail("checkpoint: the path's {%s} names no value of the logs (there are: %s)", name,
        table.concat(known, ", "))
    end
    if spec == "" then return tostring(value) end
    local fmt, v = directive(spec, value)
    if not fmt then fail("checkpoint: the path's {%s:%s} needs an integer, got %s", name, spec, show(value)) end
    return string.format(fmt, v)
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
function Checkpoint:_state(epoch, batch)
  local ckpt = require "tpu.checkpoint"
  local params = self.params or {}
  batch = batch or 0
  local extra = {epoch = epoch, history = history_state(self.model)}
  local progress = self.model.fit_progress
  -- The data set's position: the batches taken from its pass under way, which differ from the
  -- epoch's steps when steps_per_epoch made the epoch continue a pass (then both are kept).
  local taken = progress and progress.pass_batch or batch
  if type(params.train_data) == "table" then extra.data_position = ckpt.data_position(params.train_data, taken) end
  if taken ~= batch then extra.epoch_batch = batch end
  if batch > 0 and progress and progress.sums then extra.epoch_sums = copy_list(progress.sums) end
  if params.validation_data and type(params.validation_data) == "table" and params.validation_data._epoch then
    extra.validation_position = ckpt.data_position(params.validation_data, 0)
  end
  return ckpt.training_state(self.model, extra)
end

function Checkpoint:_save(epoch, logs, value, batch)
  local path = self:_file_for(epoch + ((batch or 0) > 0 and 1 or 0), logs)
  if self.weights_only then self.model:save(path)
  else require("tpu.checkpoint").save(path, self:_state(epoch, batch)) end
  self.last_path, self.last_epoch = path, epoch
  if self.verbose > 0 then
    local why = value and string.format("%s improved to %.5f, ", self.monitor, value) or ""
    io.stdout:write(string.format("Epoch %d: %ssaving checkpoint to %s\n", epoch, why, path))
  end
  return logs
end

-- The best value so far is kept across fits, as Keras keeps it: a second fit (fine-tuning)
-- saves only what beats the first one's best.
function Checkpoint:on_train_begin()
  if not self.model then fail("checkpoint: no model to save (fit sets callback.model)") end
end

-- With save_freq = n: every n-th training step (counted over the whole run).
function Checkpoint:on_batch_end(batch, logs)
  local steps = self.model and self.model.train_steps
  if not self.save_freq or not steps or steps % self.save_freq ~= 0 then return end
  local progress = self.model.fit_progress or {}
  local epoch = (progress.epoch or 1) - 1
  self:_save(epoch, logs, nil, batch)
end

function Checkpoint:on_epoch_end(epoch, logs)
  if self.save_freq then return end
  if not self.save_best_only then return self:_save(epoch, logs) end
  local value = util.monitored(self, "checkpoint", logs)
  if value == nil or not util.improved(self.mode, value, self.best, 0) then return end
  self.best = value
  self:_save(epoch, logs, value)
end


return Checkpoint
