-- tpu.image and data.image_folder: the traced augmentations against plain Lua references,
-- determinism of map {seed =}, folders made from Fashion-MNIST (PNG and JPEG), label modes,
-- splits, prefetch, and the errors.
local tpu = require "tpu"
local data, image = tpu.data, tpu.image
local check = require "check"
local util = require "data_util"
local jacobian = require "jacobian"

local tests = {}

-- Directories the tests make, removed after each test.
local made = {}
local function temp_dir()
  local dir = util.temp_dir()
  made[#made + 1] = dir
  return dir
end

local function quiet(opts)
  opts.verbose = false
  return opts
end

-- A folder of n Fashion-MNIST test images (odd ones PNG, even ones JPEG at quality 100), one
-- subdirectory per class; returns the directory and the u8 images and labels it holds.
local NAMES = {"tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"}
local function fashion_folder(n, only_png)
  local dir = temp_dir()
  local x, y = data.fashion_mnist("test"):take(n):batch(n):iter()()
  local labels = y:totable()
  for i = 1, n do
    local class = dir .. "/" .. NAMES[labels[i] + 1]
    os.execute("mkdir -p " .. class)
    local im = x:slice {{i, i}}:reshape {28, 28, 1}
    if i % 2 == 1 or only_png then image.write_png(string.format("%s/%04d.png", class, i), im)
    else image.write_jpeg(string.format("%s/%04d.jpg", class, i), im, {quality = 100}) end
  end
  return dir, x, labels
end

local function max_abs(a, b) return (a:cast("f32") - b:cast("f32")):abs():max():item() end

---------------------------------------------------------------- tpu.image

tests["resize traced equals eager and matches the reader's resize"] = function()
  local dir = fashion_folder(6, true)
  local ds = data.image_folder(dir, quiet {image_size = {20, 36}, color = "grayscale", shuffle = false})
  local batch = ds:batch(6):iter()()
  local originals = {}
  for i, path in ipairs(ds.file_paths) do originals[i] = image.read(path, {color = "grayscale"}) end
  local x = tpu.stack(originals, 1)
  local eager = image.resize(x, {20, 36})
  local traced = tpu.jit(function(v) return image.resize(v, {20, 36}) end)(x)
  check.near(max_abs(eager, traced), 0, 1e-4)
  check.near(max_abs(eager, batch), 0, 1e-3)
  -- Without antialias, shrinking 2x samples two neighbours: a mean of each pair.
  local row = tpu.tensor({0, 4, 8, 12}):reshape {1, 4, 1}
  check.near(image.resize(row, {1, 2}, {antialias = false}):reshape({2}):totable(), {2, 10}, 1e-6)
end

tests["resize has the gradient of its linear map"] = function()
  local x = tpu.random.uniform(tpu.random.key(1), {1, 3, 4, 1})
  local err = jacobian.max_error(function(v) return image.resize(v, {5, 2}) end, x)
  check.near(err, 0, 1e-2)
end

-- Each result image must be one of `candidates(i)` (a list of tensors).
local function each_image_is_one_of(y, candidates)
  local seen = {}
  for i = 1, y.shape[1] do
    local yi, found = y:slice {{i, i}}, nil
    for k, c in ipairs(candidates(i)) do
      if max_abs(yi, c) == 0 then found = k end
    end
    check.is_true(found ~= nil, "image " .. i .. " is not a valid result")
    seen[found] = true
  end
  return seen
end

tests["flips mirror each image or leave it, per image, the same for the same key"] = function()
  local x = tpu.random.uniform(tpu.random.key(2), {16, 3, 5, 2})
  for _, case in ipairs {{image.random_flip_left_right, 3}, {image.random_flip_up_down, 2}} do
    local f, axis = case[1], case[2]
    local y = f(x, tpu.random.key(7))
    local seen = each_image_is_one_of(y, function(i)
      local xi = x:slice {{i, i}}
      local n = xi.shape[axis]
      local rev = {}
      for k = 1, n do rev[k] = n - k end
      return {xi, xi:take(tpu.tensor(rev, {dtype = "i32"}), axis)}
    end)
    check.is_true(seen[1] and seen[2], "16 images all flipped or all kept")
    check.eq(max_abs(y, f(x, tpu.random.key(7))), 0)
    local traced = tpu.jit(function(v, k) return f(v, k) end)(x, tpu.random.key(7))
    check.eq(max_abs(y, traced), 0)
  end
  -- A single image (rank 3) works too.
  check.eq(image.random_flip_up_down(x:slice({{1, 1}}):reshape {3, 5, 2}, tpu.random.key(0)).shape, {3, 5, 2})
end

tests["random_crop takes a window of each image at its own place"] = function()
  local x = tpu.arange(12 * 6 * 7 * 1):reshape {12, 6, 7, 1}
  local y = image.random_crop(x, {3, 4}, tpu.random.key(5))
  check.eq(y.shape, {12, 3, 4, 1})
  local places = {}
  each_image_is_one_of(y, function(i)
    local list = {}
    for top = 1, 4 do
      for left = 1, 4 do list[#list + 1] = x:slice {{i, i}, {top, top + 2}, {left, left + 3}} end
    end
    return list
  end)
  for i = 1, 12 do places[y:slice({{i, i}}):min():item() % 42] = true end
  local distinct = 0
  for _ in pairs(places) do distinct = distinct + 1 end
  check.is_true(distinct > 1, "the crops of 12 images differ")
  check.eq(image.random_crop(x, {6, 7}, tpu.random.key(5)):totable(), x:totable())
end

tests["central_crop, brightness and contrast against plain arithmetic"] = function()
  local x = tpu.arange(2 * 5 * 5 * 1):reshape({2, 5, 5, 1}):cast("f32")
  check.eq(image.central_crop(x, 0.6):totable(), x:slice({{}, {2, 4}, {2, 4}}):totable())
  check.eq(image.central_crop(x, 1):totable(), x:totable())
  local key = tpu.random.key(3)
  local delta = tpu.random.uniform(key, {2, 1, 1, 1}, {minval = -0.5, maxval = 0.5})
  check.near(max_abs(image.random_brightness(x, 0.5, key), x + delta), 0, 1e-6)
  local f = tpu.random.uniform(key, {2, 1, 1, 1}, {minval = 0.5, maxval = 1.5})
  local mean = x:mean({2, 3}, true)
  check.near(max_abs(image.random_contrast(x, 0.5, 1.5, key), (x - mean) * f + mean), 0, 1e-4)
end

tests["tpu.image errors name the call and the value"] = function()
  local x = tpu.zeros {2, 4, 4, 3}
  check.raises(function() image.resize(tpu.zeros {4}, {2, 2}) end, "image.resize: expected an image")
  check.raises(function() image.random_crop(x, {2, 2}, 7) end, "image.random_crop: expected a key")
  check.raises(function() image.central_crop(x, 0) end, "fraction must be a number in %(0, 1%]")
  check.raises(function() image.random_contrast(x, 2, 1, tpu.random.key(0)) end, "lower <= upper")
  check.raises(function() image.resize(x, {2, 2}, {antialiased = true}) end, "antialias")
  check.raises(function() image.write_jpeg("x.jpg", tpu.zeros({2, 2, 3}, {dtype = "u8"}), {quality = 0}) end,
    "quality must be an integer from 1 to 100")
  check.raises(function() image.read("/nonexistent.png") end, "/nonexistent.png: file not found")
end

---------------------------------------------------------------- map {seed =}

tests["map {seed =} hands a key per element: same seed, same batches; epochs differ"] = function()
  local function pipeline(seed)
    return data.from_tensors(tpu.arange(8 * 4 * 4):reshape({8, 4, 4, 1}):cast("f32")):batch(4)
      :map(function(x, key) return image.random_flip_left_right(image.random_crop(x, {3, 3}, key), key) end,
        {seed = seed})
  end
  local a, b, c = util.collect(pipeline(1)), util.collect(pipeline(1)), util.collect(pipeline(2))
  check.eq(a, b)
  check.is_true(not pcall(check.eq, a, c), "another seed gives other crops")
  local ds = pipeline(1)
  local e0, e1 = util.collect(ds, {epoch = 0}), util.collect(ds, {epoch = 1})
  check.eq(e0, a)
  check.is_true(not pcall(check.eq, e0, e1), "each pass draws anew")
  check.raises(function() data.range(3):map(function(v) return v end, {host = true, seed = 1}) end,
    "goes with traced functions")
end

---------------------------------------------------------------- image_folder

tests["image_folder reads PNG and JPEG Fashion-MNIST images back"] = function()
  local dir, x, labels = fashion_folder(40)
  local ds = data.image_folder(dir, quiet {image_size = {28, 28}, color = "grayscale", shuffle = false})
  check.eq(ds:cardinality(), 40)
  local ix, iy = ds:element_spec()
  check.eq(tostring(ix), "f32[28,28,1]")
  check.eq(tostring(iy), "i32[]")
  local xs, ys = ds:batch(40):iter()()
  -- Files are in class order; find each one's original by its number in the name.
  for i, path in ipairs(ds.file_paths) do
    local k = tonumber(path:match("(%d+)%.%a+$"))
    check.eq(ds.class_names[ys:totable()[i] + 1], NAMES[labels[k] + 1])
    local diff = max_abs(xs:slice({{i, i}}):reshape {28, 28, 1}, x:slice({{k, k}}):reshape {28, 28, 1})
    check.is_true(diff <= (k % 2 == 1 and 0 or 16), path .. " differs by " .. diff)
  end
  -- RGB repeats the gray channel; categorical labels are one-hot.
  local rgb = data.image_folder(dir, quiet {image_size = {28, 28}, label_mode = "categorical", shuffle = false})
  local xr, yr = rgb:batch(2):iter()()
  check.eq(xr.shape, {2, 28, 28, 3})
  check.eq(max_abs(xr:slice {{}, {}, {}, {1, 1}}, xr:slice {{}, {}, {}, {3, 3}}), 0)
  check.eq(yr.shape, {2, 10})
  check.eq(yr:sum():item(), 2.0)
end

tests["image_folder: prefetch decodes on the thread and gives the same batches"] = function()
  local dir = fashion_folder(30)
  local ds = data.image_folder(dir, quiet {image_size = {16, 16}, seed = 4}):batch(8)
  local plain, prefetched = util.collect(ds, {epoch = 0}), ds:prefetch(2)
  check.eq(util.collect(prefetched, {epoch = 0}), plain)
  check.eq(prefetched:prefetch_stats().batches, 4)
  -- A traced augmentation after the batch runs on the thread too, with the same keys.
  local function augment(x, y, key)
    return tpu.image.random_flip_left_right(x / 255, key), y
  end
  local mapped = ds:map(augment, {seed = 9})
  local expected = {util.collect(mapped, {epoch = 1}), util.collect(mapped, {epoch = 2})}
  local on_thread = mapped:prefetch(1)
  check.eq(util.collect(on_thread, {epoch = 1}), expected[1])
  check.eq(util.collect(on_thread, {epoch = 2}), expected[2])
  check.is_true(on_thread:prefetch_stats().map_ms > 0)
end

tests["image_folder: shuffling, splits, class_names, labels"] = function()
  local dir = fashion_folder(30, true)
  local a = data.image_folder(dir, quiet {image_size = {8, 8}, seed = 1, validation_split = 0.2, subset = "training"})
  local b = data.image_folder(dir, quiet {image_size = {8, 8}, seed = 1, validation_split = 0.2, subset = "validation"})
  check.eq({a:cardinality(), b:cardinality()}, {24, 6})
  local all = {}
  for _, p in ipairs(a.file_paths) do all[p] = true end
  for _, p in ipairs(b.file_paths) do
    check.is_true(not all[p], "a file in both subsets")
    all[p] = true
  end
  local n = 0
  for _ in pairs(all) do n = n + 1 end
  check.eq(n, 30)
  local t2, v2 = data.image_folder(dir, quiet {image_size = {8, 8}, seed = 1, validation_split = 0.2, subset = "both"})
  check.eq(t2.file_paths, a.file_paths)
  check.eq(v2.file_paths, b.file_paths)
  -- class_names orders the classes: the first named is label 0.
  local plain = data.image_folder(dir, quiet {image_size = {8, 8}, shuffle = false})
  local reversed = {}
  for i, name in ipairs(plain.class_names) do reversed[#plain.class_names - i + 1] = name end
  local r = data.image_folder(dir, quiet {image_size = {8, 8}, shuffle = false, class_names = reversed})
  local _, y = r:batch(30):iter()()
  local last = plain.class_names[#plain.class_names]
  check.eq(y:totable()[1], 0)
  check.is_true(r.file_paths[1]:find("/" .. last .. "/", 1, true) ~= nil)
  -- labels = false: images only; an explicit list numbers the files in sorted order.
  local images_only = data.image_folder(dir, quiet {image_size = {8, 8}, labels = false})
  check.eq(select("#", images_only:element_spec()), 1)
  local given = {}
  for i = 1, 30 do given[i] = i % 3 end
  local listed = data.image_folder(dir, quiet {image_size = {8, 8}, labels = given, label_mode = "categorical",
    shuffle = false})
  local _, yl = listed:batch(30):iter()()
  check.eq(yl.shape, {30, 3})
  -- Two classes, label_mode = "binary": f32 [n, 1] of 0 and 1, as Keras.
  local pair = temp_dir()
  for i, class in ipairs {"no", "yes"} do
    os.execute("mkdir -p " .. pair .. "/" .. class)
    image.write_png(pair .. "/" .. class .. "/a.png", tpu.full({3, 3, 1}, i, {dtype = "u8"}))
  end
  local binary = data.image_folder(pair, quiet {image_size = {3, 3}, label_mode = "binary", shuffle = false})
  local xb, yb = binary:batch(2):iter()()
  check.eq(yb.dtype, "f32")
  check.eq(yb:totable(), {{0}, {1}})
  check.eq(xb:reshape({2, 27}):max(2):totable(), {1, 2})
end

tests["image_folder: files that do not decode are errors naming them, or skipped"] = function()
  local dir = fashion_folder(6, true)
  os.execute("mkdir -p " .. dir .. "/zzz")
  util.write(dir .. "/zzz/broken.png", "\137PNG\r\n\26\nnot really")
  check.raises(function() data.image_folder(dir, quiet {image_size = {8, 8}}) end,
    "broken.png: not a valid PNG file .*on_error")
  local ds = data.image_folder(dir, quiet {image_size = {8, 8}, on_error = "skip"})
  check.eq({ds:cardinality(), ds.skipped}, {6, 1})
  -- The message counts every candidate file, the skipped one included.
  local printed, old_print = {}, print
  print = function(...) printed[#printed + 1] = table.concat({...}, "\t") end
  local ok, err = pcall(data.image_folder, dir, {image_size = {8, 8}, on_error = "skip"})
  print = old_print
  if not ok then error(err, 0) end
  local skip_line
  for _, line in ipairs(printed) do skip_line = skip_line or line:match("^Skipped %d+ of %d+ files") end
  check.eq(skip_line, "Skipped 1 of 7 files")
  -- A JPEG whose header reads but whose data is cut short fails the batch that reads it.
  local cut = temp_dir()
  os.execute("mkdir -p " .. cut .. "/a")
  image.write_jpeg(cut .. "/a/x.jpg", (tpu.random.uniform(tpu.random.key(0), {64, 64, 3}) * 255):cast("u8"))
  local f = io.open(cut .. "/a/x.jpg", "rb")
  local bytes = f:read("a")
  f:close()
  util.write(cut .. "/a/x.jpg", bytes:sub(1, #bytes * 3 // 4))
  local lazy = data.image_folder(cut, quiet {image_size = {8, 8}})
  check.raises(function() lazy:batch(1):iter()() end, "x.jpg: the JPEG data does not decode")
  check.raises(function() data.image_folder(cut, quiet {image_size = {8, 8}, on_error = "skip"}) end,
    "none of the images decodes %(the first: .*x.jpg")
end

tests["image_folder: bad arguments and folders are clear errors"] = function()
  local empty = temp_dir()
  check.raises(function() data.image_folder(empty) end, "image_folder: no images in")
  check.raises(function() data.image_folder(empty .. "/missing") end, "missing: directory not found")
  local dir = fashion_folder(6, true)
  check.raises(function() data.image_folder(dir, {image_size = {0, 8}}) end, "image_size must be {height, width}")
  check.raises(function() data.image_folder(dir, {image_sise = {8, 8}}) end, "did you mean")
  check.raises(function() data.image_folder(dir, {validation_split = 0.2}) end, "go together")
  check.raises(function() data.image_folder(dir, {label_mode = "binary", verbose = false}) end,
    "needs exactly 2 classes")
  check.raises(function() data.image_folder(dir, {class_names = {"cat"}, verbose = false}) end,
    "class_names must name each subdirectory")
  check.raises(function() data.image_folder(dir, {color = "cmyk"}) end, "color must be rgb, grayscale, rgba")
end

for name, test in pairs(tests) do
  tests[name] = function()
    local ok, err = pcall(test)
    for _, dir in ipairs(made) do util.remove(dir) end
    made = {}
    if not ok then error(err, 0) end
  end
end

return tests
