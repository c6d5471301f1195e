-- tpu.applications.EfficientNetB0: Keras's parameter counts for the default configuration
-- (224x224x3, 1000 classes: 5,330,571, of which 42,023 non-trainable: the BatchNorm statistics
-- and the input Normalization's mean, variance and count) and without the top (4,049,571); the
-- layer count (239 besides the input), the input layers, the stochastic depth rates of the
-- blocks and the output shapes.
local tpu = require "tpu"
local apps = tpu.applications

local model = apps.EfficientNetB0()
print(model.name, #model.layers, table.concat(model.output_shape, " "))
print(model:count_params())
print(model.layers[1].name, model.layers[2].name, model.layers[2].mean.shape[1], model.layers[2].count.dtype)
local rates = {}
for _, layer in ipairs(model.layers) do
  if layer.name:match("drop$") then rates[#rates + 1] = string.format("%s=%.4f", layer.name, layer.rate) end
end
print(table.concat(rates, " "))
local features = apps.EfficientNetB0 {include_top = false, pooling = "avg", input_shape = {32, 32, 3}}
print(table.concat(features.output_shape, " "), features:count_params())
