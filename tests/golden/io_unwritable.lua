-- Saving where no file can be written: a missing directory, a path through a regular file,
-- a directory in the way. Each error names the path and why; no stray temporary file is left.
local tpu = require "tpu"
local ckpt = require "tpu.checkpoint"
local t = {w = tpu.ones {2}}
for _, path in ipairs {"no_such_dir/w.safetensors", "io_unwritable.lua/w.safetensors", "data"} do
  local ok, err = pcall(ckpt.save_tensors, path, t)
  print(ok, err)
end
local p = io.popen("ls -a | grep -c tmp-")
print("temporary files left: " .. p:read("l"))
p:close()
ckpt.save("no_such_dir/ckpt.safetensors", {step = 1})
