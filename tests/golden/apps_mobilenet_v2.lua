-- tpu.applications.MobileNetV2: Keras's parameter counts for the default configuration
-- (alpha 1.0, 224x224x3, 1000 classes: 3,538,984, of which 34,112 non-trainable BatchNorm
-- statistics) and without the top (2,257,984); the layer count (155 besides the input, as
-- Keras's 156 with its input layer), the name Keras gives (it names the input size) and the
-- output shapes.
local tpu = require "tpu"
local apps = tpu.applications

local model = apps.MobileNetV2()
print(model.name, #model.layers, table.concat(model.output_shape, " "))
print(model:count_params())
local features = apps.MobileNetV2 {include_top = false, pooling = "max", input_shape = {96, 96, 3}}
print(features.name, table.concat(features.output_shape, " "))
print(features:count_params())
print(table.concat(apps.MobileNetV2 {include_top = false, input_shape = {33, 45, 3}}.output_shape, " "))
