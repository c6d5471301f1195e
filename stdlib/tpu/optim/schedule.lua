-- Learning-rate schedules: lr as a function of the number of updates done, computed inside the
-- compiled step from the optimizer's step counter (a tensor), so the rate changes every step
-- without a recompile.
--
--   optim.Adam {lr = optim.schedule.cosine {lr = 1e-3, decay_steps = 10000, alpha = 0.01}}
--   optim.SGD {lr = optim.schedule.exponential {lr = 0.1, decay_steps = 1000, decay_rate = 0.5}}
--   local cosine = optim.schedule.cosine {lr = 3e-4, decay_steps = 9500}
--   optim.AdamW {lr = optim.schedule.warmup {warmup_steps = 500, after = cosine}}
-- A schedule is callable: sched(step) with an i32 tensor gives an f32 tensor; sched:value(n)
-- gives a number.
local core = require "tpu.core"
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local M = {}

local Schedule = {}
Schedule.__index = Schedule
Schedule.__call = function(self, step) return self.fn(step:cast("f32")) end
Schedule.__tostring = function(self) return self.text end

function Schedule:initial() return self.lr end

function Schedule:value(n)
  return self(core.tensor(n, {dtype = "i32"})):item()
end

local function make(lr, text, fn)
  return setmetatable({lr = lr, text = text, fn = fn}, Schedule)
end

function M.is_schedule(v) return getmetatable(v) == Schedule end

-- Keras's names for the starting rate (DESIGN section 3: a Keras user's first try must not
-- fail): its schedules take initial_learning_rate, its optimizers learning_rate.
local keras_names = {learning_rate = "lr", initial_learning_rate = "lr"}

local function check(who, opts, names, extra)
  errors.none(2, who, extra)
  if type(opts) == "table" then
    if opts.learning_rate ~= nil and opts.initial_learning_rate ~= nil then
      util.fail("schedule.%s: give learning_rate or initial_learning_rate, not both", who)
    end
    opts = errors.keras_names("schedule." .. who, opts, keras_names, names)
  end
  util.check_options({__name = "schedule." .. who}, opts or {}, names)
  return opts or {}
end

-- cos(pi t) for t in [0, 1] from the series of sin(u), u = pi (t - 1/2) in [-pi/2, pi/2]
-- (terms up to u^15: error below 1e-11), since the tensor library has no cos.
local function cos_pi(t)
  local u = (t - 0.5) * math.pi
  local u2 = u * u
  local acc = 1
  for k = 7, 1, -1 do acc = 1 - u2 * acc * (1 / ((2 * k) * (2 * k + 1))) end
  return -(u * acc)
end

-- lr * ((1 - alpha) * (1 + cos(pi * min(step, decay_steps) / decay_steps)) / 2 + alpha)
function M.cosine(opts, extra)
  opts = check("cosine", opts, {"lr", "decay_steps", "alpha"}, extra)
  local lr = util.check_positive("schedule.cosine", "lr", opts.lr)
  local steps = util.check_integer("schedule.cosine", "decay_steps", opts.decay_steps)
  local alpha = util.check_range("schedule.cosine", "alpha", errors.option(opts, "alpha", 0), 0, 1)
  local text = string.format("cosine(lr %g, decay_steps %d, alpha %g)", lr, steps, alpha)
  return make(lr, text, function(step)
    local cosine = (cos_pi(step:minimum(steps) * (1 / steps)) + 1) * 0.5
    return (cosine * (1 - alpha) + alpha) * lr
  end)
end

-- lr * decay_rate ^ (step / decay_steps); staircase: the exponent is whole.
function M.exponential(opts, extra)
  opts = check("exponential", opts, {"lr", "decay_steps", "decay_rate", "staircase"}, extra)
  local lr = util.check_positive("schedule.exponential", "lr", opts.lr)
  local steps = util.check_integer("schedule.exponential", "decay_steps", opts.decay_steps)
  local rate = util.check_positive("schedule.exponential", "decay_rate", opts.decay_rate)
  local staircase = util.flag("schedule.exponential", opts, "staircase", false)
  local text = string.format("exponential(lr %g, decay_steps %d, decay_rate %g%s)", lr, steps, rate,
    staircase and ", staircase" or "")
  return make(lr, text, function(step)
    local e = step * (1 / steps)
    if staircase then e = (step:cast("i32") // steps):cast("f32") end
    return (e * math.log(rate)):exp() * lr
  end)
end

-- Linear warmup: lr * (step + 1) / warmup_steps for the first warmup_steps updates, then `after`
-- (a schedule, started at 0 when the warmup ends) or the constant lr. With `after`, lr defaults
-- to after's initial rate.
function M.warmup(opts, extra)
  opts = check("warmup", opts, {"lr", "warmup_steps", "after"}, extra)
  local after = opts.after
  if after ~= nil and not M.is_schedule(after) then
    util.fail("schedule.warmup: after must be a schedule, got %s", util.show(after))
  end
  local lr = opts.lr
  if lr == nil and after then lr = after:initial() end
  lr = util.check_positive("schedule.warmup", "lr", lr)
  local steps = util.check_integer("schedule.warmup", "warmup_steps", opts.warmup_steps)
  local text = string.format("warmup(lr %g, warmup_steps %d%s)", lr, steps,
    after and ", then " .. tostring(after) or "")
  return make(lr, text, function(step)
    local warm = (step + 1):minimum(steps) * (lr / steps)
    if not after then return warm end
    return core.where(step:lt(steps), warm, after.fn((step - steps):maximum(0)))
  end)
end

-- A name tpu.optim.schedule lacks is an error listing the schedules it has.
return errors.strict_namespace(M, "tpu.optim.schedule")
