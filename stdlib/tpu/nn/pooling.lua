-- What MaxPool2D and AvgPool2D share: arguments, output shape, printing.
--   nn.MaxPool2D()                 -- 2x2 windows, strides = pool_size, padding "valid"
--   nn.MaxPool2D(3, {strides = 2, padding = "same"})
--   nn.AvgPool2D {pool_size = {2, 2}}
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local M = {}

local options = util.options {"pool_size", "strides", "padding"}

-- (pool_size, opts) or (opts): a first argument that is a number or a list {h, w} is the size.
-- Returns the size (nil when not given first) and the checked options; the 1-D poolings too.
function M.size_and_options(self, a, b)
  local size, opts = a, b
  if a == nil or (type(a) == "table" and not util.is_tensor(a) and type(a[1]) ~= "number") then
    errors.none(2, self.__name, b)
    size, opts = nil, a
  end
  opts = opts or {}
  util.check_options(self, opts, options)
  if size ~= nil and opts.pool_size ~= nil then
    util.fail("%s: pool_size given twice (%s and pool_size = %s)", self.__name, util.show(size),
      util.show(opts.pool_size))
  end
  return size, opts
end

function M.init(self, a, b)
  local size, opts = M.size_and_options(self, a, b)
  self:init_common(opts)
  self.pool_size = util.pair(size or opts.pool_size or 2, self.__name .. ": pool_size")
  self.strides = util.pair(opts.strides or self.pool_size, self.__name .. ": strides")
  self.padding = util.padding(opts.padding, self.__name)
end

function M.build(self, input_shape)
  if #input_shape ~= 4 then
    util.fail("%s '%s' expects NHWC input [batch, height, width, channels], got %s",
      self.__name, self.name, util.shape_text(input_shape))
  end
  self.input_spec = {ndim = 4}
  M.output_shape(self, input_shape)
end

function M.output_shape(self, s)
  local h = util.window_out(s[2], self.pool_size[1], self.strides[1], self.padding)
  local w = util.window_out(s[3], self.pool_size[2], self.strides[2], self.padding)
  if (s[2] >= 0 and h < 1) or (s[3] >= 0 and w < 1) then
    util.fail("%s '%s': a %dx%d window does not fit input %s with padding \"%s\"", self.__name,
      self.name, self.pool_size[1], self.pool_size[2], util.shape_text(s), self.padding)
  end
  return {s[1], h, w, s[4]}
end

function M.args(self)
  return {pool_size = self.pool_size, strides = self.strides, padding = self.padding}
end

function M.repr(self)
  local p, s = self.pool_size, self.strides
  local text = string.format("nn.%s(%dx%d", self.__name, p[1], p[2])
  if s[1] ~= p[1] or s[2] ~= p[2] then text = text .. string.format(", strides %dx%d", s[1], s[2]) end
  return text .. ", " .. self.padding .. ")"
end

-- x:<method>{pool_size=, strides=, padding=}, the call of a 2-D pooling layer.
function M.apply(self, x, method) return x[method](x, M.args(self)) end

-- A pooling layer class whose call applies the 2-D x:<method>; `parts` (default: this module's)
-- holds its init, build, output_shape, repr and apply (pooling1d's for the 1-D ones).
function M.class(name, method, parts)
  parts = parts or M
  local cls = Module:extend(name)
  cls.takes_one_tensor = true  -- a list of tensors given to it is an error naming it
  cls.__init = parts.init
  cls.build = parts.build
  cls.compute_output_shape = parts.output_shape
  cls.repr = parts.repr
  function cls:call(x, _ctx) return parts.apply(self, x, method) end
  return cls
end

return M
