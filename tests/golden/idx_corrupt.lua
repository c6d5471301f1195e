-- A truncated IDX file is a clear error naming the file and what is wrong, never a crash.
local tpu = require "tpu"
local files = dofile("../lua/files.lua")  -- removes the directory at exit, also after an error
local dir = files.tmpdir()
os.execute("mkdir -p " .. dir)
local function write(name, bytes)
  local f = assert(io.open(dir .. "/" .. name, "wb"))
  f:write(bytes)
  f:close()
end
-- images claim 60000x28x28 but hold 10 bytes; labels are fine but short
write("train-images-idx3-ubyte", "\0\0\8\3" .. string.pack(">I4I4I4", 60000, 28, 28) .. string.rep("\0", 10))
write("train-labels-idx1-ubyte", "\0\0\8\1" .. string.pack(">I4", 2) .. "\1\2")
local ok, err = pcall(tpu.data.fashion_mnist, "train", {dir = dir})
os.execute("rm -rf " .. dir)
print(ok)
print((err:gsub(dir, "<dir>")))
