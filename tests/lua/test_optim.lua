-- Tests of tpu.optim against hand-computed updates.
local tpu = require "tpu"
local check = require "check"
local optim = tpu.optim

local T = {}

-- Runs `steps` updates of a one-parameter list [p0...] with the given gradient lists.
local function run(opt, p0, grads)
  local params = {tpu.tensor(p0)}
  local state = opt:init(params)
  for _, g in ipairs(grads) do
    params, state = opt:update(params, {tpu.tensor(g)}, state)
  end
  return params[1]:totable(), state
end

function T.sgd_plain()
  local p = run(optim.SGD {lr = 0.1}, {1, -2}, {{0.5, 1}})
  check.near(p[1], 0.95, 1e-6)
  check.near(p[2], -2.1, 1e-6)
end

function T.sgd_default_lr_is_0_01()
  local p = run(optim.SGD(), {1}, {{1}})
  check.near(p[1], 0.99, 1e-6)
end

function T.sgd_momentum_two_steps()
  -- v1 = -0.1*0.5 = -0.05, p1 = 0.95; v2 = 0.9*(-0.05) - 0.1*0.5 = -0.095, p2 = 0.855
  local p, state = run(optim.SGD {lr = 0.1, momentum = 0.9}, {1}, {{0.5}, {0.5}})
  check.near(p[1], 0.855, 1e-6)
  check.near(state.velocity[1]:totable()[1], -0.095, 1e-6)
  check.eq(state.step:item(), 2)
end

function T.sgd_nesterov()
  -- v1 = -0.05; p1 = 1 + 0.9*(-0.05) - 0.1*0.5 = 0.905
  local p = run(optim.SGD {lr = 0.1, momentum = 0.9, nesterov = true}, {1}, {{0.5}})
  check.near(p[1], 0.905, 1e-6)
end

-- Adam by the textbook formulas in double precision.
local function adam_reference(p, grads, lr, b1, b2, eps)
  local m, v = 0, 0
  for t, g in ipairs(grads) do
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    local alpha = lr * math.sqrt(1 - b2 ^ t) / (1 - b1 ^ t)
    p = p - alpha * m / (math.sqrt(v) + eps)
  end
  return p
end

function T.adam_first_step_moves_by_lr()
  local p = run(optim.Adam {lr = 1e-3}, {1}, {{0.5}})
  check.near(p[1], adam_reference(1, {0.5}, 1e-3, 0.9, 0.999, 1e-7), 1e-6)
  check.near(p[1], 0.999, 1e-6)
end

function T.adam_three_steps_two_elements()
  local grads = {{0.5, -1}, {0.1, 0.2}, {-0.3, 0.05}}
  local p = run(optim.Adam {lr = 0.01, beta1 = 0.8, beta2 = 0.99}, {1, 2}, grads)
  local g1, g2 = {}, {}
  for i, g in ipairs(grads) do g1[i], g2[i] = g[1], g[2] end
  check.near(p[1], adam_reference(1, g1, 0.01, 0.8, 0.99, 1e-7), 1e-5)
  check.near(p[2], adam_reference(2, g2, 0.01, 0.8, 0.99, 1e-7), 1e-5)
end

