-- Mistakes with distribution strategies: errors at the user's line that name the rule and the fix.
local tpu = require "tpu"
local check = require "check"

local tests = {}

tests["a strategy's method called with a dot says to call it with a colon"] = function()
  local s = tpu.strategy.TPU {cores = 2}
  local msg = check.raises(function() local _ = s.run(function(x) return x end, tpu.zeros {2}) end,
    "run is a method of the strategy: call it with a colon, strategy:run(...) (got a function where the strategy goes)")
  check.is_true(msg:find("test_strategy_errors.lua:%d+: run is") ~= nil, msg)
  check.raises(function() local _ = s.scope() end,
    "scope is a method of the strategy: call it with a colon, strategy:scope(...) (got nil where the strategy goes)")
  check.raises(function() local _ = s.shard(tpu.zeros {2}) end, "shard is a method of the strategy: call it with a colon")
  check.raises(function() local _ = s.reduce("sum", 1) end, 'reduce is a method of the strategy: call it with a colon, strategy:reduce(...) (got "sum"')
  do local _ <close> = s:scope() end
  check.eq(s:is_chief(), true)
end

tests["distribute takes a data set"] = function()
  local s = tpu.strategy.TPU {cores = 2}
  local msg = check.raises(function() local _ = s:distribute(3) end,
    "distribute: expected a data set (e.g. tpu.data.from_tensors {x, y}:batch(64)), got 3")
  check.is_true(msg:find("test_strategy_errors.lua:%d+: distribute") ~= nil, msg)
  check.raises(function() local _ = s:distribute(tpu.zeros {4}) end, "distribute: expected a data set")
  local n = 0
  for x in s:distribute(tpu.data.from_tensors {tpu.zeros {4, 3}}:batch(2)).iter() do n = n + x.replicas end
  check.eq(n, 4)
end

tests["shard needs tensors with a batch axis; cores must be an integer"] = function()
  local s = tpu.strategy.TPU {cores = 2}
  local msg = check.raises(function() local _ = s:shard(tpu.tensor(3)) end,
    "shard: a tensor f32[] is a scalar, which has no batch axis to split across the 2 cores; shard tensors whose "
    .. "first axis is the global batch")
  check.is_true(msg:find("test_strategy_errors.lua:%d+: shard") ~= nil, msg)
  check.raises(function() local _ = s:shard(3) end,
    "shard: expected a global batch tensor (or a table of them) to split across the 2 cores, got 3")
  check.raises(function() local _ = s:shard {} end, "shard: expected a global batch tensor (or a table of them)")
  check.raises(function() local _ = s:shard {tpu.zeros {4}, tpu.tensor(1)} end, "shard: a tensor f32[] is a scalar")
  check.eq(s:shard {x = tpu.zeros {4, 2}}.replicas, 2)
  check.raises(function() local _ = tpu.strategy.TPU {cores = "4"} end, 'TPU: cores must be a positive integer, got "4"')
end

return tests
