-- The set-up of the io_ctrl_c_fit and io_sigterm_fit golden scripts: a small model, its data set
-- and fit's callbacks: a checkpoint after every epoch, a line saying whether epoch 1's
-- checkpoint loads, and one that in epoch 2, after its first step, sends `signal` (INT or TERM)
-- to this process ($PPID of the shell) and waits for it to arrive. The signal is sent from the
-- background because os.execute ignores SIGINT meanwhile. The scripts call fit themselves, so
-- the error names their line.
local tpu = require "tpu"
local nn, data = tpu.nn, tpu.data

return function(signal)
  local path = dofile("../lua/files.lua").tmpname()  -- removed at exit (after the signal too)
  local x, y = tpu.zeros {64, 3}, tpu.zeros({64}, {dtype = "i32"})
  local model = nn.Sequential {nn.Dense(2)}
  model:compile {optimizer = "sgd", loss = "sparse_categorical_crossentropy"}

  local epochs_done = 0
  local saved = {on_epoch_end = function()
    epochs_done = epochs_done + 1
    print("checkpoint after epoch 1 loads: " .. tostring(tpu.load(path) ~= nil))
  end}
  local send = {on_train_batch_end = function(_, step)
    if epochs_done ~= 1 or step ~= 1 then return end
    os.execute("(sleep 0.2; kill -" .. signal .. " $PPID) &")
    local t0 = tpu.core.now()
    while not require("tpu.interrupt").requested() and tpu.core.now() - t0 < 20 do end
  end}
  return model, data.from_tensors {x, y}:batch(16), {tpu.callbacks.checkpoint {path = path}, saved, send}
end
