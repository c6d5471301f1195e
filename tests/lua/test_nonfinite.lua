-- Tests of tpu.nn.nonfinite: finding the layer whose output went NaN or infinite, and the
-- traced guard that keeps a step's inputs when its loss is not finite.
local tpu = require "tpu"
local check = require "check"
local nonfinite = require "tpu.nn.nonfinite"
local util = require "tpu.nn.util"
local nn = tpu.nn

local T = {}

-- A layer that overflows to inf for any nonzero input.
local function boom()
  local Boom = nn.Module:extend("Boom")
  function Boom:call(x) return x * 1e30 * 1e30 end
  return Boom()
end

function T.all_finite_sees_nan_and_inf()
  check.is_true(nonfinite.all_finite(tpu.tensor {1, -2, 3e38}))
  check.is_true(not nonfinite.all_finite(tpu.tensor {1, 0 / 0}))
  check.is_true(not nonfinite.all_finite(tpu.tensor({1, math.huge}, {dtype = "bf16"})))
  check.is_true(nonfinite.all_finite(tpu.tensor({1, 2}, {dtype = "i32"})))
  check.is_true(nonfinite.all_finite(tpu.zeros {0, 3}))
end

function T.culprit_is_the_first_layer_whose_output_is_not_finite()
  nn.set_seed(1)
  local x = tpu.random.normal(tpu.random.key(2), {4, 3})
  local inner = nn.Sequential {nn.Dense(5), boom(), nn.Dense(2)}
  local m = nn.Sequential {nn.Dense(3, {activation = "relu"}), inner, nn.Dense(2)}
  m(x)
  local why = nonfinite.culprit(m, x, tpu.random.key(0))
  check.is_true(why:find("the first layer whose output is not finite is 'boom_", 1, true) ~= nil, why)
  check.is_true(why:find("(Boom, position 2.2 in the model)", 1, true) ~= nil, why)
  check.eq(rawget(inner.modules[2], "call"), nil, "the watch is removed")
  local fine = nn.Sequential {nn.Dense(2)}
  fine(x)
  check.is_true(nonfinite.culprit(fine, x):find("so the loss function made it", 1, true) ~= nil)
  fine:set_parameters {tpu.full({3, 2}, 0 / 0), tpu.zeros {2}}
  check.is_true(nonfinite.culprit(fine, x):find("the weight 'kernel' of layer 'dense_", 1, true) ~= nil)
end

function T.culprit_in_a_functional_model()
  local input = nn.Input {shape = {3}}
  local a = nn.Dense(4)(input)
  local b = boom()(a)
  local m = nn.Model {inputs = input, outputs = nn.Dense(1)(nn.Add()({a, b}))}
  local why = nonfinite.culprit(m, tpu.ones {2, 3})
  check.is_true(why:find("is 'boom_", 1, true) ~= nil, why)
end

function T.keep_if_finite_keeps_the_old_values_in_a_step()
  local step = tpu.jit(function(loss, old, new)
    return nonfinite.keep_if_finite(nonfinite.finite_flag(loss), {old, {x = old}}, {new, {x = new}})
  end)
  local old, new = tpu.tensor {1, 2}, tpu.tensor {3, 4}
  local a, b = step(tpu.tensor(0.5), old, new)
  check.eq(a:totable(), {3, 4})
  check.eq(b.x:totable(), {3, 4})
  a, b = step(tpu.tensor(0 / 0), old, new)
  check.eq(a:totable(), {1, 2})
  check.eq(b.x:totable(), {1, 2})
  check.eq(step(tpu.tensor {math.huge}, old, new):totable(), {1, 2})
  check.is_true(util.is_finite(1e308) and not util.is_finite(-math.huge) and not util.is_finite(0 / 0))
end

return T
