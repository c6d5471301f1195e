-- A stack of layers, each feeding the next:
--
--   local model = nn.Sequential {nn.Flatten(), nn.Dense(512, {activation = "relu"}), nn.Dense(10)}
--   model:add(nn.Activation("softmax"))
--
-- As in Keras, the first entry may be nn.Input{shape=}: the model is then built at once (its
-- weights exist and summary() shows them before any data flows).
local Module = require "tpu.nn.Module"
local Node = require "tpu.nn.Node"
local util = require "tpu.nn.util"

local Sequential = Module:extend("Sequential")
Sequential.token_wise = true  -- a container: its layers say whether model:generate may run them

local function check_layer(layer, i)
  if type(layer) == "table" and rawget(layer, "__index") == layer and layer.__name then
    util.fail("Sequential: layer %d is the class %s, not a layer; call it: nn.%s()",
      i, layer.__name, layer.__name)
  end
  if Node._is(layer) then
    util.fail("Sequential: layer %d is an nn.Input; an Input can only come first", i)
  end
  if not Module.is_instance(layer) then
    util.fail("Sequential: layer %d is not a layer (nn.Module), got %s", i, util.show(layer))
  end
end

-- Sequential{layer, layer, ..., name = "mlp"}
function Sequential:__init(spec)
  spec = spec or {}
  util.check_options(self, spec, Module.common_options)
  self:init_common(spec)
  self.layers = self.modules  -- Keras's name (model.layers): the same list
  local input = Node._is(spec[1]) and spec[1] or nil
  for i = input and 2 or 1, #spec do
    check_layer(spec[i], i)
    self.modules[#self.modules + 1] = spec[i]
  end
  if input then
    self.declared_input = input.shape
    self:build(input.shape)
  end
end

function Sequential:add(layer)
  if Node._is(layer) and #self.modules == 0 and not self.built then  -- Keras: model.add(Input(...))
    self.declared_input = layer.shape
    self:build(layer.shape)
    return self
  end
  check_layer(layer, #self.modules + 1)
  if self.declared_input then  -- built from its Input: the new layer is built at once too
    table.insert(self.modules, layer)
    self:build(self.declared_input)
    return self
  end
  if self.built then
    util.fail("Sequential '%s': cannot add a layer after the model is built", self.name)
  end
  table.insert(self.modules, layer)
  return self
end

-- Builds every layer from the input shape alone, so no data has to flow (and nothing is traced).
function Sequential:build(input_shape)
  local shape = input_shape
  for _, layer in ipairs(self.modules) do
    layer:maybe_build(shape)
    shape = layer:compute_output_shape(shape)
    layer.output_shape = shape
  end
  self.built, self.input_shape, self.output_shape = true, util.copy(input_shape), shape
end

-- A model declared with nn.Input takes inputs of that shape only: a mismatch names both shapes
-- (data of the wrong size, say) instead of surfacing in some layer further down.
function Sequential:_check_input(x)
  local declared = self.declared_input
  if not declared or not util.is_tensor(x) then return Module._check_input(self, x) end
  local ok = x.ndim == #declared
  for d = 2, ok and #declared or 0 do ok = ok and (declared[d] == -1 or declared[d] == x.shape[d]) end
  if not ok then
    util.fail("Sequential '%s' expects input of shape %s (its nn.Input), got %s", self.name,
      util.shape_text(declared), util.describe(x))
  end
end

function Sequential:call(x, ctx)
  for _, layer in ipairs(self.modules) do x = layer(x, ctx) end
  return x
end

function Sequential:compute_output_shape(input_shape)
  local shape = input_shape
  for _, layer in ipairs(self.modules) do shape = layer:compute_output_shape(shape) end
  return shape
end

function Sequential:repr()
  local lines = {"nn.Sequential {"}
  for i, layer in ipairs(self.modules) do
    local text = tostring(layer):gsub("\n", "\n  ")
    lines[#lines + 1] = string.format("  (%d): %s", i, text)
  end
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n")
end

-- model:get_layer(name), as nn.Model's.
Sequential.get_layer = require("tpu.nn.Model").get_layer

return Sequential
