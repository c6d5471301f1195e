-- What MaxPool1D and AvgPool1D share: arguments, output shape, printing, and the call, which
-- runs the 2-D pooling over [batch, steps, 1, channels] (a window of pool_size x 1).
--   nn.MaxPool1D()                 -- windows of 2 steps, strides = pool_size, padding "valid"
--   nn.MaxPool1D(3, {strides = 2, padding = "same"})
--   nn.AvgPool1D {pool_size = 4}
local util = require "tpu.nn.util"
local pooling = require "tpu.nn.pooling"

local M = {}

-- A positive integer, or a list {n} of one (Keras takes a 1-tuple).
local function size(v, what)
  if type(v) == "table" and not util.is_tensor(v) and #v == 1 then v = v[1] end
  if not util.is_positive_integer(v) then
    util.fail("%s must be a positive integer, got %s", what, util.show(v))
  end
  return math.tointeger(v)
end

-- (pool_size, opts) or (opts): a first argument that is a number or a list {n} is the size.
function M.init(self, a, b)
  local pool, opts = pooling.size_and_options(self, a, b)
  self:init_common(opts)
  self.pool_size = size(pool or opts.pool_size or 2, self.__name .. ": pool_size")
  self.strides = opts.strides == nil and self.pool_size or size(opts.strides, self.__name .. ": strides")
  self.padding = util.padding(opts.padding, self.__name)
end

function M.build(self, input_shape)
  if #input_shape ~= 3 then
    util.fail("%s '%s' expects input [batch, steps, channels], got %s", self.__name, self.name,
      util.shape_text(input_shape))
  end
  self.input_spec = {ndim = 3}
  M.output_shape(self, input_shape)
end

function M.output_shape(self, s)
  local n = util.window_out(s[2], self.pool_size, self.strides, self.padding)
  if s[2] >= 0 and n < 1 then
    util.fail("%s '%s': a window of %d steps does not fit input %s with padding \"%s\"", self.__name,
      self.name, self.pool_size, util.shape_text(s), self.padding)
  end
  return {s[1], n, s[3]}
end

function M.repr(self)
  local text = string.format("nn.%s(%d", self.__name, self.pool_size)
  if self.strides ~= self.pool_size then text = text .. string.format(", strides %d", self.strides) end
  return text .. ", " .. self.padding .. ")"
end

-- The 2-D x:<method> over [batch, steps, 1, channels]: a window of pool_size x 1.
function M.apply(self, x, method)
  local s = x.shape
  local y = x:reshape {s[1], s[2], 1, s[3]}
  y = y[method](y, {pool_size = {self.pool_size, 1}, strides = {self.strides, 1}, padding = self.padding})
  local out = y.shape
  return y:reshape {out[1], out[2], out[4]}
end

-- A 1-D pooling layer class whose call applies the 2-D x:<method> over a width of 1.
function M.class(name, method) return pooling.class(name, method, M) end

return M
