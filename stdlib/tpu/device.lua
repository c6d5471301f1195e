-- The simulated TPU the program runs on: its version (per-core HBM capacity, peak FLOP/s,
-- bandwidth). `--tpu v2|v3|v4` sets it; a strategy's TPU{version=} overrides it.
local core = require "tpu.core"

local M = {}
local options = package.loaded["tpu.options"] or {}
local current = (options.tpu and options.tpu ~= "") and options.tpu or "v3"
local fixed_by  -- the strategy whose version= set `current`; nil when --tpu or the default did

function M.version() return current end

-- `by` (optional): the strategy, as text, whose explicit version= this is; --tpu does not
-- change the version it sets, so advice names it instead of the option.
function M.set_version(name, by)
  if not core.tpu_version(name) then
    error(core.user_where() .. "unknown TPU version '" .. tostring(name) .. "' (expected \"v2\", \"v3\" or \"v4\")", 0)
  end
  current, fixed_by = name, by
end

function M.fixed_by() return fixed_by end

-- The version with the least HBM per core that holds `bytes`, or nil when none does.
function M.smallest_holding(bytes)
  for _, name in ipairs {"v2", "v3", "v4"} do
    if core.tpu_version(name).hbm_bytes >= bytes then return name end
  end
end

-- {hbm_bytes=, peak_flops=, hbm_bandwidth=} of one core of the current version.
function M.spec() return core.tpu_version(current) end

return M
