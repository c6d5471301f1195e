-- The largest value of each channel over the spatial axes: [batch, h, w, c] -> [batch, c] (NHWC).
--   nn.GlobalMaxPool2D()    nn.GlobalMaxPool2D {keepdims = true}   -- [batch, 1, 1, c]
-- Keras's name nn.GlobalMaxPooling2D is the same class.
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local GlobalMaxPool2D = Module:extend("GlobalMaxPool2D")
GlobalMaxPool2D.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

function GlobalMaxPool2D:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, util.options {"keepdims"})
  self:init_common(opts)
  self.keepdims = util.flag("GlobalMaxPool2D", opts, "keepdims", false)
end

function GlobalMaxPool2D:build(_input_shape)
  self.input_spec = {ndim = 4}
end

function GlobalMaxPool2D:call(x, _ctx)
  return x:max({2, 3}, self.keepdims)
end

function GlobalMaxPool2D:compute_output_shape(s)
  if self.keepdims then return {s[1], 1, 1, s[4]} end
  return {s[1], s[4]}
end

return GlobalMaxPool2D
