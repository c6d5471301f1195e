-- Standardizes its input feature by feature, as Keras's Normalization:
--   y = (x - mean) / max(sqrt(variance), 1e-7)
-- with one mean and variance per entry of `axis` (default -1: per channel). Given mean and
-- variance (numbers, or lists with one entry per feature) they are constants; without them
-- the layer has non-trainable weights mean (zeros), variance (ones) and count (the number of
-- values they were computed from, 0), which layer:adapt(x) sets from the data x, as Keras's
-- adapt (model:load reads them as any weight).
--
--   nn.Normalization()     nn.Normalization {mean = {0.485, 0.456, 0.406}, variance = {0.052, 0.05, 0.051}}
--   local norm = nn.Normalization(); norm:adapt(train_x)    -- before compile and fit
local core = require "tpu.core"
local Module = require "tpu.nn.Module"
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local Normalization = Module:extend("Normalization")
Normalization.token_wise = true  -- each position on its own: model:generate may run it a token at a time
Normalization.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local epsilon = 1e-7  -- Keras's backend epsilon, the smallest standard deviation divided by

local function statistic(name, v)
  if v == nil or type(v) == "number" then return v end
  local ok = type(v) == "table" and not util.is_tensor(v) and #v > 0
  for i = 1, ok and #v or 0 do ok = ok and type(v[i]) == "number" end
  if not ok then
    util.fail("Normalization: %s must be a number or a list of numbers, got %s", name, util.show(v))
  end
  return util.copy(v)
end

function Normalization:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, util.options {"axis", "mean", "variance"})
  self:init_common(opts)
  self.axis = opts.axis or -1
  if math.type(self.axis) ~= "integer" or self.axis == 0 or self.axis == 1 then
    util.fail("Normalization: axis must be a feature axis (an integer other than 0 and 1, the "
      .. "batch; -1 the last), got %s", util.show(opts.axis))
  end
  self.mean_value, self.variance_value = statistic("mean", opts.mean), statistic("variance", opts.variance)
  if (self.mean_value == nil) ~= (self.variance_value == nil) then
    util.fail("Normalization: give both mean and variance, or neither (then layer:adapt(x) sets them)")
  end
end

-- The shape {1, .., features, .., 1} the statistics broadcast with.
function Normalization:build(input_shape)
  local n = #input_shape
  local axis = util.axis(self.axis, n)
  if axis < 2 or axis > n then
    util.fail("Normalization '%s': axis %d is not a feature axis of the input %s", self.name,
      self.axis, util.shape_text(input_shape))
  end
  local features = input_shape[axis]
  self.broadcast = {}
  for i = 1, n do self.broadcast[i] = i == axis and features or 1 end
  for _, name in ipairs {"mean_value", "variance_value"} do
    local v = self[name]
    if type(v) == "table" and #v ~= features then
      util.fail("Normalization '%s': %s has %d entries for %d features (axis %d of %s)", self.name,
        name:sub(1, -7), #v, features, self.axis, util.shape_text(input_shape))
    end
  end
  if self.mean_value == nil then
    self:add_weight {name = "mean", shape = {features}, initializer = "zeros", dtype = "f32", trainable = false}
    self:add_weight {name = "variance", shape = {features}, initializer = "ones", dtype = "f32", trainable = false}
    self:add_weight {name = "count", shape = {}, initializer = "zeros", dtype = "i32", trainable = false}
  end
end

local function as_tensor(v, shape)
  if type(v) == "number" then return v end
  return core.tensor(v, {dtype = "f32"}):reshape(shape)
end

function Normalization:call(x, _ctx)
  local mean = self.mean_value and as_tensor(self.mean_value, self.broadcast) or self.mean:reshape(self.broadcast)
  local variance = self.variance_value and as_tensor(self.variance_value, self.broadcast)
                   or self.variance:reshape(self.broadcast)
  local xf = util.cast_float(x, "f32")
  local std = type(variance) == "number" and math.max(math.sqrt(variance), epsilon)
              or variance:sqrt():maximum(epsilon)
  return (xf - mean) / std
end

-- Sets mean, variance and count from the data x (a tensor of the input's shape, any batch).
-- Per-feature mean, variance (population) and value count of one batch x.
function Normalization:_batch_moments(x)
  self:maybe_build(x.shape)
  local axes = {}
  for i = 1, x.ndim do if self.broadcast[i] == 1 then axes[#axes + 1] = i end end
  local xf = util.cast_float(x, "f32")
  local mean = xf:mean(axes, true)
  local variance = (xf - mean):square():mean(axes, true)
  return mean, variance, util.numel(x.shape) // self.broadcast[util.axis(self.axis, x.ndim)]
end

-- The moments of a data set's batches, combined batch by batch (Chan et al.'s update of the
-- mean and the sum of squared deviations), as Keras's adapt streams a data set.
function Normalization:_data_moments(ds)
  local mean, m2, n
  for x, more in ds:iter() do
    if more ~= nil or not util.is_tensor(x) then
      util.fail("Normalization '%s': adapt takes a data set of inputs alone, got elements of several "
        .. "parts (drop the labels first: ds:map(function(x, y) return x end))", self.name)
    end
    local bm, bv, bn = self:_batch_moments(x)
    if not mean then
      mean, m2, n = bm, bv * bn, bn
    else
      local delta, total = bm - mean, n + bn
      mean = mean + delta * (bn / total)
      m2 = m2 + bv * bn + delta:square() * (n * bn / total)
      n = total
    end
  end
  if not mean then util.fail("Normalization '%s': adapt's data set produced no batches", self.name) end
  return mean, m2 / n, n
end

-- Sets mean, variance and count from x: a tensor, or a tpu.data data set of input batches.
function Normalization:adapt(x, extra)
  errors.none(2, "adapt", extra)
  local is_data = type(x) == "table" and type(x.iter) == "function" and type(x.cardinality) == "function"
  if not util.is_tensor(x) and not is_data then
    util.fail("Normalization: adapt needs a tensor or a data set (tpu.data), got %s", util.show(x))
  end
  if self.mean_value ~= nil then
    util.fail("Normalization '%s': adapt sets the statistics of a layer built without mean and variance", self.name)
  end
  if is_data and x:cardinality() == -1 then
    util.fail("Normalization '%s': adapt's data set never ends (cycle()); give it a finite one", self.name)
  end
  local mean, variance, count
  if is_data then mean, variance, count = self:_data_moments(x)
  else mean, variance, count = self:_batch_moments(x) end
  local feature = mean.shape[util.axis(self.axis, mean.ndim)]
  local values = {mean = mean:reshape({feature}), variance = variance:reshape({feature}),
                  count = core.tensor(count, {dtype = "i32"})}
  for _, e in ipairs(self._weights) do
    e.value = values[e.name]
    self[e.name] = e.value
  end
end

function Normalization:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function Normalization:repr()
  return string.format("nn.Normalization(axis = %d)", self.axis)
end

return Normalization
