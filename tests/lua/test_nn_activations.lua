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
  nn_check.gradients(nn.Dense(3, {activation = "softplus"}), rand({2, 4}, 8))
end

function T.errors()
  check.raises(function() tpu.elu(3) end, "elu")
  check.raises(function() x:elu {alpha = "a"} end, "elu")
  check.raises(function() x:elu {slope = 1} end, "slope")
  check.raises(function() x:leaky_relu {alpha = 0.1} end, "alpha")
  check.raises(function() x:softplus(2) end, "softplus")
end

---------------------------------------------------------------- the activation layers

-- Keras's ReLU: keras.activations.relu's documented examples, and a combination computed with
-- numpy from its definition (where(x > t, x, 0), clipped to [0, max], minus slope * relu(t - x)).
function T.relu_layer_values()
  local v = tpu.tensor {-10, -5, 0, 5, 10}
  check.near(nn.ReLU()(v):totable(), {0, 0, 0, 5, 10}, 0)
  check.near(nn.ReLU {negative_slope = 0.5}(v):totable(), {-5, -2.5, 0, 5, 10}, 0)
  check.near(nn.ReLU {max_value = 5}(v):totable(), {0, 0, 0, 5, 5}, 0)
  check.near(nn.ReLU(5)(v):totable(), {0, 0, 0, 5, 5}, 0)
  check.near(nn.ReLU {threshold = 5}(v):totable(), {0, 0, 0, 0, 10}, 0)
  local w = tpu.tensor {-3, -0.5, 0.5, 1.5, 2, 7}
  check.near(nn.ReLU {negative_slope = 0.1, max_value = 6, threshold = 1}(w):totable(),
    {-0.4, -0.15, -0.05, 1.5, 2, 6}, 1e-6)
  check.near(nn.ReLU(6)(w):totable(), {0, 0, 0.5, 1.5, 2, 6}, 1e-6)  -- torch.clamp(x, 0, 6)
  check.eq(tostring(nn.ReLU()), "nn.ReLU()")
  check.eq(tostring(nn.ReLU {max_value = 6, negative_slope = 0.1, threshold = 1}),
    "nn.ReLU(max_value 6, negative_slope 0.1, threshold 1)")
  check.eq(nn.ReLU().name:match("^re_lu_%d+$") ~= nil, true)
end

-- torch.nn.functional.leaky_relu, elu and softmax in float64
function T.leaky_relu_elu_softmax_layer_values()
  local w = tpu.tensor {-3, -0.5, 0.5, 1.5, 2, 7}
  check.near(nn.LeakyReLU()(w):totable(), {-0.9, -0.15, 0.5, 1.5, 2, 7}, 1e-6)  -- Keras's layer default 0.3
  check.near(nn.LeakyReLU(0.1)(w):totable(), nn.LeakyReLU {negative_slope = 0.1}(w):totable(), 0)
  check.near(nn.LeakyReLU {alpha = 0.1}(w):totable(), {-0.3, -0.05, 0.5, 1.5, 2, 7}, 1e-6)
  check.near(nn.ELU(0.5)(w):totable(), {-0.475106465816068, -0.1967346701436833, 0.5, 1.5, 2, 7}, 1e-6)
  check.near(nn.ELU()(w):totable(), w:elu():totable(), 0)
  local m = tpu.tensor {{1, 2, -3}, {0.5, 0.5, 9}}
  check.near(nn.Softmax()(m):totable(), {{0.2676231541498624, 0.7274751568004648, 0.004901689049672922},
    {0.0002033856039364178, 0.0002033856039364178, 0.9995932287921272}}, 1e-6)
  check.near(nn.Softmax(1)(m):totable(), {{0.6224593312018546, 0.8175744761936437, 6.144174602214718e-06},
    {0.37754066879814546, 0.18242552380635632, 0.9999938558253978}}, 1e-6)
  check.near(nn.Softmax {axis = -2}(m):totable(), nn.Softmax(1)(m):totable(), 0)
  check.eq({tostring(nn.LeakyReLU()), tostring(nn.ELU()), tostring(nn.Softmax())},
    {"nn.LeakyReLU(0.3)", "nn.ELU(1)", "nn.Softmax(axis -1)"})
end

function T.activation_layers_in_models()
  local model = nn.Sequential {nn.Input {shape = {3}}, nn.Dense(4), nn.ReLU(6), nn.LeakyReLU(), nn.ELU(),
                               nn.Dense(2), nn.Softmax()}
  check.eq(model(rand({5, 3})).shape, {5, 2})
  local text = tostring(model)
  for _, want in ipairs {"nn.ReLU%(max_value 6%)", "nn.LeakyReLU%(0.3%)", "nn.ELU%(1%)", "nn.Softmax%(axis %-1%)"} do
    check.eq(text:match(want) ~= nil, true, want)
  end
  local summary = require("tpu.nn.summary")(model)  -- the text model:summary() prints
  for _, cls in ipairs {"ReLU", "LeakyReLU", "ELU", "Softmax"} do
    check.eq(summary:match("%(" .. cls .. "%)") ~= nil, true, cls)
  end
  -- a loss by name reads the logits behind the Softmax layer, as behind the activation
  model:compile {optimizer = "adam", loss = "categorical_crossentropy"}
  local h = model:fit(rand({8, 3}), tpu.one_hot(tpu.tensor({0, 1, 1, 0, 1, 0, 0, 1}, {dtype = "i32"}), 2),
    {epochs = 2, batch_size = 4, verbose = 0})
  check.eq(#h.history.loss, 2)
end

function T.activation_layer_gradients()
  -- away from each function's kinks (0, threshold 1, max_value 6)
  local v = tpu.tensor {{-6.5, -2.1, -0.7, 0.4}, {1.3, 2.6, 3.5, 9.0}}
  for _, layer in ipairs {nn.ReLU {negative_slope = 0.1, max_value = 6, threshold = 1}, nn.ReLU {negative_slope = 0.2},
                          nn.LeakyReLU(), nn.ELU(0.7), nn.Softmax(), nn.Softmax(1)} do
    check.near(jacobian.max_error(function(t) return layer(t) end, v), 0, 1e-2, tostring(layer))
  end
end

function T.activation_layer_errors()
  check.raises(function() nn.ReLU {max_value = -1} end, "ReLU: max_value must be a non%-negative number, got %-1")
  check.raises(function() nn.ReLU {negative_slope = -0.1} end, "ReLU: negative_slope must be")
  check.raises(function() nn.ReLU(6, {max_value = 5}) end, "ReLU: max_value given twice")
  check.raises(function() nn.LeakyReLU(0.1, "x") end, 'LeakyReLU: the argument after 0.1 must be a table of options, got "x"')
  check.raises(function() nn.Softmax(1, true) end, "Softmax: the argument after 1 must be a table of options, got true")
  check.raises(function() nn.ReLU {alpha = 1} end, "ReLU: unknown option 'alpha'")
  check.raises(function() nn.LeakyReLU {alpha = 0.1, negative_slope = 0.2} end, "not both")
  check.raises(function() nn.LeakyReLU(-1) end, "LeakyReLU: negative_slope must be a non%-negative number")
  check.raises(function() nn.ELU {alpha = "a"} end, "ELU: alpha must be a number")
  check.raises(function() nn.Softmax {axis = 0} end, "Softmax: axis must be a non%-zero integer")
  check.raises(function() nn.Softmax(3)(rand({2, 3})) end, "Softmax 'softmax_%d+': axis 3 is out of range")
  check.raises(function() nn.Softmax({}, 2) end, "Softmax")
end

return T
