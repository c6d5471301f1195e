-- Batch normalization over every axis but the last (channels, NHWC):
--   training:  y = (x - mean_batch) / sqrt(var_batch + epsilon) * gamma + beta (computed as
--              x * inv + (beta - mean_batch * inv), inv = gamma / sqrt(...)), and the moving
--              statistics move: moving = momentum * moving + (1 - momentum) * batch value
--   inference: the same with the moving statistics.
-- The moving statistics are non-trainable weights; the train step returns their new values
-- (see update_state in nn.Module) and fit stores them. A layer with trainable = false, or under
-- one (ctx.frozen), always runs in inference mode (so a frozen base model keeps its statistics
-- when fine-tuning, as in Keras).
-- Rows that pad a partial batch (ctx.sample_weight 0) take no part in the statistics. Under a
-- strategy each core normalizes with the statistics of its own rows, and the moving averages
-- move by those of every core's rows (so they stay the same on every core); `sync = true`
-- normalizes with the statistics of the whole global batch instead.
--
--   nn.BatchNorm()    nn.BatchNorm {momentum = 0.9, epsilon = 1e-5, center = false, sync = true}
local core = require "tpu.core"
local Module = require "tpu.nn.Module"
local scale_center = require "tpu.nn.scale_center"
local util = require "tpu.nn.util"

local BatchNorm = Module:extend("BatchNorm")
BatchNorm.token_wise = true  -- each position on its own: model:generate may run it a token at a time
BatchNorm.takes_one_tensor = true  -- a list of tensors given to it is an error naming it

local options = util.options {"momentum", "epsilon", "center", "scale", "beta_initializer",
                              "gamma_initializer", "sync"}

function BatchNorm:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, options)
  self:init_common(opts)
  self.momentum = util.check_range("BatchNorm", "momentum", opts.momentum or 0.99, 0, 1, true)
  scale_center.init(self, "BatchNorm", opts)
  self.sync = util.flag("BatchNorm", opts, "sync", false)
end

function BatchNorm:build(input_shape)
  local c = input_shape[#input_shape]
  self.input_spec = {min_ndim = 2, axes = {[-1] = c}}
  scale_center.add_weights(self, c)
  for _, w in ipairs {{"moving_mean", "zeros"}, {"moving_variance", "ones"}} do
    self:add_weight {name = w[1], shape = {c}, initializer = w[2], dtype = "f32", trainable = false}
  end
end

-- The weights' sum, or 1 where there are none (a core's rows all padding): the weighted mean
-- divides by the sum itself, however small (Keras's weighted moments divide with divide_no_nan).
local function positive_or_one(total)
  return core.where(total:gt(0), total, 1)
end

-- Weighted mean and (biased) variance over every axis but the last, with `reduce` summing
-- the sums over the cores (or not). The variance's gradient does not flow into the mean, as in
-- tf.nn.moments: it is sum(rows * (x - mean)) * factor, zero but for rounding, and computing it
-- took two passes over x-sized tensors per layer in a training step's backward (one stored).
local function statistics(xf, axes, rows, count, reduce)
  local total = positive_or_one(reduce(count))
  local mean = reduce(rows and (xf * rows):sum(axes) or xf:sum(axes)) / total
  local sq = (xf - mean:stop_gradient()):square()
  local var = reduce(rows and (sq * rows):sum(axes) or sq:sum(axes)) / total
  return mean, var
end

local function identity(v) return v end

-- Batch statistics over every axis but the last, and the moving averages' new values.
function BatchNorm:_batch_statistics(xf, ctx)
  local axes, shape = {}, {xf.shape[1]}
  for i = 1, xf.ndim - 1 do axes[i] = i end
  for i = 2, xf.ndim do shape[i] = 1 end
  local w = ctx.sample_weight
  local rows = w and w:reshape(shape)
  local per_row = util.numel(xf.shape) // (xf.shape[1] * xf.shape[xf.ndim])
  local count = (w and w:sum() or core.tensor(xf.shape[1] + 0.0)) * per_row
  local mean, var = statistics(xf, axes, rows, count, identity)  -- this core's rows
  local moving_mean, moving_var = mean, var
  local reduce = ctx.cross_replica
  if reduce then  -- every core's rows
    local all_mean, all_var = statistics(xf, axes, rows, count, reduce)
    moving_mean = all_mean
    moving_var = self.sync and all_var or reduce(var * count) / positive_or_one(reduce(count))
    if self.sync then mean, var = all_mean, all_var end
  end
  local m = self.momentum
  self:update_state(ctx, "moving_mean", self.moving_mean * m + moving_mean * (1 - m))
  self:update_state(ctx, "moving_variance", self.moving_variance * m + moving_var * (1 - m))
  return mean, var
end

-- The per-channel factors folded first (scale_center.folded): the normalized output is
-- x * factor + shift, so neither it nor its gradient stores x - mean (a training step's passes
-- over the normalized tensor: 22 -> 13 reads and writes).
function BatchNorm:call(x, ctx)
  local xf = util.cast_float(x, "f32")
  local mean, var = self.moving_mean, self.moving_variance
  if ctx and ctx.training and self.trainable and not ctx.frozen then mean, var = self:_batch_statistics(xf, ctx) end
  return scale_center.folded(self, xf, mean, (var + self.epsilon):rsqrt())
end

function BatchNorm:compute_output_shape(input_shape)
  return util.copy(input_shape)
end

function BatchNorm:repr()
  return string.format("nn.BatchNorm(%s)", self.built and tostring(self.moving_mean.shape[1]) or "?")
end

return BatchNorm
