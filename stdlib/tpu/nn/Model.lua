-- A functional model: the graph of layer calls between nn.Input tensors and outputs.
--
--   local image, meta = nn.Input {shape = {28, 28, 1}}, nn.Input {shape = {4}}
--   local h = nn.Flatten()(image)
--   local y = nn.Dense(10)(nn.Concatenate {axis = -1} {h, meta})
--   local model = nn.Model {inputs = {image, meta}, outputs = y}
--   model {x_image, x_meta}          -- several inputs: a list in the order of `inputs`
--
-- Several outputs (outputs = {a, b}) give a list of tensors. Layers called more than once
-- (shared layers) hold one set of weights.
local Module = require "tpu.nn.Module"
local Node = require "tpu.nn.Node"
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local Model = Module:extend("Model")
Model.token_wise = true  -- a container: its layers say whether model:generate may run them

-- A list with a hole ({nil, y}: a field that does not exist, such as a layer's `output`
-- before it was called on symbolic tensors) is an error naming the position, not a shorter list.
local function as_nodes(v, what)
  local list = Node._is(v) and {v} or v
  if type(list) ~= "table" or getmetatable(list) ~= nil or next(list) == nil then
    util.fail("Model: %s must be a symbolic tensor (from nn.Input or a layer called on one) "
      .. "or a list of them, got %s", what, util.show(v))
  end
  local n = 0
  for k in pairs(list) do
    if math.type(k) ~= "integer" or k < 1 then
      util.fail("Model: %s must be a list of symbolic tensors, got the key %s", what, util.show(k))
    end
    n = math.max(n, k)
  end
  for i = 1, n do
    local node = list[i]
    if node == nil then
      util.fail("Model: %s[%d] is nil, not a symbolic tensor (a layer's `output` is the "
        .. "symbolic tensor of its first call on symbolic tensors, nil before one)", what, i)
    elseif not Node._is(node) then
      util.fail("Model: %s[%d] is not a symbolic tensor, got %s", what, i, util.show(node))
    end
  end
  return list
end

