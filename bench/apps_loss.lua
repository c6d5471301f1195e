-- Does an application learn? Trains a tpu.applications CNN from scratch on Fashion-MNIST
-- padded to 32x32 and repeated to 3 channels (10 classes), through the user's path (a tpu.data
-- pipeline with a traced map, compile, fit), and prints the mean training loss of every
-- `every` steps, then the test accuracy on 2000 test images.
--
--   build/tputrain bench/apps_loss.lua [model [steps [batch [every]]]]
--   defaults: ResNet50 300 32 25; model is any image builder of tpu.applications that takes
--   32x32 inputs (ResNet50, MobileNetV2, EfficientNetB0, NASNetMobile, VGG16, ...)
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data

local name = arg[1] or "ResNet50"
local steps = math.tointeger(tonumber(arg[2] or 300))
local batch = math.tointeger(tonumber(arg[3] or 32))
local every = math.tointeger(tonumber(arg[4] or 25))

local pad = nn.ZeroPadding2D(2)
local function prepare(x, y)
  local gray = pad((x:cast("f32") / 255):reshape {-1, 28, 28, 1})
  return tpu.concat({gray, gray, gray}, -1), y
end
local train = data.fashion_mnist("train"):shuffle(60000, {seed = 1})
  :batch(batch, {drop_remainder = true}):map(prepare):take(steps):prefetch(2)
local test = data.fashion_mnist("test"):take(2000):batch(250):map(prepare)

local model = tpu.applications[name] {input_shape = {32, 32, 3}, classes = 10}
model:compile {optimizer = optim.Adam {learning_rate = 1e-3}, loss = "sparse_categorical_crossentropy",
               metrics = {"accuracy"}}

local sum, window, t0 = 0, 0, tpu.core.now()
local curve = {on_batch_end = function(_, b, logs)
  -- logs.loss is the running mean over the epoch so far: recover this step's loss from it.
  window = window + logs.loss * b - sum
  sum = logs.loss * b
  if b % every == 0 then
    print(string.format("%s steps %4d-%4d: mean loss %.4f  (%.2f s/step)", name, b - every + 1, b,
      window / every, (tpu.core.now() - t0) / b))
    window = 0
  end
end}
model:fit(train, {epochs = 1, verbose = 0, callbacks = {curve}})
print(string.format("%s after %d steps of %d: test accuracy %.4f (2000 images)", name, steps, batch,
  model:evaluate(test, {verbose = 0}).accuracy))
