-- ZeroPadding2D, Cropping2D and GlobalMaxPool2D: their argument errors (named layer and
-- argument, what was expected, what was received, at the user's line), print(model) and
-- summary(); count_params gives total, trainable and non-trainable as Keras's summary does.
local tpu = require "tpu"
local nn = tpu.nn

local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or err)
end

try(function() nn.ZeroPadding2D(-1) end)
try(function() nn.ZeroPadding2D {padding = {1, 2, 3}} end)
try(function() nn.ZeroPadding2D {padding = {{1, 2}, 3}} end)
try(function() nn.ZeroPadding2D(1, {padding = 2}) end)
try(function() nn.ZeroPadding2D {pading = 1} end)
try(function() nn.ZeroPadding2D(1)(tpu.zeros({1, 28, 28})) end)
try(function() nn.Cropping2D {cropping = 1.5} end)
try(function() nn.Cropping2D {cropping = {{1, 1}, {"a", 0}}} end)
try(function() nn.Cropping2D {cropping = {{2, 2}, {0, 0}}}(tpu.zeros({1, 4, 4, 1})) end)
try(function() nn.GlobalMaxPool2D {keepdims = "yes"} end)
try(function() nn.GlobalMaxPooling2D()(tpu.zeros({2, 3})) end)

local input = nn.Input {shape = {28, 28, 1}}
local x = nn.ZeroPadding2D {padding = {{3, 3}, {3, 3}}, name = "pad"}(input)
x = nn.Conv2D(8, 7, {strides = 2, use_bias = false})(x)
x = nn.BatchNorm()(x)
x = nn.Cropping2D {cropping = {1, 2}}(x)
x = nn.GlobalMaxPooling2D()(x)
local model = nn.Model {inputs = input, outputs = nn.Dense(10)(x), name = "spatial"}
print(model)
model:summary()
print(model:count_params())
