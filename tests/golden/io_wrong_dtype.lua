-- A bf16 layer cannot take f32 weights silently: the load names the weight and both dtypes.
local tpu = require "tpu"
require "tpu.nn.persistence"
local nn = tpu.nn
local path = dofile("../lua/files.lua").tmpname()  -- removed at exit
nn.Dense(4)(tpu.zeros {1, 3})  -- another layer first: weight names follow positions, not layer names
local f32 = nn.Sequential {nn.Dense(4)}
f32(tpu.zeros {2, 3})
f32:save(path)
local bf16 = nn.Sequential {nn.Dense(4, {dtype = "bf16"})}
bf16(tpu.zeros {2, 3})
local ok, err = pcall(bf16.load, bf16, path)
os.remove(path)
error(err:gsub(path:gsub("%p", "%%%0"), "<file>"), 0)
