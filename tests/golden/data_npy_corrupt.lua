-- A .npy file whose data is shorter than its header declares is an error naming the file,
-- the declared type and shape, and the bytes found; never a crash.
local tpu = require "tpu"
print("reading data/truncated.npy")
local x = tpu.data.npy("data/truncated.npy")
print(x:cardinality())
