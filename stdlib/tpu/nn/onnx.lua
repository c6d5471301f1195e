-- model:export(path): the inference graph of a model as an ONNX file (opset 13).
--
--   model:export("mnist.onnx")
--
-- The graph has one input per model input (the batch dimension named "batch", the rest as the
-- model declares them) and one output per model output, with the weights as initializers
-- (f32; bf16 weights are widened). Dropout is the identity and BatchNorm uses its moving
-- statistics, as model:predict. A custom nn.Module exports when its class defines
-- export_onnx(onnx, x, out_shape), which builds its nodes with the Builder below; a layer with
-- no ONNX form (a custom nn.Module without it, a custom activation function) is an error naming
-- it. The file is written to a temporary file and renamed, as checkpoints are.
--
-- Layout: tputrain's images are NHWC (channels last) but ONNX's Conv, pools and
-- BatchNormalization are NCHW (channels first). Each value of the graph under construction
-- records its layout; a layer that needs the other one asks Graph:as_layout, which adds one
-- Transpose (once per value). Layers that do not care (activations, Add, Concatenate, pads,
-- global pools) work in the layout their input has, with their axes mapped. So a chain of
-- convolutions transposes once at its start and once where a layer needs channels last again
-- (Flatten, Dense, the model's outputs), which also keeps Flatten's element order.
--
-- This file builds the graph and writes the file; tpu.nn.onnx_layers has one emitter per
-- layer class; tpu.nn.protobuf encodes the messages.
local core = require "tpu.core"
local pb = require "tpu.nn.protobuf"
local util = require "tpu.nn.util"

local M = {}

M.OPSET = 13
local IR_VERSION = 7  -- the IR of ONNX 1.8, the release that introduced opset 13

-- ONNX TensorProto.DataType numbers of the dtypes a graph value can have.
local elem_types = {f32 = 1, u8 = 2, i32 = 6, i64 = 7, bool = 9}

---------------------------------------------------------------- the graph under construction

local Graph = {}
Graph.__index = Graph

function M.new_graph()
  return setmetatable({nodes = {}, initializers = {}, taken = {}, scalars = {}, weights = {}}, Graph)
end

-- A name no other value has, from `base` (a layer's name, "dense_1/kernel").
function Graph:unique(base)
  base = base:gsub("[^%w_%./:%-]", "_")
  local name, n = base, 0
  while self.taken[name] do n = n + 1; name = base .. "_" .. n end
  self.taken[name] = true
  return name
end

-- Where the error names the layer: its class, its name and the line that built it.
function M.layer_text(layer)
  local at = rawget(layer, "_built_at")
  return string.format("%s '%s'%s", layer.__name, layer.name,
    at and at ~= "" and " (built at " .. at .. ")" or "")
end

-- Raises the export error for `layer`: "model:export: <layer>: <why>".
function M.fail(layer, fmt, ...)
  util.fail("model:export: %s %s", M.layer_text(layer), string.format(fmt, ...))
end

local attribute_kinds = {float = 1, int = 2, string = 3, floats = 6, ints = 7}

-- An AttributeProto. A Lua integer is an INT, a float a FLOAT, a string a STRING, a list of
-- integers INTS; {floats = {...}} is FLOATS.
local function attribute(name, v)
  local parts = {pb.string(1, name)}
  local kind
  if math.type(v) == "integer" then kind = "int"; parts[2] = pb.int(3, v)
  elseif type(v) == "number" then kind = "float"; parts[2] = pb.float(2, v)
  elseif type(v) == "string" then kind = "string"; parts[2] = pb.bytes(4, v)
  elseif v.floats then
    kind = "floats"
    for i, x in ipairs(v.floats) do parts[i + 1] = pb.float(7, x) end
  else kind = "ints"; parts[2] = pb.ints(8, v) end
  parts[#parts + 1] = pb.int(20, attribute_kinds[kind])
  return table.concat(parts)
end

-- Adds a node op_type(inputs) -> outputs (lists of names) with attributes `attrs` (name ->
-- value).
function Graph:node(op_type, inputs, outputs, attrs)
  local keys = {}
  for k in pairs(attrs or {}) do keys[#keys + 1] = k end
  table.sort(keys)  -- a fixed order: the same model gives the same bytes
  local parts = {pb.strings(1, inputs), pb.strings(2, outputs), pb.string(3, outputs[1]),
                 pb.string(4, op_type)}
  for _, k in ipairs(keys) do parts[#parts + 1] = pb.message(5, attribute(k, attrs[k])) end
  self.nodes[#self.nodes + 1] = table.concat(parts)
end

-- Adds a node op_type(inputs) and returns the names of its `n_out` outputs (default 1), new
-- names made from `base` (the layer's name).
function Graph:op(op_type, inputs, attrs, base, n_out)
  local outs = {}
  for i = 1, n_out or 1 do outs[i] = self:unique(base .. "/" .. op_type) end
  self:node(op_type, inputs, outs, attrs)
  return table.unpack(outs)
end

-- Adds an initializer of `dims` and element type `dtype` whose little-endian bytes are `raw`.
function Graph:initializer(base, dims, dtype, raw)
  local name = self:unique(base)
  self.initializers[#self.initializers + 1] = table.concat {
    pb.ints(1, dims), pb.int(2, elem_types[dtype]), pb.string(8, name), pb.bytes(9, raw)}
  return name
end

-- The little-endian bytes of a list of numbers in string.pack's format `f` ("f", "i8").
local function pack(list, f)
  local parts, chunk = {}, 4096  -- table.unpack of a whole large list would overflow the stack
  for i = 1, #list, chunk do
    local j = math.min(i + chunk - 1, #list)
    parts[#parts + 1] = string.pack("<" .. f:rep(j - i + 1), table.unpack(list, i, j))
  end
  return table.concat(parts)
end

-- An f32 constant from a flat list of numbers and its dims.
function Graph:floats(base, list, dims)
  return self:initializer(base, dims, "f32", pack(list, "f"))
end

-- An int64 vector constant (shapes, pads, slice bounds).
function Graph:int64s(base, list)
  return self:initializer(base, {#list}, "i64", pack(list, "i8"))
end

-- A scalar int64 constant (an index, a bound of Range).
function Graph:int64(i)
  return self:initializer("index", {}, "i64", string.pack("<i8", i))
end

-- A scalar f32 constant, shared by every node that uses the same number.
function Graph:scalar(x)
  local key = string.pack("<d", x)
  self.scalars[key] = self.scalars[key] or self:floats("const", {x}, {})
  return self.scalars[key]
end

-- The little-endian bytes of an f32 tensor, copied by the engine (totable and string.pack
-- would take seconds for models of millions of weights: ResNet50 has 23 million).
local f32_bytes = core.f32_bytes

-- A weight tensor as an f32 initializer, optionally reshaped then transposed first (perm:
-- 1-based, as tensor:transpose's). Made once per tensor and form, so a layer called several
-- times (shared weights) writes each weight once.
function Graph:weight(base, t, reshape, perm)
  local key = table.concat(reshape or {}, ",") .. "/" .. table.concat(perm or {}, ",")
  self.weights[t] = self.weights[t] or {}
  local cached = self.weights[t][key]
  if cached then return cached end
  local value = t.dtype ~= "f32" and t:cast("f32") or t
  if reshape then value = value:reshape(reshape) end
  if perm then value = value:transpose(perm) end
  local name = self:initializer(base, value.shape, "f32", f32_bytes(value))
  self.weights[t][key] = name
  return name
end

---------------------------------------------------------------- values and layouts

-- A value of the graph: {name=, shape= (tputrain's order, channels last, batch first; -1 for
-- a size known only at run time), dtype=, layout = "last" | "first"}. Rank 2 and lower have
-- one layout; "first" moves the last axis of a rank >= 3 value to position 2 (NHWC -> NCHW).
function M.value(name, shape, dtype, layout)
  return {name = name, shape = shape, dtype = dtype or "f32", layout = #shape >= 3 and layout or "last"}
end

-- The permutation (0-based, ONNX's) from `v`'s layout to the other one.
local function swap_perm(v)
  local r, perm = #v.shape, {0}
  if v.layout == "last" then
    perm[2] = r - 1
    for i = 1, r - 2 do perm[i + 2] = i end
  else
    for i = 2, r - 1 do perm[i] = i end
    perm[r] = 1
  end
  return perm
end

-- v in `layout`: v itself, or a Transpose of it (made once and kept on v).
function Graph:as_layout(v, layout)
  if v.layout == layout or #v.shape < 3 then return v end
  if not v.other then
    local name = self:op("Transpose", {v.name}, {perm = swap_perm(v)}, v.name)
    v.other = M.value(name, v.shape, v.dtype, layout)
    v.other.other = v
  end
  return v.other
end

-- Where axis `a` (0-based, in tputrain's channels-last order) of v is in v's layout.
function M.axis(v, a)
  local r = #v.shape
  if a < 0 then a = a + r end
  if v.layout == "last" or a == 0 then return a end
  return a == r - 1 and 1 or a + 1
end

local Sequential = require "tpu.nn.Sequential"
local Model = require "tpu.nn.Model"
local Node = require "tpu.nn.Node"

-- fn over the values of tree x (a value, or a table holding values and other leaves).
local function map_values(x, fn)
  if type(x) ~= "table" then return x end
  if x.name then return fn(x) end
  local out = {}
  for k, v in pairs(x) do out[k] = map_values(v, fn) end
  return out
end

---------------------------------------------------------------- custom layers

-- What a custom layer's export_onnx(onnx, x, out_shape) builds its graph with: the values it
-- takes and returns are {name=, shape=, dtype=} (tputrain's axis order, channels last; -1 for
-- a size known only when the graph runs), the nodes are named after the layer.
local Builder = {}
Builder.__index = Builder

local function value_name(v, who)
  if v == "" then return v end  -- an optional input left out
  if type(v) ~= "table" or type(v.name) ~= "string" then
    util.fail("model:export: %s: expected a graph value, got %s", who, util.show(v))
  end
  return v.name
end

-- onnx:op(op_type, inputs, attributes, shape, dtype) -> the value of a new node op_type(inputs)
-- (opset 13) of tputrain shape `shape` and element type `dtype` (default "f32"). Attributes: a
-- Lua integer is an INT, a float a FLOAT, a string a STRING, a list of integers INTS.
function Builder:op(op_type, inputs, attrs, shape, dtype)
  local names = {}
  for i, v in ipairs(inputs) do names[i] = value_name(v, M.layer_text(self.owner)) end
  local name = self.g:op(op_type, names, attrs, self.owner.name)
  return M.value(name, shape, dtype or "f32", "last")
end

-- onnx:constant(numbers, dims, dtype) -> a constant: a number (dims {}) or a flat list, of
-- dtype "f32" (default) or "i64".
function Builder:constant(numbers, dims, dtype)
  local list = type(numbers) == "table" and numbers or {numbers}
  dims = dims or (type(numbers) == "table" and {#list} or {})
  local base = self.owner.name .. "/const"
  local name = dtype == "i64" and self.g:initializer(base, dims, "i64", pack(list, "i8"))
    or self.g:floats(base, list, dims)
  return M.value(name, dims, dtype or "f32", "last")
end

-- onnx:weight(tensor) -> a weight as an f32 initializer (written once, however many layers
-- use it).
function Builder:weight(t)
  return M.value(self.g:weight(self.owner.name .. "/weight", t), t.shape, "f32", "last")
end

-- onnx:layer(module, x) -> the value of an exportable module (a child layer) applied to x.
function Builder:layer(module, x)
  return map_values(M.emit(self.g, module, x), function(v) return self.g:as_layout(v, "last") end)
end

-- The value(s) of a layer whose class defines export_onnx, its inputs in channels-last layout.
local function emit_custom(g, layer, x, shape)
  local builder = setmetatable({g = g, owner = layer}, Builder)
  x = map_values(x, function(v) return g:as_layout(v, "last") end)
  local y = layer:export_onnx(builder, x, shape)
  local ok = type(y) == "table" and (y.name ~= nil or #y > 0)
  if not ok then M.fail(layer, "export_onnx returned %s, not a graph value", util.show(y)) end
  return y
end

---------------------------------------------------------------- the walk

-- The value(s) of `layer` applied to x (a value, or a tree of them for several inputs);
-- out_shape: tputrain's output shape, when known.
function M.emit(g, layer, x, out_shape)
  local cls = getmetatable(layer)
  if cls == Sequential then
    for _, child in ipairs(layer.modules) do x = M.emit(g, child, x) end
    return x
  end
  if cls == Model then return M.emit_model(g, layer, x) end
  local layers = require "tpu.nn.onnx_layers"  -- here: it requires this module
  local emit = layers[cls] or (type(layer.export_onnx) == "function" and emit_custom)
  if not emit then
    M.fail(layer, "has no ONNX form (a custom layer can define export_onnx); the exportable "
      .. "layers are %s", table.concat(layers.names(), ", "))
  end
  local shape = out_shape or layer:compute_output_shape(map_values(x, function(v) return v.shape end))
  return emit(g, layer, x, shape)
end

-- A functional model's calls replayed on values; inputs: a value or a list of them.
function M.emit_model(g, model, inputs)
  local values = {}
  local list = model.single_input and {inputs} or inputs
  for i, n in ipairs(model.inputs) do values[n] = list[i] end
  for _, c in ipairs(model.calls) do
    local x = Node._map(c.inputs, function(n) return values[n] end)
    local out_shape = Node._is(c.outputs) and c.outputs.shape or nil
    local y = M.emit(g, c.layer, x, out_shape)
    if Node._is(c.outputs) then values[c.outputs] = y
    else for i, n in ipairs(c.outputs) do values[n] = y[i] end end
  end
  if model.single_output then return values[model.outputs[1]] end
  local outs = {}
  for i, n in ipairs(model.outputs) do outs[i] = values[n] end
  return outs
end

---------------------------------------------------------------- the file

-- A ValueInfoProto for a graph input or output of `dtype` and tputrain shape `shape`.
local function value_info(name, shape, dtype)
  local dims = {}
  for i, d in ipairs(shape) do  -- a size known only at run time is named (dim_param), the rest given
    local named = (i == 1 or d < 0) and (i == 1 and "batch" or "dim_" .. i)
    dims[i] = pb.message(1, named and pb.string(2, named) or pb.int(1, d))
  end
  local tensor = pb.int(1, elem_types[dtype]) .. pb.message(2, table.concat(dims))
  return pb.string(1, name) .. pb.message(2, pb.message(1, tensor))
end

-- The element type of a graph input for an nn.Input's dtype: the graph computes in f32, so a
-- bf16 input is declared f32.
local input_dtypes = {f32 = "f32", bf16 = "f32", i32 = "i32", u8 = "u8", bool = "bool"}

-- The model's inputs as {name=, shape=, dtype=}, in the order model:predict takes them.
local function model_inputs(model)
  if getmetatable(model) == Model then
    local list = {}
    for i, n in ipairs(model.inputs) do list[i] = {name = n.name, shape = n.shape, dtype = n.dtype} end
    return list
  end
  local first = model
  while getmetatable(first) == Sequential and first.modules[1] do first = first.modules[1] end
  local dtype = rawget(model, "input_dtype") or (first.__name == "Embedding" and "i32" or "f32")
  return {{name = "input", shape = model.input_shape, dtype = dtype}}
end

local function check_built(model)
  if not model.built or not model.input_shape then
    util.fail("model:export: %s '%s' is not built (its input shape is unknown): declare its "
      .. "input (nn.Input first), call it once on a batch, model(x), or fit it first",
      model.__name, model.name)
  end
end

-- The graph's inputs as values, and their ValueInfoProtos.
local function graph_inputs(g, model)
  local values, infos = {}, {}
  for i, spec in ipairs(model_inputs(model)) do
    local shape = util.copy(spec.shape)
    shape[1] = -1
    local dtype = input_dtypes[spec.dtype]
    local name = g:unique(spec.name)
    infos[i] = value_info(name, shape, dtype)
    values[i] = M.value(name, shape, dtype, "last")
  end
  return values, infos
end

-- The argument the model's emitter takes: one value, or the list for several inputs.
local function model_argument(model, values)
  if getmetatable(model) == Model then return model.single_input and values[1] or values end
  return values[1]
end

-- Names the model's outputs ("output", or "output_1", ... for several) with Identity nodes,
-- in channels-last layout; returns their ValueInfoProtos.
local function graph_outputs(g, y)
  local ys = y.name and {y} or y
  local infos = {}
  for i, v in ipairs(ys) do
    v = g:as_layout(v, "last")
    local name = g:unique(#ys == 1 and "output" or "output_" .. i)
    g:node("Identity", {v.name}, {name})
    infos[i] = value_info(name, v.shape, v.dtype)
  end
  return infos
end

-- The ModelProto bytes of `model`'s inference graph.
function M.encode(model)
  check_built(model)
  local g = M.new_graph()
  local values, inputs = graph_inputs(g, model)
  local outputs = graph_outputs(g, M.emit(g, model, model_argument(model, values)))
  local graph = table.concat {pb.messages(1, g.nodes), pb.string(2, model.name),
    pb.messages(5, g.initializers), pb.messages(11, inputs), pb.messages(12, outputs)}
  return table.concat {pb.int(1, IR_VERSION), pb.string(2, "tputrain"), pb.string(3, require("tpu").version),
                       pb.message(7, graph), pb.message(8, pb.int(2, M.OPSET))}
end

-- model:export(path)
function M.export(model, path)
  if type(path) ~= "string" or path == "" then
    util.fail("model:export: expected a file path, got %s", util.show(path))
  end
  core.write_file_atomic(path, M.encode(model))
end

return M
