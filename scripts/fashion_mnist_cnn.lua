-- Fashion-MNIST with a small CNN: conv32-pool-conv64-pool-dense128-dense10, batch 128, two
-- epochs of Adam with a cosine learning-rate schedule, then the test accuracy (expect about
-- 0.90). "same" padding keeps the borders; inputs are standardized with the training set's
-- mean and deviation.
--
--   tputrain scripts/fashion_mnist_cnn.lua           -- the full run
--   tputrain scripts/fashion_mnist_cnn.lua --smoke   -- a few batches, to check that it runs
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data
local smoke = arg ~= nil and arg[1] == "--smoke"

-- u8 [n, 28, 28] images to standardized f32 NHWC [n, 28, 28, 1]
local function prepare(x, y)
  return ((x:cast("f32") / 255 - 0.2860) / 0.3530):reshape({-1, 28, 28, 1}), y
end

local train = data.fashion_mnist("train")
  :shuffle(60000, {seed = 1})
  :batch(128, {drop_remainder = true})
  :map(prepare)
local test = data.fashion_mnist("test"):batch(1000):map(prepare)
if smoke then train, test = train:take(4), test:take(1) end
local epochs = smoke and 1 or 2

local model = nn.Sequential {
  nn.Conv2D(32, 3, {activation = "relu", padding = "same"}),
  nn.MaxPool2D(),
  nn.Conv2D(64, 3, {activation = "relu", padding = "same"}),
  nn.MaxPool2D(),
  nn.Flatten(),
  nn.Dense(128, {activation = "relu"}),
  nn.Dense(10),
}
-- The rate falls from 2e-3 to 0 over the whole run, computed inside the compiled step.
local lr = optim.schedule.cosine {lr = 2e-3, decay_steps = epochs * train:cardinality()}
model:compile {
  optimizer = optim.Adam {lr = lr},
  loss = "sparse_categorical_crossentropy",
  metrics = {"accuracy"},
}
model:fit(train, {epochs = epochs, validation_data = test})
print(string.format("test accuracy: %.4f", model:evaluate(test, {verbose = 0}).accuracy))
