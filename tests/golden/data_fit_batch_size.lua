-- fit's batch_size cuts tensors into batches; a data set is batched by its own batch(n), so
-- batch_size with a data set is an error rather than silently ignored.
local tpu = require "tpu"
local nn = tpu.nn
local model = nn.Sequential {nn.Dense(1)}
model:compile {optimizer = "sgd", loss = "mse"}
local train = tpu.data.from_tensors {tpu.ones {8, 2}, tpu.ones {8, 1}}:batch(4)
print("batches", train:cardinality())
model:fit(train, {epochs = 1, batch_size = 32})
