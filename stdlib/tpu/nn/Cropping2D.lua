-- Removes rows and columns at the borders of NHWC images: [batch, h, w, c] ->
-- [batch, h - top - bottom, w - left - right, c].
--   nn.Cropping2D(2)    nn.Cropping2D {cropping = {1, 2}}         -- {rows, columns}
--   nn.Cropping2D {cropping = {{2, 0}, {1, 1}}}                   -- {{top, bottom}, {left, right}}
local Module = require "tpu.nn.Module"
local margins = require "tpu.nn.margins"
local util = require "tpu.nn.util"

local Cropping2D = Module:extend("Cropping2D")
Cropping2D.takes_one_tensor = true  -- a list of tensors given to it is an error naming it
Cropping2D.keeps_probabilities = "rearranges"  -- a softmax's output stays one (Module:__call)

function Cropping2D:__init(a, b)
  margins.init(self, "cropping", 0, a, b)
end

function Cropping2D:build(input_shape)
  margins.check_nhwc(self, input_shape)
  self:compute_output_shape(input_shape)
end

function Cropping2D:call(x, _ctx)
  local c, s = self.cropping, x.shape
  return x:slice {{1, s[1]}, {c[1][1] + 1, s[2] - c[1][2]}, {c[2][1] + 1, s[3] - c[2][2]}}
end

function Cropping2D:compute_output_shape(s)
  local c = self.cropping
  local function cropped(n, m) return n < 0 and -1 or n - m[1] - m[2] end  -- unknown stays unknown
  local h, w = cropped(s[2], c[1]), cropped(s[3], c[2])
  if (s[2] >= 0 and h < 1) or (s[3] >= 0 and w < 1) then
    util.fail("Cropping2D '%s': cropping {{%d, %d}, {%d, %d}} leaves nothing of input %s",
      self.name, c[1][1], c[1][2], c[2][1], c[2][2], util.shape_text(s))
  end
  return {s[1], h, w, s[4]}
end

function Cropping2D:repr()
  return margins.repr(self, self.cropping)
end

return Cropping2D
