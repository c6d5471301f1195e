-- Averages each channel over the spatial axes: [batch, h, w, c] -> [batch, c] (NHWC).
--   nn.GlobalAvgPool2D()    nn.GlobalAvgPool2D {keepdims = true}   -- [batch, 1, 1, c]
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local GlobalAvgPool2D = Module:extend("GlobalAvgPool2D")
GlobalAvgPool2D.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

function GlobalAvgPool2D:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, util.options {"keepdims"})
  self:init_common(opts)
  self.keepdims = util.flag("GlobalAvgPool2D", opts, "keepdims", false)
end

function GlobalAvgPool2D:build(_input_shape)
  self.input_spec = {ndim = 4}
end

function GlobalAvgPool2D:call(x, _ctx)
  return x:mean({2, 3}, self.keepdims)
end

function GlobalAvgPool2D:compute_output_shape(s)
  if self.keepdims then return {s[1], 1, 1, s[4]} end
  return {s[1], s[4]}
end

return GlobalAvgPool2D
