-- A CNN trained from a folder of images, the way Kaggle data comes: one subdirectory per class,
-- JPEG and PNG files, read by data.image_folder and augmented on the device (a random crop and
-- a random flip per image, traced into the compiled map). Without a directory it makes one
-- from the first 3000 Fashion-MNIST training images (half PNG, half JPEG) under $TMPDIR, once.
-- Test accuracy is measured on the 10000 Fashion-MNIST test images.
--
--   tputrain [--seed N] scripts/image_folder_cnn.lua [DIR] [--from-idx] [--smoke]
--
-- --from-idx trains the same CNN on the same images read from the IDX files instead, for
-- comparison (the folder's JPEGs are lossy, so the two differ a little); --smoke makes a small
-- folder and runs a few steps, to check that everything works.
local tpu = require "tpu"
local nn, data, image = tpu.nn, tpu.data, tpu.image

local smoke, from_idx, dir = false, false, nil
for _, a in ipairs(arg or {}) do
  if a == "--smoke" then smoke = true
  elseif a == "--from-idx" then from_idx = true
  else dir = a end
end
local count = smoke and 100 or 3000
local seed = (tpu.options or {}).seed or 0  -- --seed: the order, the augmentation, the weights
local epochs = smoke and 1 or 15

-- Sorted names in label order, so a class's index is its Fashion-MNIST label.
local CLASSES = {"0-tshirt", "1-trouser", "2-pullover", "3-dress", "4-coat", "5-sandal", "6-shirt",
  "7-sneaker", "8-bag", "9-boot"}

local function make_folder(path, n)
  print(string.format("Writing %d Fashion-MNIST images to %s", n, smoke and "a temporary folder" or path))
  local x, y = data.fashion_mnist("train"):take(n):batch(n):iter()()
  local labels = y:totable()
  for _, class in ipairs(CLASSES) do os.execute(string.format("mkdir -p '%s/%s'", path, class)) end
  for i = 1, n do
    local file = string.format("%s/%s/%05d", path, CLASSES[labels[i] + 1], i)
    local im = x:slice({{i, i}}):reshape {28, 28, 1}
    if i % 2 == 1 then image.write_png(file .. ".png", im) else image.write_jpeg(file .. ".jpg", im) end
  end
  io.open(path .. "/.complete", "w"):close()
end

local temporary
-- Removes the --smoke folder when the script ends, also by an error or Ctrl-C.
local remove_temporary <close> = setmetatable({}, {__close = function()
  if temporary then os.execute(string.format("rm -rf '%s'", temporary)) end
end})
if smoke and not dir and not from_idx then  -- a fresh folder, removed at the end
  temporary = os.tmpname()
  os.remove(temporary)
  dir = temporary
  make_folder(dir, count)
elseif not dir and not from_idx then
  dir = string.format("%s/tputrain-fashion-folder-%d", os.getenv("TMPDIR") or "/tmp", count)
  local done = io.open(dir .. "/.complete")
  if done then done:close() else make_folder(dir, count) end
end

-- The training images as f32 [28, 28, 1] with values 0..255 and i32 labels, shuffled each pass.
local source
if from_idx then
  source = data.fashion_mnist("train"):take(count):shuffle(count, {seed = seed})
else
  source = data.image_folder(dir, {image_size = {28, 28}, color = "grayscale", seed = seed})
end
local batches = source:batch(50, {drop_remainder = true})
if from_idx then
  batches = batches:map(function(x, y) return x:cast("f32"):reshape {-1, 28, 28, 1}, y:cast("i32") end)
end

-- A random 28x28 window of the image grown to 32x32, mirrored half of the time: a different
-- draw for every image of every epoch, the same for every run.
local train = batches:map(function(x, y, key)
  local k1, k2 = table.unpack(key:split(2))
  x = image.random_crop(image.resize(x, {32, 32}), {28, 28}, k1)
  return image.random_flip_left_right(x, k2), y
end, {seed = seed + 7}):prefetch(2)
if smoke then train = train:take(3) end

local test = data.fashion_mnist("test"):batch(1000)
  :map(function(x, y) return x:cast("f32"):reshape {-1, 28, 28, 1}, y:cast("i32") end)
if smoke then test = test:take(1) end

local model = nn.Sequential {
  nn.Input {shape = {28, 28, 1}},
  nn.Rescaling(1 / 255),
  nn.Conv2D(32, 3, {activation = "relu", padding = "same"}),
  nn.MaxPool2D(),
  nn.Conv2D(64, 3, {activation = "relu", padding = "same"}),
  nn.MaxPool2D(),
  nn.Flatten(),
  nn.Dropout(0.3),
  nn.Dense(128, {activation = "relu"}),
  nn.Dense(10),
}
-- The rate falls from 2e-3 to 0 over the run (a cosine), so the last epoch settles.
local lr = tpu.optim.schedule.cosine {lr = 2e-3, decay_steps = epochs * (count // 50)}
model:compile {optimizer = tpu.optim.Adam {lr = lr}, loss = "sparse_categorical_crossentropy",
  metrics = {"accuracy"}}
local t0 = tpu.core.now()
model:fit(train, {epochs = epochs, verbose = smoke and 0 or nil})
local fit_s = tpu.core.now() - t0
print(string.format("source: %s, %d images", from_idx and "IDX" or "image folder", count))
print(string.format("test accuracy: %.4f", model:evaluate(test, {verbose = 0}).accuracy))
local stats = train.prefetch_stats and train:prefetch_stats()
if stats and not smoke then
  local per_epoch = stats.batches * 50
  print(string.format("last epoch: %d images prepared in %.0f ms on the prefetch thread (%.0f images/s); "
    .. "training: %.0f samples/s; the loop waited %.0f ms for batches", per_epoch, stats.gather_ms,
    per_epoch / stats.gather_ms * 1000, epochs * per_epoch / fit_s, stats.wait_ms))
end