-- The calls needed for the outputs, each after the calls it depends on.
local function order_calls(inputs, outputs)
  local is_input, seen, order = {}, {}, {}
  for i, n in ipairs(inputs) do
    if n.call then
      util.fail("Model: inputs[%d] ('%s') is not an nn.Input but the output of %s '%s'",
        i, n.name, n.call.layer.__name, n.call.layer.name)
    end
    if is_input[n] then util.fail("Model: input '%s' is listed twice", n.name) end
    is_input[n] = true
  end
  local function visit(n, out_name)
    if not n.call then
      if not is_input[n] then
        util.fail("Model: output '%s' depends on input '%s', which is not in inputs", out_name, n.name)
      end
      return
    end
    if seen[n.call] then return end
    seen[n.call] = true
    for _, m in ipairs(Node._list(n.call.inputs)) do visit(m, out_name) end
    order[#order + 1] = n.call
  end
  for _, n in ipairs(outputs) do visit(n, n.name) end
  return order
end

function Model:__init(spec)
  spec = spec or {}
  util.check_options(self, spec, {"inputs", "outputs", "name", "trainable"})
  self:init_common(spec)
  self.layers = self.modules  -- Keras's name (model.layers): the same list
  self.inputs, self.outputs = as_nodes(spec.inputs, "inputs"), as_nodes(spec.outputs, "outputs")
  self.single_input, self.single_output = Node._is(spec.inputs), Node._is(spec.outputs)
  -- Keras's model.input and model.output: the symbolic tensor, or the list of them.
  rawset(self, "input", self.single_input and self.inputs[1] or self.inputs)
  rawset(self, "output", self.single_output and self.outputs[1] or self.outputs)
  self.calls = order_calls(self.inputs, self.outputs)
  local seen = {}
  for _, c in ipairs(self.calls) do
    if not seen[c.layer] then
      seen[c.layer] = true
      self.modules[#self.modules + 1] = c.layer
    end
  end
  self.built = true
  self.input_shape = self.single_input and self.inputs[1].shape or util.shape_of(self.inputs)
  self.output_shape = self.single_output and self.outputs[1].shape or util.shape_of(self.outputs)
end

function Model:_check_input(x)
  local xs = self.single_input and {x} or x
  if type(xs) ~= "table" or util.is_tensor(xs) or #xs ~= #self.inputs then
    util.fail("Model '%s' expects %s, got %s", self.name, self.single_input and "a tensor"
      or string.format("a list of %d tensors (one per input)", #self.inputs), util.show(x))
  end
  for i, n in ipairs(self.inputs) do
    local t, ok = xs[i], util.is_tensor(xs[i]) and xs[i].ndim == #n.shape
    for d = 2, ok and #n.shape or 0 do
      ok = ok and (n.shape[d] == -1 or n.shape[d] == t.shape[d])
    end
    if not ok then
      -- a builder (tpu.applications) may say how to get a model for another shape
      local hint = rawget(self, "_input_hint")
      util.fail("Model '%s' expects input '%s' of shape %s, got %s%s", self.name, n.name,
        util.shape_text(n.shape), util.is_tensor(t) and util.describe(t) or util.show(t),
        hint and "; " .. hint or "")
    end
  end
end

function Model:call(x, ctx)
  local values = {}
  local xs = self.single_input and {x} or x
  for i, n in ipairs(self.inputs) do values[n] = xs[i] end
  for _, c in ipairs(self.calls) do
    local call_ctx = ctx
    if c.training == false and ctx.training then  -- recorded {training = false}
      call_ctx = setmetatable({training = c.training}, {__index = ctx, __newindex = ctx})
    end
    local y = c.layer(Node._map(c.inputs, function(n) return values[n] end), call_ctx)
    if Node._is(c.outputs) then
      values[c.outputs] = y
    else
      for i, n in ipairs(c.outputs) do values[n] = y[i] end
    end
  end
  if self.single_output then return values[self.outputs[1]] end
  local out = {}
  for i, n in ipairs(self.outputs) do out[i] = values[n] end
  return out
end

-- The layer named `name` (Keras's model.get_layer(name)), searched in model.layers; Sequential
-- has it too.
function Model:get_layer(name, extra)
  errors.none(2, "get_layer", extra)
  errors.check(1, "get_layer", name, "string")
  local names = {}
  for _, layer in ipairs(self.modules) do
    if layer.name == name then return layer end
    names[#names + 1] = layer.name
  end
  if #names == 0 then names[1] = "none" end
  if #names > 12 then names = {table.unpack(names, 1, 12)}; names[13] = "..." end
  local all = {}
  for i, layer in ipairs(self.modules) do all[i] = layer.name end
  util.fail("%s '%s' has no layer named '%s'%s (its layers: %s)", self.__name, self.name, name,
    errors.did_you_mean(name, all), table.concat(names, ", "))
end

function Model:compute_output_shape(_input_shape)
  return util.copy(self.output_shape)
end

-- The names of the nodes a call reads, for print and summary.
function Model._call_inputs(c)
  local names = {}
  for i, n in ipairs(Node._list(c.inputs)) do names[i] = n.name end
  return names
end

function Model:repr()
  local lines = {string.format("nn.Model {")}
  for _, n in ipairs(self.inputs) do
    local dims = {table.unpack(n.shape, 2)}
    for i, d in ipairs(dims) do dims[i] = d == -1 and "None" or tostring(d) end
    lines[#lines + 1] = string.format("  %s: nn.Input(%s%s)", n.name, table.concat(dims, ", "),
      n.dtype ~= "f32" and ", " .. n.dtype or "")
  end
  for i, c in ipairs(self.calls) do
    local outs = Node._is(c.outputs) and {c.outputs} or c.outputs
    local names = {}
    for k, n in ipairs(outs) do names[k] = n.name end
    local text = tostring(c.layer):gsub("\n", "\n  ")
    lines[#lines + 1] = string.format("  (%d): %s = %s(%s)", i, table.concat(names, ", "), text,
      table.concat(Model._call_inputs(c), ", "))
  end
  local outs = {}
  for i, n in ipairs(self.outputs) do outs[i] = n.name end
  lines[#lines + 1] = "  outputs: " .. table.concat(outs, ", ")
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n")
end

return Model
