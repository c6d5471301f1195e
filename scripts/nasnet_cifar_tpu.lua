-- Keras's NASNetLarge(input_shape=(32,32,3), include_top=False) with a GlobalAveragePooling2D
-- and Dense(100) head (84,916,818 + 403,300 parameters), trained with Adam at batch
-- 128 on a TPU v2 of 8 cores: the scenario whose compile took 410 s on a Colab TPU and then hung.
-- The images are Fashion-MNIST's, padded to 32x32 and repeated to 3 channels inside the traced
-- map (it runs compiled, per batch); labels 0-9 of the 100-way head. Prints the train step's
-- trace + compile time, its HBM plan per core and the running loss after each step.
--
--   tputrain scripts/nasnet_cifar_tpu.lua [steps [batch [cores]]]    -- defaults: 5 128 8
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data

local steps = math.tointeger(tonumber(arg and arg[1] or 5))
local batch = math.tointeger(tonumber(arg and arg[2] or 128))
local cores = math.tointeger(tonumber(arg and arg[3] or 8))
assert(steps and batch and cores, "usage: nasnet_cifar_tpu.lua [steps [batch [cores]]] (integers)")

local strategy = tpu.strategy.TPU {cores = cores, version = "v2"}

-- u8 [b, 28, 28] -> f32 [b, 32, 32, 3]: a zero border of 2 and the gray channel three times.
local pad = nn.ZeroPadding2D(2)
local function prepare(x, y)
  local gray = pad((x:cast("f32") / 255):reshape {-1, 28, 28, 1})
  return tpu.concat({gray, gray, gray}, -1), y
end
local train = data.fashion_mnist("train")
  :shuffle(10000, {seed = 1})
  :batch(batch, {drop_remainder = true})
  :map(prepare)
  :take(steps)
  :prefetch(2)

local model
do
  local _ <close> = strategy:scope()
  local base = tpu.applications.NASNetLarge {input_shape = {32, 32, 3}, include_top = false}
  local input = nn.Input {shape = {32, 32, 3}}
  local features = nn.GlobalAveragePooling2D()(base(input))
  model = nn.Model {inputs = input, outputs = nn.Dense(100)(features), name = "nasnet_cifar"}
  model:compile {optimizer = optim.Adam {learning_rate = 1e-3},
                 loss = "sparse_categorical_crossentropy", metrics = {"accuracy"}}
  local total, trainable, frozen = model:count_params()
  print(string.format("NASNetLarge 32x32 + head: %d layers in the base, %d parameters (%d trainable, %d non-trainable)",
    #base.layers, total, trainable, frozen))
end

-- A plain table of hooks is a callback: it prints the running mean of the loss after each step
-- (two decimals: builds with other compiler flags round a 1000-layer network differently).
local show_loss = {on_batch_end = function(_, b, logs) print(string.format("step %d: loss %.2f", b, logs.loss)) end}
model:fit(train, {epochs = 1, verbose = 0, callbacks = {show_loss}})

local train_step = model:compile_stats().train
local gib = 2 ^ 30
print(string.format("train step: %d compile, trace + compile %.2f s (the seed's TPU compile: 410.46 s, then a hang)",
  train_step.compiles, train_step.compile_ms / 1000))
-- The plan counts buffers in TPU tiles of 8x128 (their last two dimensions padded), as HBM holds them.
print(string.format("HBM plan per core: %.2f GiB of the v2's 8 GiB (cores: %d, per-core batch %d)",
  train_step.hbm_bytes / gib, cores, batch // cores))
