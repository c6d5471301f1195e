-- Loading weights into a model of another shape names every weight that differs, its layer,
-- both shapes, and what must agree.
local tpu = require "tpu"
require "tpu.nn.persistence"
local nn = tpu.nn
local path = dofile("../lua/files.lua").tmpname()  -- removed at exit

local saved = nn.Sequential {nn.Dense(16, {activation = "relu"}), nn.Dense(10)}
saved(tpu.zeros {1, 8})
saved:save(path)

local model = nn.Sequential {nn.Dense(32, {activation = "relu"}), nn.Dense(10)}
model(tpu.zeros {1, 8})
local ok, err = pcall(model.load, model, path)
os.remove(path)
print(ok)
error(err:gsub(path:gsub("%p", "%%%0"), "<file>"), 0)
