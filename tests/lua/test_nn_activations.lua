-- Keras's other activations (elu, selu, leaky_relu, softplus, softsign, exponential, mish,
-- log_softmax) as tensor functions and as names for `activation=`: values against references
-- computed with torch in float64 (torch.nn.functional's elu, selu, leaky_relu, softplus,
-- softsign, mish, exp, log_softmax), gradients against finite differences.
local tpu = require "tpu"
local check = require "check"
local jacobian = require "jacobian"
local nn_check = require "nn_check"
local nn = tpu.nn
local rand = nn_check.rand

local T = {}

-- |got - want| <= tol * max(1, |want|) elementwise (exp(40) is large, softplus(-30) tiny).
local function close(got, want, tol, msg)
  check.eq(#got, #want, msg)
  for i = 1, #want do
    local err = math.abs(got[i] - want[i]) / math.max(1, math.abs(want[i]))
    if not (err <= tol) then
      error(string.format("%s: element %d is %.10g, want %.10g", msg, i, got[i], want[i]), 2)
    end
  end
end

local x = tpu.tensor {-30, -5, -1.5, -1e-4, 0.3, 1, 4, 40}

-- torch.nn.functional in float64 at the points of x
local want = {
  elu = {-1, -0.993262053, -0.7768698399, -9.999500017e-05, 0.3, 1, 4, 40},
  selu = {-1.758099341, -1.746253361, -1.365814353, -0.0001758011439, 0.3152102962, 1.050700987,
          4.202803949, 42.02803949},
  leaky_relu = {-6, -1, -0.3, -2e-05, 0.3, 1, 4, 40},
  softplus = {9.357622969e-14, 0.006715348489, 0.201413278, 0.6930971818, 0.8543552445, 1.313261688,
              4.018149928, 40},
  softsign = {-0.9677419355, -0.8333333333, -0.6, -9.9990001e-05, 0.2307692308, 0.5, 0.8, 0.9756097561},
  exponential = {9.357622969e-14, 0.006737946999, 0.2231301601, 0.999900005, 1.349858808, 2.718281828,
                 54.59815003, 2.353852668e+17},
  mish = {-2.807286891e-12, -0.03357623773, -0.2980997422, -5.999679998e-05, 0.2080013723, 0.8650983883,
          3.997412807, 40},
}

function T.tensor_function_values()
  for _, name in ipairs {"elu", "selu", "leaky_relu", "softplus", "softsign", "mish"} do
    close(x[name](x):totable(), want[name], 1e-6, name)
    close(tpu[name](x):totable(), want[name], 1e-6, "tpu." .. name)
  end
  -- small values keep their precision (no exp(x) - 1 or log(1 + u) rounding)
  check.near(x:elu():totable()[4] / -9.999500017e-05, 1, 1e-6)
  check.near(x:softplus():totable()[1] / 9.357622969e-14, 1, 1e-5)
  check.near(x:mish():totable()[1] / -2.807286891e-12, 1, 1e-5)
  close(x:elu {alpha = 0.5}:totable(), {-0.5, -0.4966310265, -0.3884349199, -4.999750008e-05, 0.3, 1, 4, 40},
    1e-6, "elu alpha 0.5")
  close(x:leaky_relu {negative_slope = 0.1}:totable(), {-3, -0.5, -0.15, -1e-05, 0.3, 1, 4, 40}, 1e-6,
    "leaky_relu 0.1")
end

function T.activation_names()
  for name, values in pairs(want) do
    close(nn.Activation(name)(x):totable(), values, 1e-6, name)
    check.eq(nn.Dense(2, {activation = name})(rand({3, 4})).shape, {3, 2}, name)
  end
  local m = tpu.tensor {{1, 2, -3}, {0.5, 0.5, 9}}
  check.near(nn.Activation("log_softmax")(m):totable(),
    {{-1.3181754292474541, -0.318175429247454, -5.318175429247454},
     {-8.500406853961723, -8.500406853961723, -0.00040685396172262053}}, 1e-6)
  check.eq(tostring(nn.Activation("mish")), "nn.Activation(mish)")
end

function T.gradients()
  -- away from the kinks at 0 of elu (alpha = 1 is smooth there anyway), selu and leaky_relu
  local v = tpu.tensor {{-6.5, -2.1, -0.7, -0.05}, {0.4, 1.3, 3.5, 9.0}}
  for _, name in ipairs {"elu", "selu", "leaky_relu", "softplus", "softsign", "mish"} do
    check.near(jacobian.max_error(function(t) return t[name](t) end, v), 0, 1e-2, name)
  end
  check.near(jacobian.max_error(function(t) return t:elu {alpha = 0.3} end, v), 0, 1e-2, "elu alpha")
  check.near(jacobian.max_error(function(t) return t:leaky_relu {negative_slope = 0.1} end, v), 0, 1e-2)
  -- finite gradients far out (no inf * 0 from the unused branch)
  local far = tpu.tensor {-100, -30, 30, 100}
  for _, name in ipairs {"elu", "selu", "softplus", "mish"} do
    local g = tpu.grad(function(t) return t[name](t):sum() end)(far):totable()
    for i, gi in ipairs(g) do check.eq(gi == gi and math.abs(gi) < math.huge, true, name .. " " .. i) end
  end
  -- torch in float64 at -100, -30, 30, 100
  close(far:elu():totable(), {-1, -1, 30, 100}, 1e-6, "elu far")
  close(far:softplus():totable(), {3.720075976e-44, 9.357622969e-14, 30, 100}, 1e-6, "softplus far")
  close(far:mish():totable(), {-3.720075976e-42, -2.807286891e-12, 30, 100}, 1e-6, "mish far")
  nn_check.gradients(nn.Dense(3, {activation = "mish"}), rand({2, 4}, 7))
  nn_check.gradients(nn.Dense(3, {activation = "selu"}), rand({2, 4}, 8))
end

function T.errors()
  check.raises(function() tpu.elu(3) end, "elu")
  check.raises(function() x:elu {alpha = "a"} end, "elu")
  check.raises(function() x:elu {slope = 1} end, "slope")
  check.raises(function() x:leaky_relu {alpha = 0.1} end, "alpha")
  check.raises(function() x:softplus(2) end, "softplus")
end

return T
