-- Smoke test of scripts/fortunes_gpt.lua on a small slice of its data: 120 cookies (108 train,
-- 12 validation), two epochs of 3 steps, then a greedy and a sampled continuation of the
-- prompt with one compile of the decode step.
arg = {[0] = "../../scripts/fortunes_gpt.lua", "120", "2"}
dofile(arg[0])
