-- Ctrl-C during fit: the step in progress finishes, then fit stops naming where it was and
-- tputrain exits with status 130; the checkpoint written after epoch 1 stays loadable.
-- Ctrl-C arrives as from a terminal: SIGINT to this process, in epoch 2 after its first step.
local model, batches, callbacks = dofile("data/interrupted_fit.lua")("INT")
model:fit(batches, {epochs = 3, verbose = 0, callbacks = callbacks})
