-- Keras's LearningRateScheduler(schedule, {verbose=}) (or {schedule=, verbose=}): LrScheduler,
-- except that schedule(epoch, lr) gets the epoch counted from 0, as Keras passes it
-- (lr_scheduler's fn counts from 1, as fit prints the epochs).
local LrScheduler = require "tpu.callbacks.LrScheduler"
local errors = require "tpu.errors"

local LearningRateScheduler = LrScheduler:extend("LearningRateScheduler")

function LearningRateScheduler:__init(schedule, opts)
  local who = "LearningRateScheduler"
  if type(schedule) == "function" then
    if opts ~= nil and (type(opts) ~= "table" or getmetatable(opts) ~= nil) then
      errors.type_error(2, who, "option table", opts)
    end
    local copy = {}
    for k, v in pairs(opts or {}) do copy[k] = v end
    if copy.schedule ~= nil or copy.fn ~= nil then errors.fail("%s: the schedule is given twice", who) end
    copy.fn, opts = schedule, copy
  else
    errors.none(2, who, opts)
    opts = schedule
  end
  LrScheduler.__init(self, opts)
  local fn = self.fn
  self.fn = function(epoch, lr) return fn(epoch - 1, lr) end
end

return LearningRateScheduler
