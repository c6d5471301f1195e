-- tpu.applications.ResNet50: Keras's parameter counts for the default configuration
-- (224x224x3, 1000 classes: 25,636,712, of which 53,120 non-trainable BatchNorm statistics) and
-- without the top (23,587,712); the layer count (176 layers besides the input, as Keras's 177
-- with its input layer) and the output shapes.
local tpu = require "tpu"
local apps = tpu.applications

local model = apps.ResNet50()
print(model.name, #model.layers, table.concat(model.output_shape, " "))
print(model:count_params())
local features = apps.ResNet50 {include_top = false, pooling = "avg"}
print(table.concat(features.output_shape, " "))
print(features:count_params())
local small = apps.ResNet50 {input_shape = {32, 32, 3}, classes = 10}
print(table.concat(small.output_shape, " "), small:count_params())
print(table.concat(apps.ResNet50 {include_top = false, input_shape = {64, 64, 3}}.output_shape, " "))
