-- tpu.applications.VGG16: Keras's parameter counts (total, trainable, non-trainable) for the
-- default configuration (224x224x3, 1000 classes: 138,357,544) and without the top
-- (14,714,688), and the output shapes of each form.
local tpu = require "tpu"
local apps = tpu.applications

local model = apps.VGG16()
print(model.name, #model.layers, table.concat(model.output_shape, " "))
print(model:count_params())
local features = apps.VGG16 {include_top = false, pooling = "max", input_shape = {64, 48, 3}}
print(table.concat(features.output_shape, " "))
print(features:count_params())
print(table.concat(apps.VGG16 {include_top = false, input_shape = {32, 32, 3}}.output_shape, " "))
