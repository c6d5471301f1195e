-- AlexNet as torchvision builds it (Keras has none), with Keras's arguments: five convolutions
-- (11x11 stride 4 after 2 rows/columns of zeros, 5x5, three 3x3; relu) with three 3x3 stride-2
-- max poolings, then Dropout(0.5), Dense(4096), Dropout(0.5), Dense(4096) and the classifier.
-- 61,100,840 parameters at 224x224 with 1000 classes; 2,469,696 without the top.
-- torchvision's adaptive average pooling to 6x6 before the classifier changes nothing at
-- 224x224 (the map is 6x6 already) and is left out: at other sizes the first Dense takes the
-- flattened map as it is, as Keras's VGG16 does. The smallest input is 63x63.
--
--   local model = tpu.applications.AlexNet {input_shape = {64, 64, 3}, classes = 10}
local nn = require("tpu").nn
local common = require "tpu.applications.common"

local function conv(x, filters, size, name, opts)
  opts = opts or {padding = "same"}
  opts.activation, opts.name = "relu", name
  return nn.Conv2D(filters, size, opts)(x)
end

local function pool(x, name) return nn.MaxPool2D(3, {strides = 2, name = name})(x) end

return function(opts, extra)
  local a = common.args("AlexNet", opts, {name = "alexnet", size = 224, min_size = 63}, extra)
  local input = nn.Input {shape = a.input_shape}
  local x = nn.ZeroPadding2D {padding = 2, name = "conv1_pad"}(input)
  x = pool(conv(x, 64, 11, "conv1", {strides = 4}), "pool1")
  x = pool(conv(x, 192, 5, "conv2"), "pool2")
  x = conv(x, 384, 3, "conv3")
  x = conv(x, 256, 3, "conv4")
  x = pool(conv(x, 256, 3, "conv5"), "pool5")
  if a.include_top then
    x = nn.Flatten {name = "flatten"}(x)
    x = nn.Dropout(0.5, {name = "dropout1"})(x)
    x = nn.Dense(4096, {activation = "relu", name = "fc1"})(x)
    x = nn.Dropout(0.5, {name = "dropout2"})(x)
    x = nn.Dense(4096, {activation = "relu", name = "fc2"})(x)
    x = nn.Dense(a.classes, {activation = a.classifier_activation, name = "predictions"})(x)
  else
    x = common.pool(x, a.pooling, true)  -- no Keras original: the named form
  end
  return common.model(a, input, x)
end
