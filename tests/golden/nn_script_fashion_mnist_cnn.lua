-- Smoke test of scripts/fashion_mnist_cnn.lua on a small slice of its data (--smoke: four
-- training batches, one test batch, one epoch).
arg = {[0] = "../../scripts/fashion_mnist_cnn.lua", "--smoke"}
dofile(arg[0])
