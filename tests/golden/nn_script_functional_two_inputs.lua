-- Smoke test of scripts/functional_two_inputs.lua on a small slice of its data (--smoke: three
-- training batches, one test batch, one epoch).
arg = {[0] = "../../scripts/functional_two_inputs.lua", "--smoke"}
dofile(arg[0])
