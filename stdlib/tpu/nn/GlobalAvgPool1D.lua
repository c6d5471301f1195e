-- Averages each channel over the steps: [batch, steps, channels] -> [batch, channels].
--   nn.GlobalAvgPool1D()    nn.GlobalAvgPool1D {keepdims = true}   -- [batch, 1, channels]
-- Keras's name nn.GlobalAveragePooling1D is the same class.
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local GlobalAvgPool1D = Module:extend("GlobalAvgPool1D")
GlobalAvgPool1D.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

function GlobalAvgPool1D:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, util.options {"keepdims"})
  self:init_common(opts)
  self.keepdims = util.flag("GlobalAvgPool1D", opts, "keepdims", false)
end

function GlobalAvgPool1D:build(input_shape)
  if #input_shape ~= 3 then
    util.fail("GlobalAvgPool1D '%s' expects input [batch, steps, channels], got %s", self.name,
      util.shape_text(input_shape))
  end
  self.input_spec = {ndim = 3}
end

function GlobalAvgPool1D:call(x, _ctx)
  return x:mean(2, self.keepdims)
end

function GlobalAvgPool1D:compute_output_shape(s)
  if self.keepdims then return {s[1], 1, s[3]} end
  return {s[1], s[3]}
end

return GlobalAvgPool1D
