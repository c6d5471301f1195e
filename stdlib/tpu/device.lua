-- The simulated TPU the program runs on: its version (per-core HBM capacity, peak FLOP/s,
-- bandwidth). `--tpu v2|v3|v4` sets it; a strategy's TPU{version=} overrides it.
local core = require "tpu.core"

local M = {}
local options = package.loaded["tpu.options"] or {}
local current = (options.tpu and options.tpu ~= "") and options.tpu or "v3"

function M.version() return current end

function M.set_version(name)
  if not core.tpu_version(name) then
    error(core.user_where() .. "unknown TPU version '" .. tostring(name) .. "' (expected \"v2\", \"v3\" or \"v4\")", 0)
  end
  current = name
end

-- {hbm_bytes=, peak_flops=, hbm_bandwidth=} of one core of the current version.
function M.spec() return core.tpu_version(current) end

return M
