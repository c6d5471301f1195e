-- tpu.applications: bad arguments say which builder, which argument, what was expected and
-- what was received, at the user's line.
local tpu = require "tpu"
local apps = tpu.applications

local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or err)
end

try(function() apps.ResNet50 {input_shape = {32, 32}} end)
try(function() apps.ResNet50 {input_shape = {1, 32, 32, 3}} end)
try(function() apps.VGG16 {input_shape = {16, 16, 3}} end)
try(function() apps.AlexNet {input_shape = {32, 32, 3}} end)
try(function() apps.VGG16 {classes = 0} end)
try(function() apps.VGG16 {include_top = "no"} end)
try(function() apps.ResNet50 {pooling = "mean", include_top = false} end)
try(function() apps.ResNet50 {pooling = "avg"} end)
try(function() apps.ResNet50 {include_top = false, classes = 10} end)
try(function() apps.ResNet50 {weights = "imagenet"} end)
try(function() apps.VGG16 {input_size = 32} end)
try(function() apps.AlexNet {name = 3} end)
try(function() return apps.ResNet101 end)
