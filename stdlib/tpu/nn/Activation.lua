-- Applies an elementwise activation: nn.Activation("relu"). The same names are accepted by the
-- `activation=` option of other layers (Activation._get turns a name into a function).
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local Activation = Module:extend("Activation")
Activation.token_wise = true  -- each position on its own: model:generate may run it a token at a time
Activation.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

-- Output of a softmax or sigmoid activation -> {activation name, its input (the logits)}: a
-- loss given by name reads the logits (Keras's rule, tpu.losses). An output that a layer only
-- rearranged or dropped values of (Flatten, Reshape, Dropout) -> {name, from = that layer's
-- input, f = the layer applied to logits, or nil when no logits give it}. Weak keys: an
-- entry lives as long as the output tensor.
local made_by = setmetatable({}, {__mode = "k"})

local function remembered(name, fn)
  return function(x)
    local y = fn(x)
    made_by[y] = {name, x}
    return y
  end
end

-- The logits behind y when y is the output of the `name` activation ("softmax", "sigmoid"),
-- directly or through layers that carried it (_carry), and f gives them.
function Activation._logits_of(y, name)
  local m = made_by[y]
  if not m or m[1] ~= name then return nil end
  if not m.from then return m[2] end
  local z = m.f and Activation._logits_of(m.from, name)
  return z and m.f(z) or nil
end

-- "softmax" or "sigmoid" when y is the output of that activation (or carried from one), else nil.
function Activation._probability_activation(y)
  local m = made_by[y]
  return m and m[1] or nil
end

-- y is probabilities of the `name` kind ("softmax", "sigmoid") without logits a loss could
-- read instead (a softmax over another axis than the last, nn.Softmax(2)).
function Activation._mark_probabilities(y, name)
  made_by[y] = {name, from = y}
end

-- y, made from x by a layer that only moves, drops or scales its values, is probabilities
-- when x is. f(logits) applies that layer to x's logits; nil (Dropout in training), or a
-- softmax whose last axis the layer regrouped, leaves y probabilities without logits: a
-- softmax over the old rows is not one over the new.
function Activation._carry(x, y, f)
  local m = made_by[x]
  if not m or rawequal(x, y) then return end
  if m[1] == "softmax" and y.shape[y.ndim] ~= x.shape[x.ndim] then f = nil end
  made_by[y] = {m[1], from = x, f = f}
end

Activation.functions = {
  linear = function(x) return x end,
  relu = function(x) return x:relu() end,
  tanh = function(x) return x:tanh() end,
  sigmoid = remembered("sigmoid", function(x) return x:sigmoid() end),
  softmax = remembered("softmax", function(x) return x:softmax(-1) end),
  gelu = function(x) return x:gelu() end,
  -- the tanh approximation of GPT-2 and BERT's reference code (Keras's gelu(x, approximate=True))
  gelu_approximate = function(x) return x:gelu {approximate = true} end,
  relu6 = function(x) return x:relu6() end,
  swish = function(x) return x:swish() end,
  silu = function(x) return x:swish() end,
  hard_sigmoid = function(x) return x:hard_sigmoid() end,
  hard_swish = function(x) return x:hard_swish() end,
  hard_silu = function(x) return x:hard_swish() end,
  elu = function(x) return x:elu() end,
  selu = function(x) return x:selu() end,
  leaky_relu = function(x) return x:leaky_relu() end,  -- negative_slope 0.2, as Keras's
  softplus = function(x) return x:softplus() end,
  softsign = function(x) return x:softsign() end,
  exponential = function(x) return x:exp() end,
  mish = function(x) return x:mish() end,
  log_softmax = function(x) return x:log_softmax(-1) end,
}

local function known()
  local names = {}
  for k in pairs(Activation.functions) do names[#names + 1] = k end
  table.sort(names)
  return names
end

-- A name, nil ("linear") or a function(x) -> tensor.
function Activation._get(fn, who)
  if fn == nil then return Activation.functions.linear end
  if type(fn) == "function" then return fn end
  local f = Activation.functions[fn]
  if not f then
    util.fail("%sunknown activation %s%s (expected a function or one of: %s)",
      who and who .. ": " or "", util.show(fn), errors.did_you_mean(fn, known()), table.concat(known(), ", "))
  end
  return f
end

function Activation:__init(fn, opts)
  opts = opts or {}
  util.check_options(self, opts, Module.common_options)
  self:init_common(opts)
  self.fn = Activation._get(fn, "Activation")
  self.activation = type(fn) == "string" and fn or "custom"
end

function Activation:call(x, _ctx)
  return self.fn(x)
end

function Activation:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function Activation:repr()
  return "nn.Activation(" .. self.activation .. ")"
end

return Activation
