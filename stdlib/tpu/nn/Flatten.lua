-- Flattens every dimension but the batch: [N, 28, 28] -> [N, 784].
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local Flatten = Module:extend("Flatten")
Flatten.takes_one_tensor = true  -- a list of tensors given to it is an error naming it
Flatten.keeps_probabilities = "rearranges"  -- a softmax's output stays one (Module:__call)

function Flatten:build(_input_shape)
  self.input_spec = {min_ndim = 1}
end

function Flatten:call(x, _ctx)
  return x:reshape(self:compute_output_shape(x.shape))
end

function Flatten:compute_output_shape(input_shape)
  local rest = {table.unpack(input_shape, 2)}
  for _, d in ipairs(rest) do
    if d < 0 then return {input_shape[1], -1} end  -- a size unknown (None): the product too
  end
  return {input_shape[1], util.numel(rest)}
end

return Flatten
