-- f64 values beyond the f32 range that float data is read into are an error naming the file
-- and the element, not inf; inf and NaN themselves, and values within range, load as they are.
local tpu = require "tpu"
local function npy(path, values)
  local header = "{'descr': '<f8', 'fortran_order': False, 'shape': (" .. #values .. ",), }"
  header = header .. string.rep(" ", 63 - (10 + #header) % 64) .. "\n"
  local f = assert(io.open(path, "wb"))
  f:write("\x93NUMPY\1\0", string.pack("<I2", #header), header)
  for _, v in ipairs(values) do f:write(string.pack("<d", v)) end
  f:close()
end
local path = dofile("../lua/files.lua").tmpname()  -- removed at exit
npy(path, {1.5, -3.4e38, math.huge, 0 / 0})
local ok = tpu.data.npy(path)
print(ok:cardinality())
npy(path, {1.5, 2.5, -1e300})
local loaded, err = pcall(tpu.data.npy, path)
os.remove(path)
error(err:gsub(path:gsub("%p", "%%%0"), "<file>"), 0)
