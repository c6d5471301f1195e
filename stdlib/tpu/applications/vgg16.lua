-- VGG16 (Simonyan and Zisserman, 2014) as Keras builds it: five blocks of 3x3 convolutions
-- ("same", relu) each ended by a 2x2 max pooling, then two Dense(4096) and the classifier.
-- 138,357,544 parameters at 224x224 with 1000 classes; 14,714,688 without the top.
--
--   local model = tpu.applications.VGG16 {input_shape = {32, 32, 3}, classes = 10}
local nn = require("tpu").nn
local common = require "tpu.applications.common"

local blocks = {{64, 2}, {128, 2}, {256, 3}, {512, 3}, {512, 3}}  -- filters, convolutions

return function(opts, extra)
  local a = common.args("VGG16", opts, {name = "vgg16", size = 224}, extra)
  local input = nn.Input {shape = a.input_shape}
  local x = input
  for b, block in ipairs(blocks) do
    for i = 1, block[2] do
      x = nn.Conv2D(block[1], 3, {activation = "relu", padding = "same",
                                  name = string.format("block%d_conv%d", b, i)})(x)
    end
    x = nn.MaxPool2D(2, {name = string.format("block%d_pool", b)})(x)
  end
  if a.include_top then
    x = nn.Flatten {name = "flatten"}(x)
    x = nn.Dense(4096, {activation = "relu", name = "fc1"})(x)
    x = nn.Dense(4096, {activation = "relu", name = "fc2"})(x)
    x = nn.Dense(a.classes, {activation = a.classifier_activation, name = "predictions"})(x)
  else
    x = common.pool(x, a.pooling)
  end
  return common.model(a, input, x)
end
