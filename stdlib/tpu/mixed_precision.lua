-- Mixed-precision policy (DESIGN section 3). "float32" computes in f32; "mixed_bfloat16"
-- (bf16 compute with f32 variables) needs the bf16 kernels, which this build does not have yet.
local core = require "tpu.core"

local M = {}
local current = {name = "float32", compute_dtype = "f32", variable_dtype = "f32"}

function M.set_policy(name)
  if name == "float32" then
    current = {name = "float32", compute_dtype = "f32", variable_dtype = "f32"}
  elseif name == "mixed_bfloat16" then
    error(core.user_where() .. "the mixed_bfloat16 policy is not available in this build yet (no bf16 kernels); " ..
          "use \"float32\"", 0)
  else
    error(core.user_where() .. "unknown mixed-precision policy '" .. tostring(name) ..
          "' (expected \"float32\" or \"mixed_bfloat16\")", 0)
  end
end

function M.policy()
  return {name = current.name, compute_dtype = current.compute_dtype, variable_dtype = current.variable_dtype}
end

return M
