-- fit/evaluate output when stdout is not a terminal: "Epoch e/E" and one line per epoch
-- (times are masked by the runner); verbose = 0 prints nothing; the history has every metric.
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data

local x = tpu.random.uniform(tpu.random.key(1), {48, 4})
local y = x:matmul(tpu.tensor {{1, -1, 0}, {0, 1, -1}, {-1, 0, 1}, {1, 1, -2}}):argmax(-1)
local train = data.from_tensors {x, y}:batch(16)

nn.set_seed(7)
local model = nn.Sequential {nn.Dense(8, {activation = "tanh"}), nn.Dense(3)}
model:compile {optimizer = optim.Adam {lr = 0.05}, loss = "sparse_categorical_crossentropy",
               metrics = {"accuracy"}}
local history = model:fit(train, {epochs = 3, validation_data = train})
print(history)
model:fit(train, {epochs = 1, verbose = 0})
local r = model:evaluate(train)
print(string.format("loss %.4f accuracy %.4f", r.loss, r.accuracy))
