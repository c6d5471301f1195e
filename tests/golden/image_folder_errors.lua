-- Image folders: every mistake is an error at the user's line that names the file or option,
-- and images of the wrong size for the model say so before anything runs.
local tpu = require "tpu"
local data, image, nn = tpu.data, tpu.image, tpu.nn

local files = dofile("../lua/files.lua")  -- removes the directory at exit, also after an error
local dir = files.tmpdir()
os.execute("mkdir -p " .. dir .. "/empty " .. dir .. "/pics/cat " .. dir .. "/pics/dog")
local function try(f)
  local ok, err = pcall(f)
  print(ok and "no error" or (tostring(err):gsub(dir, "DIR")))
end

try(function() data.image_folder(dir .. "/empty") end)
try(function() data.image_folder(dir .. "/nowhere") end)
for i = 1, 4 do
  image.write_png(string.format("%s/pics/%s/%d.png", dir, i % 2 == 0 and "cat" or "dog", i),
    tpu.full({28, 28, 1}, 30 * i, {dtype = "u8"}))
end
local f = io.open(dir .. "/pics/dog/notes.jpg", "w")
f:write("these are my notes, not a picture\n")
f:close()
try(function() data.image_folder(dir .. "/pics") end)
local ds = data.image_folder(dir .. "/pics", {image_size = {32, 32}, color = "grayscale", on_error = "skip",
  verbose = false})
print("skipped", ds.skipped, "kept", ds:cardinality())
try(function() data.image_folder(dir .. "/pics", {image_size = {32}}) end)
try(function() data.image_folder(dir .. "/pics", {validation_split = 0.5}) end)
try(function() data.image_folder(dir .. "/pics", {labels = "inferred", label_mode = "binary", class_names = {"dog"}}) end)

-- 32x32 images into a model built for 28x28.
local model = nn.Sequential {nn.Input {shape = {28, 28, 1}}, nn.Flatten(), nn.Dense(2)}
model:compile {optimizer = "adam", loss = "sparse_categorical_crossentropy"}
try(function() model:fit(ds:batch(2), {epochs = 1, verbose = 0}) end)
os.execute("rm -rf " .. dir)
