-- fit on a data set whose cardinality is known to be 0 (one example, batches of 32 without the
-- remainder): the error comes before any epoch starts, so "Epoch 1/2" is never printed.
local tpu = require "tpu"
local nn = tpu.nn
local model = nn.Sequential {nn.Dense(1)}
model:compile {optimizer = "sgd", loss = "mse"}
local train = tpu.data.from_tensors {tpu.ones {1, 2}, tpu.ones {1, 1}}:batch(32, {drop_remainder = true})
print("cardinality", train:cardinality())
model:fit(train, {epochs = 2})
