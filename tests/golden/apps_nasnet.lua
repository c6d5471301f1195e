-- tpu.applications.NASNetMobile and NASNetLarge: Keras's parameter counts for the default
-- configurations (224x224x3: 5,326,716, 36,738 non-trainable; 331x331x3: 88,949,818, 196,668
-- non-trainable; 1000 classes), NASNetLarge without the top at 32x32 (84,916,818, the same
-- without the top at any size), the layer counts (one layer per layer call of Keras's source,
-- the input aside) and the output shapes.
local tpu = require "tpu"
local apps = tpu.applications

local mobile = apps.NASNetMobile()
print(mobile.name, #mobile.layers, table.concat(mobile.output_shape, " "))
print(mobile:count_params())
local large = apps.NASNetLarge()
print(large.name, #large.layers, table.concat(large.output_shape, " "))
print(large:count_params())
local seed = apps.NASNetLarge {input_shape = {32, 32, 3}, include_top = false}
print(#seed.layers, table.concat(seed.output_shape, " "))
print(seed:count_params())
print(table.concat(apps.NASNetMobile {include_top = false, pooling = "avg", input_shape = {32, 32, 3}}.output_shape, " "))
