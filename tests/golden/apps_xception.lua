-- tpu.applications.Xception: Keras's parameter counts for the default configuration
-- (299x299x3, 1000 classes: 22,910,480, of which 54,528 non-trainable BatchNorm statistics) and
-- without the top (20,861,480); the layer count (133 besides the input, as Keras's 134 with its
-- input layer), Keras's names of the layers it leaves unnamed, the output shapes and the
-- smallest input (71x71).
local tpu = require "tpu"
local apps = tpu.applications

local model = apps.Xception()
print(model.name, #model.layers, table.concat(model.output_shape, " "))
print(model:count_params())
local names = {}
for _, layer in ipairs(model.layers) do
  if layer.name:match("^conv2d") or layer.name:match("^add") then names[#names + 1] = layer.name end
end
print(table.concat(names, " "))
local features = apps.Xception {include_top = false, input_shape = {71, 71, 3}}
print(table.concat(features.output_shape, " "), features:count_params())
print(select(2, pcall(apps.Xception, {input_shape = {70, 70, 3}})))
