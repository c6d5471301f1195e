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
  check.raises(function() optim.SGD {lr = -1} end, "lr must be a positive number, got %-1")
  check.raises(function() optim.SGD {lr = 0.1, momentum = 1.5} end, "momentum must be a number in %[0, 1%), got 1.5")
  check.raises(function() optim.Adam {beta1 = 1} end, "beta1 must be a number in %[0, 1%), got 1")
  check.raises(function() optim.Adam {learning_rate = 1} end, "unknown option 'learning_rate'")
  local opt = optim.SGD()
  check.raises(function() opt:update({tpu.tensor {1}}, {}, opt:init({tpu.tensor {1}})) end,
    "got 0 gradients for 1 parameters")
end

function T.get_by_name()
  check.eq(optim.get("adam").__name, "Adam")
  check.eq(optim.get("SGD").lr, 0.01)
  local a = optim.Adam {lr = 0.1}
  check.eq(optim.get(a), a)
  check.raises(function() optim.get(optim.Adam) end, "is a class")
end

return T
