-- The AlexNet-style step of hbm_alexnet.lua at the per-core batch its ResourceExhausted advice
-- suggests: the plan fits a TPU v2 core, so training can start (compiled and checked here; a
-- step of that size would take minutes on the host's CPU), and 8 more examples would not fit.
local tpu = require "tpu"

local strategy = tpu.strategy.TPU {version = "v2"}
local _ <close> = strategy:scope()
local step, args = dofile("data/alexnet.lua")()
local capacity = tpu.core.tpu_version("v2").hbm_bytes

local ok, err = pcall(step.info, step, args(6250))
local batch = tonumber(tostring(err):match("a per%-core batch of at most (%d+)"))
print(string.format("batch 6250: %s, advice: a per-core batch of at most %s", ok and "fits" or "ResourceExhausted", batch))

for _, b in ipairs {batch, batch + 8} do
  local fits, info = pcall(step.info, step, args(b))
  print(string.format("batch %d: %s", b, fits and string.format("the plan needs %s of the %s of a TPU v2 core: fits",
    tpu.core.format_bytes(info.hbm_bytes), tpu.core.format_bytes(capacity)) or "ResourceExhausted"))
end
