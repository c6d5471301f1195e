-- strategy:reduce of a per-replica value on 2 ranks x 2 cores: every rank prints the sum and
-- the mean over all 4 replicas (on stderr: only rank 0 prints to stdout).
local tpu = require "tpu"
local s = tpu.strategy.multi_worker {cores = 2}
local part = s:run(function(b) return b:sum() end, s:shard(tpu.arange(8):cast("f32")))
io.stderr:write(string.format("sum %g mean %g\n", s:reduce("sum", part):item(), s:reduce("mean", part):item()))
-- more values than one string.pack call takes at a time: every element summed over the 4
local wide = s:run(function(b) return b:reshape {1, 5000} end, s:shard(tpu.ones {4, 5000}))
local total = s:reduce("sum", wide)
io.stderr:write(string.format("wide %d %g %g\n", total.shape[2], total:min():item(), total:max():item()))
