-- Deterministic random streams for the data pipeline: splitmix64 in Lua's 64-bit integer
-- arithmetic (multiplication wraps, `>>` is a logical shift), so a (seed, epoch) pair gives
-- the same order on every machine and run.
local M = {}

local function mix(z)
  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  return z ~ (z >> 31)
end

-- Returns below(n): a uniform integer in [0, n) for 1 <= n < 2^31, from the stream that
-- (seed, epoch) selects.
function M.stream(seed, epoch)
  local state = mix(mix(seed) ~ (epoch * 0xD1B54A32D192ED03))
  return function(n)
    state = state + 0x9E3779B97F4A7C15
    return (mix(state) >> 11) % n
  end
end

-- The seed of a data set made without {seed =}: the --seed of the command line, else 0, so
-- runs are reproducible either way.
function M.default_seed()
  local seed = (require("tpu").options or {}).seed
  return math.type(seed) == "integer" and seed >= 0 and seed or 0
end

return M
