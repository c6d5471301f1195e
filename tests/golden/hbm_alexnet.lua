-- DESIGN section 5, rule 4: an AlexNet-style net at a per-core batch of 6250 on a TPU v2 core
-- (8 GiB) stops before step 1 with ResourceExhausted: what it needs against the capacity, the
-- largest buffers with their shapes, padded sizes and layers, and the largest batch that fits.
-- hbm_alexnet_fits.lua compiles the same step at that batch.
local tpu = require "tpu"

local strategy = tpu.strategy.TPU {version = "v2"}
local _ <close> = strategy:scope()
local step, args = dofile("data/alexnet.lua")()
print("compiling the train step for a per-core batch of 6250")
step:info(args(6250))
print("step 1")  -- not reached
