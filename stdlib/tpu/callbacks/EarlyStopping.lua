-- Stops training when a monitored quantity stops improving.
local Callback = require "tpu.callbacks.Callback"
local util = require "tpu.callbacks.util"
local errors = require "tpu.errors"
local is_finite = require("tpu.nn.util").is_finite

local EarlyStopping = Callback:extend("EarlyStopping")

-- A copy that owns its buffer (fit donates the weights' buffers to each step).
local function copy(t) return t * 1 end

-- early_stopping{monitor = "val_loss", patience = 0, min_delta = 0, mode = "auto",
--                restore_best = false, verbose = 0}
-- Stops when `monitor` has not improved by more than min_delta for `patience` epochs in a row
-- (patience = 0: at the first epoch without improvement). With
-- restore_best the model ends with the weights of its best epoch.
function EarlyStopping:__init(opts)
  local who = "early_stopping"
  opts = util.check_options(who, opts, {"monitor", "patience", "min_delta", "mode", "restore_best", "verbose"})
  self.monitor = util.check_type(who, "monitor", opts.monitor, "string", "val_loss")
  self.patience = util.check_count(who, "patience", opts.patience, 0)
  self.min_delta = math.abs(util.check_type(who, "min_delta", opts.min_delta, "number", 0))
  if not is_finite(self.min_delta) then
    errors.fail("%s: min_delta must be a finite number, got %s", who, errors.show(opts.min_delta))
  end
  self.mode = util.check_mode(who, opts.mode, self.monitor)
  self.restore_best = util.check_type(who, "restore_best", opts.restore_best, "boolean", false)
  self.verbose = util.check_count(who, "verbose", opts.verbose, 0)
end

function EarlyStopping:on_train_begin()
  self.wait, self.best, self.best_epoch, self.best_weights, self.stopped_epoch = 0, nil, nil, nil, nil
end

function EarlyStopping:on_epoch_end(epoch, logs)
  local value = util.monitored(self, "early_stopping", logs)
  if value == nil then return end
  if self.wait == nil then self:on_train_begin() end
  if util.improved(self.mode, value, self.best, self.min_delta) then
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


return EarlyStopping
