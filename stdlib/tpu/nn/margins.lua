-- What ZeroPadding2D and Cropping2D share: an amount per side of the height and width axes,
-- given as Keras gives it, and the (amount, opts) or (opts) arguments.
--   2                  -> 2 rows at the top and bottom, 2 columns left and right
--   {1, 2}             -> 1 row at the top and bottom, 2 columns left and right
--   {{3, 0}, {1, 2}}   -> {{top, bottom}, {left, right}}
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local M = {}

local function count(v) return util.is_positive_integer(v) or v == 0 end

local function sides(v)
  if count(v) then return {math.tointeger(v), math.tointeger(v)} end
  if type(v) == "table" and not util.is_tensor(v) and #v == 2 and count(v[1]) and count(v[2]) then
    return {math.tointeger(v[1]), math.tointeger(v[2])}
  end
end

-- {{top, bottom}, {left, right}} from any of the three forms, or an error naming `who`.
function M.parse(who, what, v)
  local n = sides(v)
  if n then return {{n[1], n[1]}, {n[2], n[2]}} end
  if type(v) == "table" and not util.is_tensor(v) and #v == 2 then
    local h, w = sides(v[1]), sides(v[2])
    if h and w and type(v[1]) == "table" and type(v[2]) == "table" then return {h, w} end
  end
  util.fail("%s: %s must be a non-negative integer, a pair {height, width} of them or "
    .. "{{top, bottom}, {left, right}}, got %s", who, what, util.show(v))
end

-- layer(amount, opts) or layer{<what> = amount, ...}: a first argument that is a number or a
-- list is the amount. Sets self[what].
function M.init(self, what, default, a, b)
  local amount, opts = a, b
  if a == nil or (type(a) == "table" and not util.is_tensor(a) and a[1] == nil) then
    errors.none(2, self.__name, b)
    amount, opts = nil, a
  end
  opts = opts or {}
  util.check_options(self, opts, util.options {what})
  if amount ~= nil and opts[what] ~= nil then
    util.fail("%s: %s given twice (%s and %s = %s)", self.__name, what, util.show(amount), what,
      util.show(opts[what]))
  end
  self:init_common(opts)
  local v = amount
  if v == nil then v = opts[what] end
  if v == nil then v = default end
  self[what] = M.parse(self.__name, what, v)
end

-- Checks a rank-4 NHWC input shape.
function M.check_nhwc(self, input_shape)
  if #input_shape ~= 4 then
    util.fail("%s '%s' expects NHWC input [batch, height, width, channels], got %s",
      self.__name, self.name, util.shape_text(input_shape))
  end
  self.input_spec = {ndim = 4}
end

-- "nn.ZeroPadding2D({{3, 3}, {3, 3}})"
function M.repr(self, m)
  return string.format("nn.%s({{%d, %d}, {%d, %d}})", self.__name, m[1][1], m[1][2], m[2][1], m[2][2])
end

return M
