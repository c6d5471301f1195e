-- Smoke test of scripts/custom_layer.lua on a small slice of its data (--smoke: three
-- training batches, one test batch, one epoch).
arg = {[0] = "../../scripts/custom_layer.lua", "--smoke"}
dofile(arg[0])
