-- The largest value of each channel over the steps: [batch, steps, channels] -> [batch, channels].
--   nn.GlobalMaxPool1D()    nn.GlobalMaxPool1D {keepdims = true}   -- [batch, 1, channels]
-- Keras's name nn.GlobalMaxPooling1D is the same class.
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"

local GlobalMaxPool1D = Module:extend("GlobalMaxPool1D")
GlobalMaxPool1D.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

function GlobalMaxPool1D:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, util.options {"keepdims"})
  self:init_common(opts)
  self.keepdims = util.flag("GlobalMaxPool1D", opts, "keepdims", false)
end

function GlobalMaxPool1D:build(input_shape)
  if #input_shape ~= 3 then
    util.fail("GlobalMaxPool1D '%s' expects input [batch, steps, channels], got %s", self.name,
      util.shape_text(input_shape))
  end
  self.input_spec = {ndim = 3}
end

function GlobalMaxPool1D:call(x, _ctx)
  return x:max(2, self.keepdims)
end

function GlobalMaxPool1D:compute_output_shape(s)
  if self.keepdims then return {s[1], 1, s[3]} end
  return {s[1], s[3]}
end

return GlobalMaxPool1D
