-- Smoke test of scripts/fortunes_language.lua on a small slice of its data: 100 cookies per
-- language (80 train, 20 test), three epochs of 6 steps; it trains past the majority class.
arg = {[0] = "../../scripts/fortunes_language.lua", "100"}
dofile(arg[0])
