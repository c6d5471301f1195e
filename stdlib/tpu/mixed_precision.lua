-- Mixed-precision policy (DESIGN section 3): one global dtype policy for the layers:
--
--   tpu.mixed_precision.set_policy("mixed_bfloat16")   -- or --bf16, or TPUTRAIN_BF16=1
--   tpu.mixed_precision.policy()  --> {name = "mixed_bfloat16", compute_dtype = "bf16",
--                                      variable_dtype = "f32"}
--
-- "float32" (the default) computes in f32. "mixed_bfloat16" keeps the variables in f32 and
-- computes the matmuls and convolutions of Dense, Conv2D, MultiHeadAttention (and so
-- TransformerEncoder) on bf16 operands with f32 sums, the MXU's contract; the layers' outputs
-- are f32. Normalisation statistics, losses and metrics are f32; the gradients come back to the
-- f32 variables through the casts.
--
-- A layer reads the policy when it is constructed: call set_policy before
-- building the model. `dtype =` on a layer overrides it for that layer: "f32" (or "float32")
-- computes in f32, "mixed_bfloat16" as the policy, "bf16" keeps its variables in bf16 too.
local core = require "tpu.core"

local M = {}

local policies = {
  float32 = {name = "float32", compute_dtype = "f32", variable_dtype = "f32"},
  mixed_bfloat16 = {name = "mixed_bfloat16", compute_dtype = "bf16", variable_dtype = "f32"},
}

-- Per-layer `dtype =` values: a policy name or a dtype.
local layer_dtypes = {
  f32 = policies.float32,
  float32 = policies.float32,
  mixed_bfloat16 = policies.mixed_bfloat16,
  bf16 = {name = "bfloat16", compute_dtype = "bf16", variable_dtype = "bf16"},
}

local function copy(p)
  return {name = p.name, compute_dtype = p.compute_dtype, variable_dtype = p.variable_dtype}
end

local options = package.loaded["tpu.options"] or {}
local current = options.bf16 and policies.mixed_bfloat16 or policies.float32

local errors = require "tpu.errors"
local where = errors.where

function M.set_policy(name, extra)
  errors.none(2, "set_policy", extra)
  local p = type(name) == "string" and policies[name]
  if not p then
    error(where() .. "unknown mixed-precision policy " ..
          (type(name) == "string" and string.format("%q", name) or tostring(name)) ..
          " (expected \"float32\" or \"mixed_bfloat16\")", 0)
  end
  current = p
end

-- {name, compute_dtype, variable_dtype} of the global policy.
function M.policy(extra)
  errors.none(1, "policy", extra)
  return copy(current)
end

-- The policy of a layer given its `dtype =` option (nil: the global policy), or nil and an
-- error text for a value that is neither a dtype nor a policy name.
function M.layer_policy(dtype)
  if dtype == nil then return copy(current) end
  local p = type(dtype) == "string" and layer_dtypes[dtype]
  if not p then
    return nil, "dtype must be \"f32\", \"bf16\", \"float32\" or \"mixed_bfloat16\""
  end
  return copy(p)
end

-- A name tpu.mixed_precision lacks is an error listing what it has.
return errors.strict_namespace(M, "tpu.mixed_precision")
