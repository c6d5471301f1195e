-- Smoke test of scripts/fashion_mnist_mlp.lua, the set-up's training run, on a slice of its data
-- (--smoke: five training batches, one test batch, one epoch). The losses are exact: the run is
-- deterministic.
arg = {[0] = "../../scripts/fashion_mnist_mlp.lua", "--smoke"}
dofile(arg[0])
