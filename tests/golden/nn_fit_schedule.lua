-- fit with learning-rate schedules: the rate changes every step inside one compiled train step
-- (fit donates the optimizer state, which a schedule reads through the step counter).
local tpu = require "tpu"
local nn, optim, data = tpu.nn, tpu.optim, tpu.data

local x = tpu.random.uniform(tpu.random.key(1), {64, 4})
local y = x:matmul(tpu.tensor {{1, -1, 0}, {0, 1, -1}, {-1, 0, 1}, {1, 1, -2}}):argmax(-1)
local train = data.from_tensors {x, y}:batch(16)
local s = optim.schedule
for _, opt in ipairs {
  optim.SGD {lr = s.exponential {lr = 0.5, decay_steps = 4, decay_rate = 0.5}, momentum = 0.9},
  optim.Adam {lr = s.cosine {lr = 0.05, decay_steps = 12}},
  optim.AdamW {lr = s.warmup {warmup_steps = 2, after = s.cosine {lr = 0.05, decay_steps = 10}}},
  optim.RMSprop {lr = s.exponential {lr = 0.01, decay_steps = 4, decay_rate = 0.5}, clipnorm = 1},
} do
  nn.set_seed(3)
  local model = nn.Sequential {nn.Dense(8, {activation = "tanh"}), nn.Dense(3)}
  model:compile {optimizer = opt, loss = "sparse_categorical_crossentropy"}
  local loss = model:fit(train, {epochs = 3, verbose = 0}).history.loss
  print(string.format("%s: train_step compiles %d, loss decreased %s", opt,
    model.compiled.steps.train:stats().compiles, tostring(loss[3] < loss[1])))
end
