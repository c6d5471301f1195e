-- Deterministic random streams for the data pipeline: one stream of uniform integers per
-- (seed, epoch), the same order on every machine and run. The stream is engine/data/shuffle.h's
-- (core.index_stream), which also makes whole shuffled passes (core.buffer_shuffle).
local core = require "tpu.core"

local M = {}

-- Returns below(n): a uniform integer in [0, n) for 1 <= n < 2^53, from the stream that
-- (seed, epoch) selects.
function M.stream(seed, epoch) return core.index_stream(seed, epoch) end

-- The seed of a data set made without {seed =}: the --seed of the command line, else 0, so
-- runs are reproducible either way.
function M.default_seed()
  local seed = (require("tpu").options or {}).seed
  return math.type(seed) == "integer" and seed >= 0 and seed or 0
end

return M
