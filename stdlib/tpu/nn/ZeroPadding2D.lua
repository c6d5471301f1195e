-- Adds rows and columns of zeros around NHWC images: [batch, h, w, c] ->
-- [batch, top + h + bottom, left + w + right, c].
--   nn.ZeroPadding2D()                           -- 1 on every side (Keras's default)
--   nn.ZeroPadding2D(3)    nn.ZeroPadding2D {padding = {1, 2}}   -- {rows, columns}
--   nn.ZeroPadding2D {padding = {{3, 3}, {3, 3}}}                -- {{top, bottom}, {left, right}}
local core = require "tpu.core"
local Module = require "tpu.nn.Module"
local margins = require "tpu.nn.margins"

local ZeroPadding2D = Module:extend("ZeroPadding2D")
ZeroPadding2D.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

function ZeroPadding2D:__init(a, b)
  margins.init(self, "padding", 1, a, b)
end

function ZeroPadding2D:build(input_shape)
  margins.check_nhwc(self, input_shape)
end

-- x with `lo` zeros before and `hi` after along axis (1-based).
-- One pad op: the compiler folds it into a convolution that reads it (the window's padding).
function ZeroPadding2D:call(x, _ctx)
  local p = self.padding
  return core.pad(x, {0, p[1][1], p[2][1], 0}, {0, p[1][2], p[2][2], 0})
end

function ZeroPadding2D:compute_output_shape(s)
  local p = self.padding
  local function padded(n, m) return n < 0 and -1 or n + m[1] + m[2] end  -- unknown stays unknown
  return {s[1], padded(s[2], p[1]), padded(s[3], p[2]), s[4]}
end

function ZeroPadding2D:repr()
  return margins.repr(self, self.padding)
end

return ZeroPadding2D