function T.state_is_tensors_only()
  local _, state = run(optim.Adam(), {1}, {{1}})
  check.is_true(tpu.is_tensor(state.step) and tpu.is_tensor(state.lr))
  check.eq(state.step.dtype, "i32")
  check.near(state.lr:item(), 1e-3, 1e-9)
  check.eq(#state.m, 1)
  check.eq(#state.v, 1)
end

function T.changing_lr_in_the_state_changes_the_step()
  local opt = optim.SGD {lr = 0.1}
  local params = {tpu.tensor {1}}
  local state = opt:init(params)
  state.lr = tpu.tensor(0.5)
  params = opt:update(params, {tpu.tensor {1}}, state)
  check.near(params[1]:totable()[1], 0.5, 1e-6)
end

function T.argument_errors()
  check.raises(function() optim.SGD {lr = -1} end,
    "SGD: lr must be a positive number or a schedule (optim.schedule.cosine{...}), got -1")
  check.raises(function() optim.SGD {lr = 0.1, momentum = 1.5} end, "momentum must be a number in %[0, 1%), got 1.5")
  check.raises(function() optim.Adam {beta1 = 1} end, "beta1 must be a number in %[0, 1%), got 1")
  check.raises(function() optim.Adam {learning_rat = 1} end, "unknown option 'learning_rat'")
  local opt = optim.SGD()
  check.raises(function() opt:update({tpu.tensor {1}}, {}, opt:init({tpu.tensor {1}})) end,
    "got 0 gradients for 1 parameters")
end

-- As Keras's Adam(0.001): the learning rate alone stands for the options table.
function T.learning_rate_alone_as_the_argument()
  for _, name in ipairs {"SGD", "Adam", "AdamW", "RMSprop"} do
    local opt = optim[name](0.25)
    check.eq(opt.lr, 0.25, name)
  end
  local cosine = optim.schedule.cosine {lr = 0.1, decay_steps = 10}
  check.eq(optim.Adam(cosine).lr, cosine)
  check.raises(function() optim.SGD(-1) end,
    "SGD: lr must be a positive number or a schedule (optim.schedule.cosine{...}), got -1")
  check.raises(function() optim.Adam "fast" end, "options must be a table")
end

-- NaN passed every "fail if v < lo" test, and inf every upper-bound-free one: a NaN epsilon
-- trained into a NaN loss blamed on the model.
function T.hyperparameters_must_be_finite()
  local nan, inf = 0 / 0, math.huge
  check.raises(function() optim.Adam {epsilon = nan} end, "Adam: epsilon must be a number >= 0")
  check.raises(function() optim.Adam {lr = inf} end, "Adam: lr must be a positive number or a schedule")
  check.raises(function() optim.SGD(nan) end, "SGD: lr must be a positive number or a schedule")
  check.raises(function() optim.SGD {clipnorm = nan} end, "SGD: clipnorm must be a positive number")
  check.raises(function() optim.AdamW {weight_decay = inf} end, "AdamW: weight_decay must be a number >= 0")
  check.raises(function() optim.RMSprop {rho = nan} end, "RMSprop: rho must be a number in [0, 1)")
  check.raises(function() optim.schedule.exponential {lr = 0.1, decay_steps = 10, decay_rate = nan} end,
    "decay_rate")
  check.raises(function() optim.schedule.cosine {lr = nan, decay_steps = 10} end, "schedule.cosine: lr must be")
  check.raises(function() tpu.callbacks.early_stopping {min_delta = nan} end,
    "early_stopping: min_delta must be a finite number")
end

-- A false (or any other non-number) is refused, naming the caller's line, never replaced by
-- the option's default.
function T.false_is_not_the_default()
  local cases = {
    {function() optim.Adam {epsilon = false} end, "Adam: epsilon must be a number >= 0, got false"},
    {function() optim.Adam {beta1 = false} end, "Adam: beta1 must be a number in [0, 1), got false"},
    {function() optim.AdamW {beta_2 = "0.9"} end, "AdamW: beta2 must be a number in [0, 1), got \"0.9\""},
    {function() optim.RMSprop {rho = false} end, "RMSprop: rho must be a number in [0, 1), got false"},
    {function() optim.RMSprop {momentum = false} end, "RMSprop: momentum must be a number in [0, 1), got false"},
    {function() optim.RMSprop {epsilon = false} end, "RMSprop: epsilon must be a number >= 0, got false"},
    {function() optim.SGD {momentum = false} end, "SGD: momentum must be a number in [0, 1), got false"},
    {function() optim.AdamW {weight_decay = false} end, "AdamW: weight_decay must be a number >= 0, got false"},
    {function() optim.schedule.cosine {lr = 1, decay_steps = 2, alpha = false} end,
     "schedule.cosine: alpha must be a number in [0, 1], got false"},
    {function() optim.schedule.warmup {lr = false, warmup_steps = 2, after = optim.schedule.cosine {lr = 1, decay_steps = 2}} end,
     "schedule.warmup: lr must be a positive number, got false"},
  }
  for _, case in ipairs(cases) do
    local msg = check.raises(case[1], (case[2]:gsub("[%[%]%(%)%.%-]", "%%%0")))
    check.is_true(msg:match("^test_optim.lua:%d+: ") ~= nil or msg:match("/test_optim.lua:%d+: ") ~= nil, msg)
  end
  check.eq({optim.Adam {}.epsilon, optim.RMSprop {}.rho, optim.SGD {}.momentum}, {1e-7, 0.9, 0})
end

function T.get_by_name()
  check.eq(optim.get("adam").__name, "Adam")
  check.eq(optim.get("AdamW").__name, "AdamW")
  check.eq(optim.get("rmsprop").__name, "RMSprop")
  check.eq(optim.get("SGD").lr, 0.01)
  local a = optim.Adam {lr = 0.1}
  check.eq(optim.get(a), a)
  check.raises(function() optim.get(optim.Adam) end, "is a class")
end

-- Runs updates of several parameters with given gradient lists (one list per step).
local function run_many(opt, p0s, steps)
  local params = {}
  for i, p in ipairs(p0s) do params[i] = tpu.tensor(p) end
  local state = opt:init(params)
  for _, gs in ipairs(steps) do
    local grads = {}
    for i, g in ipairs(gs) do grads[i] = tpu.tensor(g) end
    params, state = opt:update(params, grads, state)
  end
  local out = {}
  for i, p in ipairs(params) do out[i] = p:totable() end
  return out, state
end

function T.adamw_decays_then_adam()
  -- step t: p = p - lr wd p, then the Adam step
  local lr, wd, b1, b2, eps = 0.01, 0.1, 0.9, 0.999, 1e-7
  local p, m, v = 2, 0, 0
  local grads = {0.5, -0.25, 1}
  for t, g in ipairs(grads) do
    p = p - lr * wd * p
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    p = p - lr * math.sqrt(1 - b2 ^ t) / (1 - b1 ^ t) * m / (math.sqrt(v) + eps)
  end
  local got = run(optim.AdamW {lr = lr, weight_decay = wd}, {2}, {{0.5}, {-0.25}, {1}})
  check.near(got[1], p, 1e-6)
  check.eq(optim.AdamW().weight_decay, 0.004)
  check.raises(function() optim.AdamW {weight_decay = -0.1} end, "AdamW: weight_decay must be a number >= 0, got -0.1")
end

local function rmsprop_reference(p, grads, o)
  local v, a, mom = 0, 0, 0
  for _, g in ipairs(grads) do
    v = o.rho * v + (1 - o.rho) * g * g
    local denom = v
    if o.centered then
      a = o.rho * a + (1 - o.rho) * g
      denom = v - a * a
    end
    local inc = o.lr * g / math.sqrt(denom + 1e-7)
    if o.momentum > 0 then
      mom = o.momentum * mom + inc
      p = p - mom
    else
      p = p - inc
    end
  end
  return p
end

function T.rmsprop_plain_momentum_centered()
  local grads = {{0.5}, {-0.3}, {0.8}}
  local flat = {0.5, -0.3, 0.8}
  for _, o in ipairs {{lr = 0.01, rho = 0.9, momentum = 0, centered = false},
                      {lr = 0.01, rho = 0.8, momentum = 0.5, centered = false},
                      {lr = 0.02, rho = 0.9, momentum = 0.9, centered = true}} do
    local got, state = run(optim.RMSprop(o), {1}, grads)
    check.near(got[1], rmsprop_reference(1, flat, o), 1e-6)
    check.eq(state.momentum ~= nil, o.momentum > 0)
    check.eq(state.average_gradient ~= nil, o.centered)
  end
  -- the first step moves by lr / sqrt(1 - rho)
  check.near(run(optim.RMSprop {lr = 0.001}, {0}, {{2}})[1], -0.001 / math.sqrt(0.1), 1e-6)
  check.raises(function() optim.RMSprop {rho = 1} end, "RMSprop: rho must be a number in [0, 1), got 1")
  check.raises(function() optim.RMSprop {centered = 1} end, "RMSprop: centered must be true or false, got 1")
end

function T.global_clipnorm_scales_by_the_global_norm()
  -- gradients {3} and {4}: global norm 5, clipped to 1 -> {0.6}, {0.8}
  local got = run_many(optim.SGD {lr = 1, global_clipnorm = 1}, {{0}, {0}}, {{{3}, {4}}})
  check.near(got, {{-0.6}, {-0.8}}, 1e-6)
  -- under the limit nothing changes
  got = run_many(optim.SGD {lr = 1, global_clipnorm = 10}, {{0}, {0}}, {{{3}, {4}}})
  check.near(got, {{-3}, {-4}}, 1e-6)
  -- with Adam, clipping only rescales g, which Adam's first step ignores; the moments see it
  local _, state = run_many(optim.Adam {global_clipnorm = 1}, {{0, 0}}, {{{3, 4}}})
  check.near(state.m[1]:totable(), {0.06, 0.08}, 1e-6)
  check.raises(function() optim.Adam {global_clipnorm = 0} end, "Adam: global_clipnorm must be a positive number, got 0")
  check.eq(tostring(optim.SGD {lr = 0.1, global_clipnorm = 2}), "optim.SGD{lr = 0.1, global_clipnorm = 2}")
end

-- Keras's clipnorm clips each gradient by its own norm (it was the global norm: a small
-- gradient beside a large one was shrunk with it), and clipvalue each element.
function T.clipnorm_and_clipvalue_clip_each_gradient()
  local got = run_many(optim.SGD {lr = 1, clipnorm = 1}, {{0, 0}, {0}}, {{{3, 4}, {0.1}}})
  check.near(got, {{-0.6, -0.8}, {-0.1}}, 1e-6)
  got = run_many(optim.SGD {lr = 1, clipvalue = 0.5}, {{0, 0}, {0}}, {{{3, -0.25}, {-4}}})
  check.near(got, {{-0.5, 0.25}, {0.5}}, 1e-6)
  check.raises(function() optim.Adam {clipnorm = 0} end, "Adam: clipnorm must be a positive number, got 0")
  check.raises(function() optim.SGD {clipnorm = 1, clipvalue = 1} end,
    "SGD: give one of clipnorm, global_clipnorm and clipvalue, not several")
  check.eq(tostring(optim.SGD {lr = 0.1, clipvalue = 2}), "optim.SGD{lr = 0.1, clipvalue = 2}")
end

function T.schedules_by_formula()
  local s = optim.schedule
  local cos = s.cosine {lr = 0.1, decay_steps = 8, alpha = 0.1}
  for _, n in ipairs {0, 1, 3, 4, 7, 8, 100} do
    local c = 0.5 * (1 + math.cos(math.pi * math.min(n, 8) / 8))
    check.near(cos:value(n), 0.1 * ((1 - 0.1) * c + 0.1), 1e-7, "cosine at " .. n)
  end
  local ex = s.exponential {lr = 0.1, decay_steps = 4, decay_rate = 0.5}
  local st = s.exponential {lr = 0.1, decay_steps = 4, decay_rate = 0.5, staircase = true}
  for _, n in ipairs {0, 1, 4, 6, 9} do
    check.near(ex:value(n), 0.1 * 0.5 ^ (n / 4), 1e-7, "exponential at " .. n)
    check.near(st:value(n), 0.1 * 0.5 ^ (n // 4), 1e-7, "staircase at " .. n)
  end
  local wu = s.warmup {lr = 0.2, warmup_steps = 4}
  check.near({wu:value(0), wu:value(1), wu:value(3), wu:value(10)}, {0.05, 0.1, 0.2, 0.2}, 1e-7)
  local chain = s.warmup {warmup_steps = 2, after = s.exponential {lr = 0.4, decay_steps = 1, decay_rate = 0.5}}
  check.near({chain:value(0), chain:value(1), chain:value(2), chain:value(3)}, {0.2, 0.4, 0.4, 0.2}, 1e-7)
  check.eq(tostring(chain), "warmup(lr 0.4, warmup_steps 2, then exponential(lr 0.4, decay_steps 1, decay_rate 0.5))")
end

function T.schedule_runs_inside_one_compiled_step()
  local sched = optim.schedule.exponential {lr = 1, decay_steps = 1, decay_rate = 0.5}
  local opt = optim.SGD {lr = sched}
  local step = tpu.jit(function(params, state) return opt:update(params, {tpu.ones({1})}, state) end)
  local params = {tpu.zeros({1})}
  local state = opt:init(params)
  check.eq(state.lr, nil)  -- the rate is a function of state.step
  for _ = 1, 4 do params, state = step(params, state) end
  -- lr 1, 0.5, 0.25, 0.125 (the schedule at 0, 1, 2, 3 updates done)
  check.near(params[1]:totable(), {-1.875}, 1e-6)
  check.eq(step:stats().compiles, 1)
  check.eq(tostring(opt), "optim.SGD{lr = exponential(lr 1, decay_steps 1, decay_rate 0.5)}")
  -- Adam: each first-moment-normalised step moves by about the rate (1, then 0.5)
  -- (fit with a schedule: tests/golden/nn_fit_schedule.lua)
  local adam = optim.Adam {lr = sched}
  local adam_step = tpu.jit(function(p, s) return adam:update(p, {tpu.ones({4, 3})}, s) end)
  local ap = {tpu.ones({4, 3})}
  local ast = adam:init(ap)
  for _ = 1, 2 do ap, ast = adam_step(ap, ast) end
  check.near(ap[1]:totable()[1][1], 1 - 1 - 0.5, 1e-5)
end

function T.schedule_errors()
  local s = optim.schedule
  check.raises(function() s.cosine {lr = 0.1} end, "schedule.cosine: decay_steps must be a positive integer, got nil")
  check.raises(function() s.cosine {lr = 0.1, decay_steps = 10, alpha = 2} end,
    "schedule.cosine: alpha must be a number in [0, 1], got 2")
  check.raises(function() s.exponential {lr = 0.1, decay_steps = 10, decay_rate = 0} end,
    "schedule.exponential: decay_rate must be a positive number, got 0")
  check.raises(function() s.warmup {warmup_steps = 10} end, "schedule.warmup: lr must be a positive number, got nil")
  check.raises(function() s.warmup {lr = 1, warmup_steps = 10, after = 0.1} end,
    "schedule.warmup: after must be a schedule, got 0.1")
  check.raises(function() s.cosine {lr = 0.1, decay_steps = 10, steps = 1} end, "schedule.cosine: unknown option 'steps'")
end

-- A traced update's ops carry the optimizer's class and the line that built it, as a layer's
-- carry the layer's name and line; the step's own ops keep their own line.
function T.update_ops_are_labelled_with_the_optimizer_and_its_line()
  local here = debug.getinfo(1, "l").currentline
  local opt = optim.Adam {lr = 0.1}
  local params = {tpu.tensor {1, 2}}
  local step = tpu.jit(function(p, s) return opt:update(p, {p[1] * 2}, s) end, {optimize = false})
  step(params, opt:init(params))
  -- Places name the script as it was run (with its directory when given one).
  local update, own = "test_optim.lua:" .. (here + 1) .. " (Adam)", "test_optim.lua:" .. (here + 3)
  local function is(place, want) return place:sub(-#want) == want end
  local counts = {update = 0, own = 0}
  for place in step.last.exe:text():gmatch("# ([^\n]*)") do
    check.is_true(is(place, update) or is(place, own), place)
    local which = is(place, update) and "update" or "own"
    counts[which] = counts[which] + 1
  end
  check.is_true(counts.update >= 12, "the update's 12 ops per weight")
  check.is_true(counts.own >= 1, "the gradient's mul")
end

-- Two steps of `opt` on two weights, two biases and a bf16 vector, traced (each
-- parameter type's update traced once and applied as a fused template), traced without the
-- pipeline (op for op), and eager: the same bits every way.
local function two_steps(opt, how, where)
  local params = {tpu.tensor {{1, -2}, {0.5, 3}}, tpu.tensor {0.1, -0.2}, tpu.tensor {{-1, 2}, {4, 0}}, tpu.tensor {0, 1},
                  tpu.tensor({0.75, -1.5}, {dtype = "bf16"})}
  local grads = {tpu.tensor {{0.3, -1}, {2, 0.25}}, tpu.tensor {0.5, 1}, tpu.tensor {{1, 1}, {-3, 0.5}}, tpu.tensor {-2, 0.125},
                 tpu.tensor({0.5, 0.25}, {dtype = "bf16"})}
  local state = opt:init(params)
  local function step(p, g, s, ok) return opt:update(p, g, s, ok ~= nil and {where = ok} or nil) end
  if how ~= "eager" then step = tpu.jit(step, {optimize = how == "fused"}) end
  for k = 1, 2 do params, state = step(params, grads, state, where and tpu.tensor(where[k]) or nil) end
  local out = {}
  for i, p in ipairs(params) do out[i] = p:totable() end
  for _, name in ipairs(opt.slots) do
    for i, t in ipairs(state[name]) do out[#out + 1] = {name, i, t:totable()} end
  end
  return out
end

function T.traced_updates_are_the_eager_ones_bit_for_bit()
  for _, opt in ipairs {optim.Adam {lr = 0.1, clipnorm = 1}, optim.AdamW {lr = 0.05, global_clipnorm = 1},
                        optim.SGD {lr = 0.1, clipvalue = 0.01},
                        optim.SGD {lr = 0.1, momentum = 0.9, nesterov = true},
                        optim.RMSprop {lr = 0.01, momentum = 0.5, centered = true, clipnorm = 0.5}} do
    for _, where in ipairs {false, {true, false}} do
      local eager = two_steps(opt, "eager", where or nil)
      check.eq(two_steps(opt, "fused", where or nil), eager, tostring(opt))
      check.eq(two_steps(opt, "plain", where or nil), eager, tostring(opt))
    end
  end
end

-- Traced, a pure update_one (its class says pure_update = true) runs once per parameter type
-- (dtype and shape), and its update is applied to each parameter of that type; eager, or
-- without the flag (an update_one of its own that counts its calls, say), once per parameter.
function T.a_traced_update_traces_each_parameter_type_once()
  local calls = 0
  local function counted(pure, clipnorm)
    local Counted = optim.SGD:extend("Counted")
    Counted.pure_update = pure
    function Counted:update_one(p, g, slots, s)
      calls = calls + 1
      return optim.SGD.update_one(self, p, g, slots, s)
    end
    return Counted {lr = 0.5, momentum = 0.5, global_clipnorm = clipnorm}
  end
  local params = {tpu.ones {2, 3}, tpu.ones {3}, tpu.ones {2, 3}, tpu.ones {3}, tpu.ones {4}}
  local grads = {}
  for i, p in ipairs(params) do grads[i] = p * i end
  -- With global_clipnorm and `where` too: every argument a template takes (a failed template would
  -- fall back to tracing each parameter, and count more calls).
  -- A subclass that keeps its parent's update_one keeps its parent's flag; one that defines
  -- its own says it again.
  local function child_of(opt, own)
    local Child = getmetatable(opt):extend("Child")
    if own then
      function Child:update_one(...) return getmetatable(opt).update_one(self, ...) end
    end
    return Child {lr = 0.5, momentum = 0.5}
  end
  for _, case in ipairs {{true, 3}, {nil, 5}, {true, 3, 1e6}, {true, 3, nil, "child"}, {true, 5, nil, "own"}} do
    local opt = counted(case[1], case[3])
    if case[4] then opt = child_of(opt, case[4] == "own") end
    local state = opt:init(params)
    local step = tpu.jit(function(p, g, s, ok) return opt:update(p, g, s, {where = ok}) end)
    calls = 0
    local new = step(params, grads, state, tpu.tensor(true))
    check.eq(calls, case[2])
    check.eq(new[3]:totable(), {{-0.5, -0.5, -0.5}, {-0.5, -0.5, -0.5}})
    check.eq(new[5]:totable(), {-1.5, -1.5, -1.5, -1.5})
    calls = 0
    opt:update(params, grads, state)
    check.eq(calls, 5)
  end
end

-- An update_one that reads a traced value it was not given cannot be traced apart: it is
-- traced for each parameter in place, as it reads.
function T.an_update_reading_other_traced_values_still_traces()
  local Shifted = optim.SGD:extend("Shifted")
  Shifted.pure_update = true
  local shift
  function Shifted:update_one(p, g, slots, s)
    local new_p = optim.SGD.update_one(self, p, g, slots, s)
    return new_p + shift, {}
  end
  local opt = Shifted {lr = 1}
  local step = tpu.jit(function(p, g, s, by)
    shift = by
    return opt:update(p, g, s)
  end)
  local params = {tpu.tensor {1, 2}, tpu.tensor {3}}
  local new = step(params, {tpu.tensor {1, 1}, tpu.tensor {1}}, opt:init(params), tpu.tensor(10))
  check.eq(new[1]:totable(), {10, 11})
  check.eq(new[2]:totable(), {12})
end

-- update's `where`: the new parameters where the flag holds, the old ones where it does not;
-- the state advances either way.
function T.update_where_keeps_the_parameters_when_false()
  local opt = optim.Adam {lr = 0.1}
  local params = {tpu.tensor {1, 2}}
  local step = tpu.jit(function(p, g, s, ok) return opt:update(p, g, s, {where = ok}) end)
  local kept, state = step(params, {tpu.tensor {1, -1}}, opt:init(params), tpu.tensor(false))
  check.eq(kept[1]:totable(), {1, 2})
  check.eq(state.step:item(), 1)
  local moved = step(params, {tpu.tensor {1, -1}}, opt:init(params), tpu.tensor(true))
  check.near(moved[1]:totable()[1], 0.9, 1e-5)
  local eager = opt:update(params, {tpu.tensor {1, -1}}, opt:init(params), {where = tpu.tensor(false)})
  check.eq(eager[1]:totable(), {1, 2})
  check.raises(function() opt:update(params, {tpu.tensor {1, -1}}, opt:init(params), {where = true}) end,
    "Adam: update's where must be a bool scalar tensor, got true")
  check.raises(function() opt:update(params, {tpu.tensor {1, -1}}, opt:init(params), {when = 1}) end,
    "Adam: unknown option 'when'")
end

-- A step that differentiates through an update (a loss of the updated parameters) gets the
-- gradient of the fused update's nodes, which differentiate their bodies: the same as without
-- the pipeline, and as central differences.
function T.gradients_flow_through_a_traced_update()
  local opt = optim.Adam {lr = 0.1}
  local g0 = {tpu.tensor {0.3, -0.7}}
  local function after_update(p)
    local s = opt:init {tpu.zeros {2}}
    local new = opt:update(p, {p[1] * g0[1]}, s, {where = tpu.tensor(true)})
    return (new[1] * new[1]):sum()
  end
  local x = {tpu.tensor {0.5, -1.5}}
  local fused = tpu.jit(tpu.grad(after_update))(x)[1]:totable()
  local plain = tpu.jit(tpu.grad(after_update), {optimize = false})(x)[1]:totable()
  check.eq(fused, plain)
  for i = 1, 2 do
    local function at(d)
      local v = x[1]:totable()
      v[i] = v[i] + d
      return after_update({tpu.tensor(v)}):item()
    end
    check.near(fused[i], (at(1e-3) - at(-1e-3)) / 2e-3, 2e-2)
  end
end

-- weight_decay on Adam, SGD and RMSprop and amsgrad on Adam, as Keras 3: before each update
-- p = p - p * weight_decay * lr (Keras 3's BaseOptimizer._apply_weight_decay); amsgrad keeps
-- v_hat = max(v_hat, v) and divides by sqrt(v_hat). Three steps against a numpy reference of
-- Keras 3's update rules in float64 (p0 = {2, -1.5}; the gradients below).
local wd_steps = {{2.0, -0.2}, {0.1, 0.4}, {-0.05, 0.05}}

local function run_steps(opt)
  local params = {tpu.tensor {2.0, -1.5}}
  local state = opt:init(params)
  for _, g in ipairs(wd_steps) do params, state = opt:update(params, {tpu.tensor(g)}, state) end
  return params[1]:totable(), state
end

-- A user's optimizer may have a field named weight_decay of its own (and scalars without lr):
-- the built-in decay reads only what the weight_decay option set, so it is not applied again.
function T.a_custom_optimizer_with_its_own_weight_decay_field_is_not_decayed_twice()
  local Shrink = optim.Optimizer:extend("Shrink")
  Shrink.default_lr = 0.1
  function Shrink:__init(opts)
    opts = self:init_options(opts or {}, {"weight_decay"})
    self.weight_decay = opts.weight_decay or 0.5
    self.slots = {}
  end
  function Shrink:scalars(_state, _step, lr) return {rate = lr} end
  function Shrink:update_one(p, g, _slots, s)
    local rate = optim.Optimizer.like(s.rate, p)
    return p - rate * g - rate * self.weight_decay * p, {}
  end
  local opt = Shrink {}
  local params = {tpu.tensor {1.0}}
  params = opt:update(params, {tpu.tensor {0.0}}, opt:init(params))
  check.near(params[1]:totable(), {0.95}, 1e-7)
end

function T.weight_decay_as_keras()
  check.near(run_steps(optim.Adam {lr = 0.1, weight_decay = 0.05}), {1.74786899447, -1.45026477847}, 2e-6)
  check.near(run_steps(optim.Adam {lr = 0.1}), {1.77636854642, -1.47183803222}, 2e-6)
  check.near(run_steps(optim.SGD {lr = 0.1, weight_decay = 0.05}), {1.76719475, -1.5026118125}, 2e-6)
  check.near(run_steps(optim.SGD {lr = 0.1, weight_decay = 0.05, momentum = 0.9}), {1.41709475, -1.5045018125}, 2e-6)
  check.near(run_steps(optim.SGD {lr = 0.1, weight_decay = 0.05, momentum = 0.9, nesterov = true}),
    {1.26944525, -1.5268123625}, 2e-6)
  check.near(run_steps(optim.RMSprop {lr = 0.01, weight_decay = 0.05}), {1.96462367327, -1.49845563733}, 2e-6)
  check.near(run_steps(optim.RMSprop {lr = 0.01, weight_decay = 0.05, momentum = 0.5}),
    {1.94008232126, -1.48903243477}, 2e-6)
  check.eq({optim.Adam().weight_decay, optim.SGD().weight_decay, optim.RMSprop().weight_decay}, {0, 0, 0})
  check.raises(function() optim.SGD {weight_decay = -1} end, "SGD: weight_decay must be a number >= 0, got %-1")
  check.raises(function() optim.RMSprop {weight_decay = "a"} end, "RMSprop: weight_decay must be a number >= 0")
end

function T.adam_amsgrad_as_keras()
  local p, state = run_steps(optim.Adam {lr = 0.1, amsgrad = true})
  check.near(p, {1.77637850808, -1.47183803222}, 2e-6)
  check.near(state.v_hat[1]:totable(), {0.004006, 0.00020226004}, 1e-8)  -- the largest v seen, not the last
  check.near(state.v[1]:totable()[1], 0.0040060, 1e-5)
  check.eq(state.v[1]:totable()[1] < 0.004006 - 1e-8, true)
  check.near(run_steps(optim.Adam {lr = 0.1, amsgrad = true, weight_decay = 0.05}), {1.74787895614, -1.45026477847}, 2e-6)
  check.near(run_steps(optim.AdamW {lr = 0.1, amsgrad = true}), {1.7740877078, -1.47010409082}, 2e-6)
  check.eq(optim.Adam().amsgrad, false)
  check.eq(optim.Adam().slots, {"m", "v"})
  check.raises(function() optim.Adam {amsgrad = 1} end, "Adam: amsgrad must be true or false, got 1")
end

-- The options work inside fit's compiled step too (the update is traced there).
function T.weight_decay_and_amsgrad_in_fit()
  local x = tpu.random.normal(tpu.random.key(5), {16, 3})
  local y = x:sum {axis = 2, keepdims = true}
  for _, opt in ipairs {optim.Adam {lr = 0.05, weight_decay = 0.01, amsgrad = true},
                        optim.SGD {lr = 0.05, weight_decay = 0.01, momentum = 0.9},
                        optim.RMSprop {lr = 0.01, weight_decay = 0.01}} do
    local model = tpu.nn.Sequential {tpu.nn.Dense(1)}
    model:compile {optimizer = opt, loss = "mse"}
    local h = model:fit(x, y, {epochs = 5, batch_size = 4, verbose = 0})
    check.eq(h.history.loss[5] < h.history.loss[1], true, opt.__name)
  end
end

return T
