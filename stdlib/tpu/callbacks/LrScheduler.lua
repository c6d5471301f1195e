-- Sets the learning rate before each epoch from a function of the epoch.
local Callback = require "tpu.callbacks.Callback"
local util = require "tpu.callbacks.util"
local core = require "tpu.core"
local errors = require "tpu.errors"
local is_finite = require("tpu.nn.util").is_finite

local fail, show = errors.fail, errors.show

local LrScheduler = Callback:extend("LrScheduler")

-- lr_scheduler{fn = function(epoch, lr) return new_lr end, verbose = 0} (Keras: schedule = fn)
-- Before each epoch sets the optimizer's learning rate to fn(epoch, current lr) (epoch counts
-- from 1). The rate is a tensor of the optimizer state, so changing it never recompiles the
-- step. At the end of the epoch logs.learning_rate holds the rate used (Keras 3's name). An optimizer given an
-- optim.schedule already changes its rate per step; the two do not combine.
function LrScheduler:__init(opts)
  local who = "lr_scheduler"
  if type(opts) == "function" then opts = {fn = opts} end
  opts = util.check_options(who, opts, {"fn", "verbose"})
  if type(opts.fn) ~= "function" then
    fail("lr_scheduler: fn must be a function(epoch, lr) returning the new rate, got %s", show(opts.fn))
  end
  self.fn = opts.fn
  self.verbose = util.check_count(who, "verbose", opts.verbose, 0)
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
function LrScheduler:_current_lr()
  local opt = optimizer_of(self.model)
  local state = self.model.optimizer_state
  if state and state.lr then return state.lr:item() end
  return opt.lr
end

function LrScheduler:_set_lr(lr)
  local opt = optimizer_of(self.model)
  opt.lr = lr  -- what the optimizer state starts from if it does not exist yet
  local state = self.model.optimizer_state
  if state and state.lr then state.lr = core.tensor(lr, {dtype = state.lr.dtype}) end
end

function LrScheduler:on_epoch_begin(epoch)
  local lr = self.fn(epoch, self:_current_lr())
  if not is_finite(lr) or lr <= 0 then
    fail("lr_scheduler: fn(%d, lr) must return a positive finite number, got %s", epoch, show(lr))
  end
  self:_set_lr(lr)
  if self.verbose > 0 then
    io.stdout:write(string.format("Epoch %d: lr_scheduler setting learning rate to %g.\n", epoch, lr))
  end
end

function LrScheduler:on_epoch_end(_epoch, logs)
  if logs then logs.learning_rate = self:_current_lr() end
end


return LrScheduler
