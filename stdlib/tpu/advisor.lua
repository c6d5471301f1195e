-- The cost report and advisor of --profile: a roofline estimate of each compiled step on TPU
-- v2/v3/v4 (from per-op FLOPs and tile-padded bytes) and advice on shapes and ops that waste
-- a TPU.
local core = require "tpu.core"

local M = {}

local function type_of(shape) return "[" .. table.concat(shape, ",") .. "]" end

-- Seconds on one core of `version`: each op takes the longer of its compute and its traffic.
function M.estimate(nodes, version)
  local spec = core.tpu_version(version)
  local seconds, flops = 0, 0
  for _, n in ipairs(nodes) do
    seconds = seconds + math.max(n.flops / spec.peak_flops, n.bytes / spec.hbm_bandwidth)
    flops = flops + n.flops
  end
  return seconds, seconds > 0 and flops / spec.peak_flops / seconds or 0
end

local function padded(d, m) return (d + m - 1) // m * m end

local function numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

-- Concats of fewer elements (a step's few statistics stacked into one result) cost nothing.
local kSmallConcat = 1024

-- Advice lines for one compiled function: batch, feature dims, pools, concats. data_dims: the
-- sizes of the batch's own dimensions (set of numbers), which the user cannot choose.
function M.advice(nodes, batch, compiles, data_dims)
  data_dims = data_dims or {}
  local lines, seen = {}, {}
  local function add(key, text)
    if not seen[key] then
      seen[key] = true
      lines[#lines + 1] = text
    end
  end
  if batch and batch % 8 ~= 0 then
    add("batch", string.format("per-core batch %d is not a multiple of 8: the TPU pads it to %d", batch, padded(batch, 8)))
  end
  for _, n in ipairs(nodes) do
    local where = n.loc ~= "" and " at " .. n.loc or ""
    if n.op == "dot" then
      for _, shape in ipairs(n.inputs) do
        local d = shape[#shape]
        if d % 128 ~= 0 and d > 8 then
          add("dim" .. d, string.format("feature dimension %d%s is not a multiple of 128: the MXU pads it to %d (%.0f%% wasted)%s",
            d, where, padded(d, 128), 100 * (1 - d / padded(d, 128)), data_dims[d]
              and "; the data has this size (input features or classes): a cost to know, not one to change"
              or "; a width you choose (units, filters) wastes nothing at a multiple of 128, a class count cannot"))
        end
      end
    elseif n.op == "reduce_window" and n.kind == "max" then
      add("maxpool", "max-pool" .. where .. ": on TPU an average pool is cheaper when the model does not need the max")
    elseif n.op == "concat" and numel(n.shape) >= kSmallConcat then
      add("concat" .. where, "concat in the step" .. where .. " copies " .. type_of(n.shape) ..
        "; keep the parts separate or preallocate and write slices")
    end
  end
  if compiles > 1 then
    add("recompile", string.format("compiled %d times: give inputs fixed shapes (drop_remainder, pad_to_multiple_of)", compiles))
  end
  return lines
end

return M
