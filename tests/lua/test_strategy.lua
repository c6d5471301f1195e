-- Strategies: replicated steps, all_reduce, sharding errors, determinism across threads.
local tpu = require "tpu"
local check = require "check"

local function linear_problem()
  local k = tpu.random.key(7)
  local x = tpu.random.normal(k, {32, 3})
  local y = x:matmul(tpu.tensor {{1}, {-2}, {0.5}})
  local step = tpu.jit(function(w, xb, yb)
    local loss, g = tpu.value_and_grad(function(v) local e = xb:matmul(v) - yb; return (e * e):sum() end)(w)
    local n = tpu.all_reduce(tpu.tensor(xb.shape[1] + 0.0))
    return w - 0.05 * tpu.all_reduce(g) / n, tpu.all_reduce(loss) / n, loss
  end, {name = "linear_step"})
  return x, y, step
end

local function train(cores, steps)
  local s = tpu.strategy.TPU {cores = cores}
  local x, y, step = linear_problem()
  local w, loss, per = tpu.zeros {3, 1}
  for _ = 1, steps do w, loss, per = s:run(step, w, s:shard(x), s:shard(y)) end
  return w, loss, per, s
end

return {
  ["a replicated step trains like one core, and per-replica values come back wrapped"] = function()
    local w8, loss8, per8, s8 = train(8, 150)
    local w1, loss1 = train(1, 150)
    check.near(w8:reshape {-1}:totable(), w1:reshape {-1}:totable(), 1e-5)
    check.near(w8:reshape {-1}:totable(), {1, -2, 0.5}, 1e-2)
    check.near(loss8:item(), loss1:item(), 1e-6)
    check.is_true(tpu.strategy.PerReplica.is_instance(per8))
    check.eq(per8.value.shape, {8})
    check.near(s8:reduce("sum", per8):item() / 32, loss8:item(), 1e-6)
    check.eq(s8.num_replicas_in_sync, 8)
  end,

  ["a sharded argument returned as it is comes back with each core's rows"] = function()
    local s = tpu.strategy.TPU {cores = 2}
    local a, b = s:run(function(x) return x, x * 2 end, s:shard(tpu.tensor {1, 2, 3, 4}))
    check.eq(a.value:totable(), {{1, 2}, {3, 4}})
    check.eq(b.value:totable(), {{2, 4}, {6, 8}})
  end,

  ["the same replicated run is bitwise identical across runs"] = function()
    local a = train(4, 10)
    local b = train(4, 10)
    check.is_true(a == b)
  end,

  ["a global batch that does not divide by the cores names both numbers and the fix"] = function()
    local s = tpu.strategy.TPU {cores = 8}
    check.raises(function() s:shard(tpu.zeros {250, 3}) end,
      "the global batch 250 does not divide by the 8 cores of TPU{cores=8, version=\"v3\"}; use a batch of 248 or 256")
  end,

  ["strategy constructors check their arguments"] = function()
    check.raises(function() tpu.strategy.TPU {cores = 0} end, "cores must be a positive integer, got 0")
    check.raises(function() tpu.strategy.TPU {cores = 2, version = "v9"} end, "unknown version 'v9'")
    check.eq(tpu.strategy.default().num_replicas_in_sync, 1)
    check.eq(tostring(tpu.strategy.TPU {cores = 2, version = "v2"}), "TPU{cores=2, version=\"v2\"}")
  end,

  ["scope is to-be-closed and sets the TPU version"] = function()
    local device = require "tpu.device"
    local before = device.version()
    local s = tpu.strategy.TPU {cores = 2, version = "v4"}
    do
      local _ <close> = s:scope()
      check.eq(tpu.strategy.current(), s)
      check.eq(device.version(), "v4")
    end
    check.is_true(tpu.strategy.current() ~= s)
    device.set_version(before)
  end,
  -- A per-replica value's mean divides by its own replicas, whichever strategy reduces it.
  ["reduce's mean divides by the value's replicas"] = function()
    local v = tpu.strategy.PerReplica(tpu.tensor {{1, 2}, {3, 4}}, 2, true)
    check.eq(tpu.strategy.default():reduce("mean", v):totable(), {2, 3})
    check.eq(tpu.strategy.TPU {cores = 4}:reduce("mean", v):totable(), {2, 3})
    check.eq(tpu.strategy.TPU {cores = 4}:reduce("sum", v):totable(), {4, 6})
  end,
}
