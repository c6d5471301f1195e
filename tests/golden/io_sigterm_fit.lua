-- SIGTERM during fit (what timeout, Slurm and Kubernetes send): the step in progress finishes,
-- fit stops naming where it was, stdout (a pipe here, so fully buffered) reaches the reader and
-- tputrain exits with status 143; the checkpoint written after epoch 1 stays loadable.
-- SIGTERM arrives from outside, in epoch 2 after its first step.
local model, batches, callbacks = dofile("data/interrupted_fit.lua")("TERM")
model:fit(batches, {epochs = 3, verbose = 1, callbacks = callbacks})
