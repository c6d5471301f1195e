-- SIGTERM during fit (what timeout, Slurm and Kubernetes send): the step in progress finishes,
-- fit stops naming where it was, stdout (a pipe here, so fully buffered) reaches the reader and
-- tputrain exits with status 143; the checkpoint written after epoch 1 stays loadable.
local tpu = require "tpu"
local nn, data = tpu.nn, tpu.data

local path = os.tmpname()
local x, y = tpu.zeros {64, 3}, tpu.zeros({64}, {dtype = "i32"})
local model = nn.Sequential {nn.Dense(2)}
model:compile {optimizer = "sgd", loss = "sparse_categorical_crossentropy"}

local epochs_done = 0
local saved = {on_epoch_end = function()
  epochs_done = epochs_done + 1
  print("checkpoint after epoch 1 loads: " .. tostring(tpu.load(path) ~= nil))
end}
-- In epoch 2, after its first step, SIGTERM arrives from outside: sent to this process ($PPID
-- of the shell) from the background.
local term = {on_train_batch_end = function(_, step)
  if epochs_done ~= 1 or step ~= 1 then return end
  os.execute("(sleep 0.2; kill -TERM $PPID) &")
  local t0 = tpu.core.now()
  while not require("tpu.interrupt").requested() and tpu.core.now() - t0 < 20 do end
end}
model:fit(data.from_tensors {x, y}:batch(16),
  {epochs = 3, verbose = 1, callbacks = {tpu.callbacks.checkpoint {path = path}, saved, term}})
