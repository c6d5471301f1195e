-- tpu.applications: the classic architectures as functions that return an nn.Model, with
-- Keras's names and arguments. Each builder is one short file made of the public layers, to be
-- read as an example of a functional model.
--
--   local apps = require("tpu").applications
--   local model = apps.ResNet50 {input_shape = {32, 32, 3}, classes = 10}
--   local features = apps.VGG16 {include_top = false, pooling = "avg"}
--   print(model:count_params())      -- total, trainable, non-trainable
--
-- Arguments (all optional): input_shape = {height, width, channels} (default {224, 224, 3},
-- Xception's {299, 299, 3}, NASNetLarge's {331, 331, 3}; at least 32x32, AlexNet 63x63,
-- Xception 71x71), include_top (default true: the classifier), classes (default 1000, with
-- the top only), pooling = "avg" | "max" (without the top: global pooling of the last feature
-- map; nil keeps the 4-D map), classifier_activation (default "softmax"), name. No pretrained
-- weights: weights = nil only; model:load(path) reads a safetensors file with matching names.
-- Builders load on first use.
local errors = require "tpu.errors"

local builders = {
  AlexNet = "tpu.applications.alexnet",
  VGG16 = "tpu.applications.vgg16",
  ResNet50 = "tpu.applications.resnet50",
  MobileNetV2 = "tpu.applications.mobilenet_v2",
  Xception = "tpu.applications.xception",
  EfficientNetB0 = "tpu.applications.efficientnet",
  NASNetMobile = "tpu.applications.nasnet",
  NASNetLarge = "tpu.applications.nasnet",
  BertBase = "tpu.applications.bert",
  GPT2Small = "tpu.applications.gpt2",
}

local function names()
  local list = {}
  for name in pairs(builders) do list[#list + 1] = name end
  table.sort(list)
  return table.concat(list, ", ")
end

-- pairs(tpu.applications) lists every builder (loading them), as for an ordinary table.
local function load_all(t)
  for name in pairs(builders) do local _ = t[name] end
  return next, t, nil
end

return setmetatable({}, {
  __pairs = load_all,
  __index = function(t, key)
    local path = builders[key]
    if not path then
      errors.fail("tpu.applications has no %s (it has %s)", tostring(key), names())
    end
    local m = require(path)
    local fn = type(m) == "function" and m or m[key]
    rawset(t, key, fn)
    return fn
  end,
})
