-- The benchmark MLP with tputrain: 784-512-512-10 (ReLU), Adam lr 1e-3, batch 256, one epoch of
-- Fashion-MNIST (234 full batches, after a short warm-up that also compiles the training step;
-- loading and preparing the data is not timed). Prints "samples/s: N" on its last line.
-- Run: build/tputrain bench/mlp_tputrain.lua  (or through bench/mlp_vs_pytorch.sh)
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data

local batch = 256

-- The whole training split in memory as f32 in [0, 1], in file order (as on the PyTorch side).
local x, y
for bx, by in data.fashion_mnist("train"):batch(60000):iter() do
  x, y = bx:reshape{-1, 784}:cast("f32") / 255, by
end
local train = data.from_tensors{x, y}:batch(batch, {drop_remainder = true})

local model = nn.Sequential {
  nn.Dense(512, {activation = "relu"}),
  nn.Dense(512, {activation = "relu"}),
  nn.Dense(10),
}
model:compile {optimizer = optim.Adam {lr = 1e-3}, loss = "sparse_categorical_crossentropy"}

model:fit(train:take(10), {epochs = 1, verbose = 0})  -- warm-up: compiles the step

local steps = x.shape[1] // batch
local start = tpu.core.now()
model:fit(train, {epochs = 1, verbose = 0})
local seconds = tpu.core.now() - start
print(string.format("epoch: %d steps in %.2f s", steps, seconds))
print(string.format("samples/s: %.0f", steps * batch / seconds))
