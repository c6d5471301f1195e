-- Reshapes each example (the batch dimension stays): nn.Reshape {7, 7, 16}; one size may be -1.
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local Reshape = Module:extend("Reshape")
Reshape.takes_one_tensor = true  -- a list of tensors given to it is an error naming it
Reshape.keeps_probabilities = "rearranges"  -- a softmax's output stays one (Module:__call)

local function check_target(shape)
  local ok, unknown = type(shape) == "table" and not util.is_tensor(shape) and #shape > 0, 0
  for _, d in ipairs(ok and shape or {}) do
    if d == -1 then unknown = unknown + 1 elseif not util.is_positive_integer(d) then ok = false end
  end
  if not ok or unknown > 1 then
    util.fail("Reshape: target_shape must be a list of positive sizes without the batch dimension "
      .. "(at most one -1), e.g. {7, 7, 16}; got %s", util.show(shape))
  end
  local out = {}
  for i, d in ipairs(shape) do out[i] = math.tointeger(d) end
  return out
end

function Reshape:__init(target_shape, opts)
  self.target_shape = check_target(target_shape)
  opts = opts or {}
  util.check_options(self, opts, util.options {})
  self:init_common(opts)
end

-- The target with its -1 resolved for an input shape (batch first).
function Reshape:_resolve(input_shape)
  local n, known = util.numel({table.unpack(input_shape, 2)}), 1
  for _, d in ipairs(self.target_shape) do
    if d ~= -1 then known = known * d end
  end
  local out = {input_shape[1]}
  for i, d in ipairs(self.target_shape) do out[i + 1] = d == -1 and n // known or d end
  if util.numel({table.unpack(out, 2)}) ~= n then
    util.fail("Reshape '%s' cannot reshape %s (%d values per example) into %s", self.name,
      util.shape_text(input_shape), n, util.shape_text({-1, table.unpack(self.target_shape)}))
  end
  return out
end

function Reshape:build(input_shape)
  self:_resolve(input_shape)
end

function Reshape:call(x, _ctx)
  return x:reshape(self:_resolve(x.shape))
end

function Reshape:compute_output_shape(input_shape)
  return self:_resolve(input_shape)
end

function Reshape:repr()
  local dims = {}
  for i, d in ipairs(self.target_shape) do dims[i] = tostring(d) end
  return "nn.Reshape(" .. table.concat(dims, ", ") .. ")"
end

return Reshape
