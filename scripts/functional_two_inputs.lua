-- A functional model with two inputs and two outputs on Fashion-MNIST: a conv branch reads the
-- image, a dense branch reads row and column mean intensities; both join to predict the class
-- and, as a second output, whether the item is footwear (sandal, sneaker, ankle boot).
--
--   tputrain scripts/functional_two_inputs.lua            (--smoke: a few batches)
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data
local smoke = arg ~= nil and arg[1] == "--smoke"

-- inputs {image [n,28,28,1], stats [n,56]}, targets {class [n], footwear [n,1]}
local function prepare(x, y)
  local img = x:cast("f32") / 255
  local stats = tpu.concat({img:mean(3), img:mean(2)}, 2)
  local footwear = (y:ge(5):cast("f32") * (y % 2):eq(1):cast("f32")):reshape({-1, 1})
  return {img:reshape({-1, 28, 28, 1}), stats}, {y, footwear}
end
local train = data.fashion_mnist("train"):shuffle(60000, {seed = 1})
  :batch(128, {drop_remainder = true}):map(prepare)
local test = data.fashion_mnist("test"):batch(1000):map(prepare)
if smoke then train, test = train:take(3), test:take(1) end

local image = nn.Input {shape = {28, 28, 1}, name = "image"}
local stats = nn.Input {shape = {56}, name = "stats"}
local a = nn.MaxPool2D()(nn.Conv2D(16, 3, {activation = "relu"})(image))
a = nn.MaxPool2D()(nn.Conv2D(32, 3, {activation = "relu"})(a))
a = nn.Flatten()(a)
local b = nn.Dense(32, {activation = "relu"})(stats)
local h = nn.Dense(64, {activation = "relu"})(nn.Concatenate {axis = -1} {a, b})
local model = nn.Model {
  inputs = {image, stats},
  outputs = {nn.Dense(10, {name = "class"})(h),
             nn.Dense(1, {activation = "sigmoid", name = "footwear"})(h)},
}
print(model)
model:compile {
  optimizer = optim.Adam {lr = 1e-3},
  loss = {"sparse_categorical_crossentropy", "binary_crossentropy"},
  loss_weights = {1, 0.5},
  metrics = {{"accuracy"}, {"mse"}},
}
model:fit(train, {epochs = smoke and 1 or 2, validation_data = test})
local r = model:evaluate(test, {verbose = 0})
print(string.format("test class accuracy: %.4f, footwear mse: %.4f", r.class_accuracy, r.footwear_mse))
