-- Time to accuracy, tputrain's side (bench/time_to_accuracy.sh): the README's MLP recipe
-- (784-512-512-10 ReLU, Adam lr 1e-3, batch 256, Fashion-MNIST shuffled each epoch), evaluated
-- on the test set after every epoch until the accuracy reaches the target (default 0.88) or 20
-- epochs pass. Prints "epochs N accuracy A". --seed seeds the weights and the shuffle.
--
--   tputrain --seed 1 bench/tta_tputrain.lua [TARGET]
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data
local target = tonumber(arg and arg[1] or 0.88)

local function scale(x, y) return x:cast("f32") / 255, y end
local train = data.fashion_mnist("train"):shuffle(60000)
  :batch(256, {drop_remainder = true}):map(scale):prefetch(2)
local test = data.fashion_mnist("test"):batch(1000):map(scale)

local model = nn.Sequential {
  nn.Flatten(),
  nn.Dense(512, {activation = "relu"}),
  nn.Dense(512, {activation = "relu"}),
  nn.Dense(10),
}
model:compile {optimizer = optim.Adam {lr = 1e-3}, loss = "sparse_categorical_crossentropy",
  metrics = {"accuracy"}}
local accuracy, epochs = 0, 0
while accuracy < target and epochs < 20 do
  model:fit(train, {epochs = epochs + 1, initial_epoch = epochs, verbose = 0})
  epochs = epochs + 1
  accuracy = model:evaluate(test, {verbose = 0}).accuracy
end
print(string.format("epochs %d accuracy %.4f", epochs, accuracy))
