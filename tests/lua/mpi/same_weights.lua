-- Trains a linear model under multi_worker{} (run with mpirun -np 2) or TPU{cores=2} (plain
-- run with "single"), printing the weights with every bit, so a test can compare them. With
-- "multi die" rank 1 kills itself after 5 steps; with "multi fewer" it stops after 10 of 30.
local tpu = require "tpu"
local s = arg[1] == "single" and tpu.strategy.TPU {cores = 2} or tpu.strategy.multi_worker {}
local k = tpu.random.key(11)
local x = tpu.random.normal(k, {64, 5})
local y = x:matmul(tpu.random.normal(k:fold_in(1), {5, 1}))
local step = tpu.jit(function(w, xb, yb)
  local loss, g = tpu.value_and_grad(function(v) local e = xb:matmul(v) - yb; return (e * e):sum() end)(w)
  local n = tpu.all_reduce(tpu.tensor(xb.shape[1] + 0.0))
  return w - 0.02 * tpu.all_reduce(g) / n, tpu.all_reduce(loss, "mean")
end)
local w = tpu.zeros {5, 1}
for i = 1, (arg[2] == "fewer" and s.rank == 1) and 10 or 30 do
  w = s:run(step, w, s:shard(x), s:shard(y))
  if arg[2] == "die" and s.rank == 1 and i == 5 then os.execute("kill -9 $PPID") end
end
local out = {}
for i, v in ipairs(w:reshape {-1}:totable()) do out[i] = string.format("%a", v) end
print("weights " .. table.concat(out, " "))
