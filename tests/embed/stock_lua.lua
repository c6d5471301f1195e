-- Run by tests/embed/run.sh under stock lua5.4 (with the installed tpu.so) and under the
-- installed tputrain binary: both must print the same lines (one library, one stdlib).
local tpu = require "tpu"
assert(require "tpu" == tpu and tpu.core and tpu.nn.Dense, "require 'tpu' returns the module")

local x = tpu.tensor {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}
local model = tpu.nn.Sequential {tpu.nn.Dense(1)}
model:compile {optimizer = tpu.optim.Adam {learning_rate = 0.1}, loss = "mse"}
local history = model:fit(x, x * 2 + 1, {epochs = 50, batch_size = 8, verbose = 0})
print(string.format("loss %.5f", history.history.loss[50]))

-- Errors of the engine and of the stdlib are Lua errors at this file's lines.
print(select(2, pcall(function() return tpu.ones {2} + tpu.ones {3} end)))
print(select(2, pcall(function() return tpu.nn.Dense(0) end)))
print(select(2, pcall(tpu.jit(function(t) if t:sum() > 0 then return t end end), tpu.ones {2})))
