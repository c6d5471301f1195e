-- tpu.applications.AlexNet (torchvision's architecture, Keras's arguments): 61,100,840
-- parameters at 224x224x3 with 1000 classes, 2,469,696 without the top; the summary of a
-- small configuration shows its layers.
local tpu = require "tpu"
local apps = tpu.applications

local model = apps.AlexNet()
print(model.name, #model.layers, table.concat(model.output_shape, " "))
print(model:count_params())
local features = apps.AlexNet {include_top = false, pooling = "avg"}
print(table.concat(features.output_shape, " "))
print(features:count_params())
apps.AlexNet {input_shape = {64, 64, 3}, classes = 10}:summary()
