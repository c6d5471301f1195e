-- Fashion-MNIST with a 784-512-512-10 ReLU MLP: two epochs of Adam, then the test accuracy.
-- Expect about 0.86 test accuracy, and the same losses on every run.
--
--   tputrain scripts/fashion_mnist_mlp.lua
--   tputrain --cores 8 scripts/fashion_mnist_mlp.lua    (8 simulated TPU cores, same global batch)
--   tputrain scripts/fashion_mnist_mlp.lua --smoke      (a few batches, to check that it runs)
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data
local smoke = arg ~= nil and arg[1] == "--smoke"

local function scale(x, y) return x:cast("f32") / 255, y end

local train = data.fashion_mnist("train")
  :shuffle(60000, {seed = 1})
  :batch(256, {drop_remainder = true})
  :map(scale)
local test = data.fashion_mnist("test"):batch(1000):map(scale)
if smoke then train, test = train:take(5), test:take(1) end

local strategy = tpu.strategy.auto()  -- TPU{cores = N} with --cores N, else one core
local model
do
  local _ <close> = strategy:scope()
  model = nn.Sequential {
    nn.Flatten(),
    nn.Dense(512, {activation = "relu"}),
    nn.Dense(512, {activation = "relu"}),
    nn.Dense(10),
  }
  model:compile {
    optimizer = optim.Adam {lr = 1e-3},
    loss = "sparse_categorical_crossentropy",
    metrics = {"accuracy"},
  }
end
model:fit(train, {epochs = smoke and 1 or 2, validation_data = test})
print(string.format("test accuracy: %.4f", model:evaluate(test, {verbose = 0}).accuracy))
