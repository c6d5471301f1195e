-- Symbolic tensors of the functional API. nn.Input{shape=} makes one; calling a layer on
-- symbolic tensors records the call and returns new symbolic tensors; nn.Model replays the
-- recorded calls.
--
--   local a, b = nn.Input {shape = {784}}, nn.Input {shape = {10}}
--   local h = nn.Dense(64, {activation = "relu"})(a)
--   local y = nn.Dense(10)(nn.Concatenate {axis = -1} {h, b})
--   local model = nn.Model {inputs = {a, b}, outputs = y}
--
-- A node knows its shape (batch first; -1 where the size is only known when the model runs),
-- its dtype, its name and `call = {layer=, inputs=<tree>, outputs=<node or list>}` (nil for an
-- input). Shapes and dtypes come from running the layer eagerly on zeros of that shape.
local class = require "tpu.class"
local core = require "tpu.core"
local util = require "tpu.nn.util"

local Node = class("Node")

function Node:__init(spec)
  self.shape, self.dtype, self.name, self.call = spec.shape, spec.dtype, spec.name, spec.call
  self.ndim = #spec.shape
end

function Node:__tostring()
  return string.format("symbolic %s%s '%s'", self.dtype, util.shape_text(self.shape), self.name)
end

-- Tensor methods and operators do not apply to symbolic tensors: say what to do instead.
local function not_a_tensor(what)
  return function()
    util.fail("%s on a symbolic tensor (from nn.Input): a functional model is made of layers; "
      .. "use a layer (nn.Add, nn.Concatenate, nn.Reshape, nn.Activation) or a custom nn.Module "
      .. "whose call does the tensor math", what)
  end
end
for _, op in ipairs {"__add", "__sub", "__mul", "__div", "__unm", "__pow"} do
  Node[op] = not_a_tensor("arithmetic")
end
getmetatable(Node).__index = function(_, key)
  if type(key) == "string" and core.Tensor[key] then
    return not_a_tensor(string.format("the tensor method '%s'", key))
  end
end

function Node._is(v) return getmetatable(v) == Node end

-- Whether the argument tree x holds a symbolic tensor.
function Node._contains(x)
  if Node._is(x) then return true end
  if type(x) ~= "table" or getmetatable(x) ~= nil then return false end
  for _, v in pairs(x) do
    if Node._contains(v) then return true end
  end
  return false
end

-- Maps fn over the nodes of tree x (other leaves stay).
function Node._map(x, fn)
  if Node._is(x) then return fn(x) end
  if type(x) ~= "table" or getmetatable(x) ~= nil then return x end
  local out = {}
  for k, v in pairs(x) do out[k] = Node._map(v, fn) end
  return out
end

-- The nodes of tree x in a fixed order (array part first, then named fields by name).
function Node._list(x, out)
  out = out or {}
  if Node._is(x) then out[#out + 1] = x; return out end
  if type(x) ~= "table" or getmetatable(x) ~= nil then return out end
  for _, v in ipairs(x) do Node._list(v, out) end
  local keys = {}
  for k in pairs(x) do
    if math.type(k) ~= "integer" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  for _, k in ipairs(keys) do Node._list(x[k], out) end
  return out
end

local function has_unknown(x)
  for _, n in ipairs(Node._list(x)) do
    for i = 2, #n.shape do
      if n.shape[i] == -1 then return true end
    end
  end
  return false
end

-- {shape=, dtype=} of a probe's output tensor, or a list of them (several outputs).
local function specs(y)
  if util.is_tensor(y) then return {shape = util.copy(y.shape), dtype = y.dtype} end
  local out = {}
  for i, t in ipairs(y) do out[i] = specs(t) end
  return out
end

-- The specs of the layer's output on inputs shaped like the nodes (-1 sizes become `size`): its weights are
-- built eagerly, then its call is traced on symbolic inputs and the trace dropped, so a large
-- model (VGG16 at 224x224) is declared without computing a forward pass. A layer whose call
-- cannot be traced (eager-only code in a custom layer) runs eagerly on zeros instead, which
-- also gives the errors their eager text.
local function probe(layer, x, size)
  local function shape(n)
    local s = {}
    for i, d in ipairs(n.shape) do s[i] = d == -1 and size or d end
    return s
  end
  if not layer.built and layer.maybe_build then
    layer:maybe_build(Node._map(x, shape))
  end
  local depth = core.trace_depth()
  core.trace_begin("functional_probe")
  local ok, y = pcall(function()
    return specs(layer(Node._map(x, function(n) return core.trace_param(n.dtype, shape(n)) end),
                       {training = false}))
  end)
  if core.trace_depth() > depth then core.trace_abort() end
  if ok then return y end
  return specs(layer(Node._map(x, function(n) return core.zeros(shape(n), {dtype = n.dtype}) end),
                     {training = false}))
end

-- Output shape of one probe result, with -1 where a second probe (other sizes) differs.
local function merged_shape(a, b)
  local shape = util.copy(a.shape)
  shape[1] = -1
  for i = 2, #shape do
    if b and b.shape[i] ~= shape[i] then shape[i] = -1 end
  end
  return shape
end

local calls = setmetatable({}, {__mode = "k"})  -- layer -> number of symbolic calls

-- layer(x) with symbolic tensors in x: the output node(s) of a new recorded call.
-- A second argument {training = false} (Keras's `base(x, training=False)`) is recorded: the
-- model runs that call in inference mode even in fit (BatchNorm on its moving statistics,
-- which it leaves alone, Dropout off). {training = true} is refused: the model would then need
-- a random key in every eager call, predict and evaluate, where none is passed.
function Node._apply(layer, x, ctx)
  local training
  if ctx ~= nil then
    local ok = type(ctx) == "table" and getmetatable(ctx) == nil and type(ctx.training) == "boolean"
    for k in pairs(ok and ctx or {}) do ok = ok and k == "training" end
    if not ok then
      util.fail("%s '%s' called on symbolic tensors with a second argument other than "
        .. "{training = false}, got %s: keys are chosen when the model runs",
        layer.__name, layer.name, util.show(ctx))
    end
    if ctx.training then
      util.fail("%s '%s' called on symbolic tensors with {training = true}: only {training = false} "
        .. "is recorded (inference mode whenever the model runs); the mode of the other calls is "
        .. "chosen when the model runs (fit trains, predict and evaluate infer)", layer.__name, layer.name)
    end
    training = false
  end
  local y = probe(layer, x, 2)
  local y2 = has_unknown(x) and probe(layer, x, 3) or nil
  calls[layer] = (calls[layer] or 0) + 1
  local base = calls[layer] == 1 and layer.name or layer.name .. "_" .. calls[layer]
  local record = {layer = layer, inputs = x, training = training}
  if y.shape then
    record.outputs = Node {shape = merged_shape(y, y2), dtype = y.dtype, name = base, call = record}
    layer.output_shape = record.outputs.shape
  else
    record.outputs = {}
    for i, t in ipairs(y) do
      record.outputs[i] = Node {shape = merged_shape(t, y2 and y2[i]), dtype = t.dtype,
                                name = string.format("%s[%d]", base, i), call = record}
    end
    layer.output_shape = util.shape_of(record.outputs)
  end
  -- Keras's layer.input and layer.output: those of the layer's first symbolic call.
  if rawget(layer, "output") == nil then
    rawset(layer, "input", x)
    rawset(layer, "output", record.outputs)
  end
  return record.outputs
end

return Node
