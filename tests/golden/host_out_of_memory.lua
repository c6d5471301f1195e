-- More than the host's memory is an error at the line that asked for it, naming the tensor and
-- the bytes it needs (2^38 f32 elements are 1 TiB: under the shape limit, over any host's RAM).
local tpu = require "tpu"
print(pcall(tpu.zeros, {2 ^ 38}))
local x = tpu.zeros {2 ^ 38, 0}
print(x.shape[1], x.shape[2])
local big = tpu.ones({2 ^ 39}, {dtype = "u8"})
