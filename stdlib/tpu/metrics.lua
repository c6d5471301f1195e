-- Metrics in partial-sums form, so a data set's value is exact whatever the batching:
-- metric.partial(y_true, y_pred [, weights]) -> numerator, denominator (scalar tensors); the
-- value is sum(numerators) / sum(denominators). `weights` ([batch] f32: 1 for an example, 0
-- for a row fit padded a partial batch with) is given to partial functions that take a third
-- parameter; fit refuses to pad a batch for a metric whose partial does not. Calling a metric
-- gives the batch value directly:
--
--   metrics.accuracy(labels, logits)   -- scalar f32 tensor
--   model:compile{metrics = {"accuracy"}, ...}
--   model:compile{metrics = {metrics.Perplexity {from_logits = true, mask_token_id = 0}}, ...}
-- A metric may map the ratio to its value (`result`): perplexity is exp(mean token loss).
local core = require "tpu.core"
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local M = {}

local Metric = {}
Metric.__index = Metric
-- metric(y_true, y_pred) -> the batch value; metric{options} -> a configured copy (e.g.
-- metrics.top_k_accuracy{k = 3}) for metrics defined with `configure`.
Metric.__call = function(self, y_true, y_pred, extra)
  errors.none(3, self.name, extra)
  if type(y_true) == "table" and y_pred == nil and not util.is_tensor(y_true) then
    if not self.configure then
      util.fail("metrics.%s takes no options, got %s", self.name, util.show(y_true))
    end
    return self.configure(y_true)
  end
  errors.check(1, self.name, y_true, "tensor")
  errors.check(2, self.name, y_pred, "tensor")
  local num, den = self.partial(y_true, y_pred)
  return self.result and self.result(num / den) or num / den
end
Metric.__tostring = function(self) return "metrics." .. self.name end

-- metrics.define{name = "my_metric", partial = function(y_true, y_pred, weights) return num, den end}
function M.define(spec, extra)
  errors.none(2, "define", extra)
  if type(spec) ~= "table" or type(spec.name) ~= "string" or type(spec.partial) ~= "function" then
    util.fail("metrics.define needs {name = <string>, partial = <function>}, got %s", util.show(spec))
  end
  local weighted = debug.getinfo(spec.partial, "u").nparams >= 3
  return setmetatable({name = spec.name, partial = spec.partial, configure = spec.configure,
                       result = spec.result, weighted = weighted}, Metric)
end

-- Sum of v (leading axis: examples) and its element count, each example weighted.
local function weighted_sum(v, weights)
  if not weights then
    return v:sum(), core.tensor(util.numel(v.shape), {dtype = "f32"})
  end
  local shape = {v.shape[1]}
  for i = 2, v.ndim do shape[i] = 1 end
  local per_row = util.numel(v.shape) // math.max(v.shape[1], 1)
  return (v * weights:reshape(shape)):sum(), weights:sum() * per_row
end

-- Binary accuracy of each output unit: class 1 where a sigmoid's (or softmax's) output is
-- above 0.5, or any other output (logits, as a loss by name reads it) above 0; labels above
-- 0.5 are class 1.
local function binary_hits(y_true, y_pred, name)
  local Activation = package.loaded["tpu.nn.Activation"]
  local z = Activation and Activation._logits_of(y_pred, "sigmoid")
  local probs = Activation and Activation._probability_activation(y_pred)
  local pred = z and z:gt(0) or probs and y_pred:gt(0.5) or y_pred:gt(0)
  local labels = y_true:cast("f32")
  if labels.ndim == y_pred.ndim - 1 and util.numel(labels.shape) == util.numel(y_pred.shape) then
    labels = labels:reshape(y_pred.shape)
  end
  if not util.same_shape(labels.shape, y_pred.shape) then
    util.fail("%s: labels %s do not match predictions %s", name, util.describe(y_true), util.describe(y_pred))
  end
  return pred:eq(labels:gt(0.5)):cast("f32")
end

-- Keras's "accuracy", chosen by the shapes as Keras chooses it: one output unit, binary
-- accuracy; labels shaped like the predictions (one-hot), the argmax of both; else class ids
-- (0-based, any integer dtype) against the argmax of the scores over the last axis.
M.accuracy = M.define {name = "accuracy", partial = function(y_true, y_pred, weights)
  if y_pred.ndim >= 2 and y_pred.shape[y_pred.ndim] == 1 then
    return weighted_sum(binary_hits(y_true, y_pred, "accuracy"), weights)
  end
  local pred = y_pred:argmax(-1)
  if util.same_shape(y_true.shape, y_pred.shape) then
    return weighted_sum(pred:eq(y_true:argmax(-1)):cast("f32"), weights)
  end
  local labels = y_true
  if labels.ndim == y_pred.ndim and labels.shape[labels.ndim] == 1 then
    labels = labels:reshape(pred.shape)
  end
  if labels.dtype ~= "i32" then labels = labels:cast("i32") end
  if util.numel(labels.shape) ~= util.numel(pred.shape) then
    util.fail("accuracy: labels %s do not match predictions %s",
      util.describe(y_true), util.describe(y_pred))
  end
  return weighted_sum(pred:eq(labels):cast("f32"), weights)
end}

-- Keras's binary_accuracy: every output unit read as "accuracy" reads one unit (a sigmoid's
-- output above 0.5, any other output, logits as a loss by name reads it, above 0), whatever
-- the number of units, against labels above 0.5.
M.binary_accuracy = M.define {name = "binary_accuracy", partial = function(y_true, y_pred, weights)
  return weighted_sum(binary_hits(y_true, y_pred, "binary_accuracy"), weights)
end}

-- Keras's categorical_accuracy: the argmax of one-hot (or soft) labels, shaped like the
-- predictions, against the argmax of the scores.
M.categorical_accuracy = M.define {name = "categorical_accuracy", partial = function(y_true, y_pred, weights)
  if not util.same_shape(y_true.shape, y_pred.shape) then
    util.fail("categorical_accuracy: labels %s do not match predictions %s (expected one-hot labels "
      .. "of the predictions' shape)", util.describe(y_true), util.describe(y_pred))
  end
  return weighted_sum(y_pred:argmax(-1):eq(y_true:argmax(-1)):cast("f32"), weights)
end}

-- Integer labels (any integer dtype, 0-based) as [batch] or [batch, 1].
local function class_labels(name, y_true, y_pred)
  local labels = y_true
  if labels.ndim == y_pred.ndim and labels.shape[labels.ndim] == 1 then
    labels = labels:reshape({table.unpack(labels.shape, 1, labels.ndim - 1)})
  end
  if labels.ndim ~= y_pred.ndim - 1 or util.numel(labels.shape) * y_pred.shape[y_pred.ndim]
     ~= util.numel(y_pred.shape) then
    util.fail("%s: labels %s do not match predictions %s", name, util.describe(y_true),
      util.describe(y_pred))
  end
  return labels.dtype == "i32" and labels or labels:cast("i32")
end

-- Whether the true class is among the k highest scores: fewer than k classes score strictly
-- higher than it (ties count in its favour).
local function top_k(k)
  return M.define {name = "top_k_accuracy", partial = function(y_true, y_pred, weights)
    local labels = class_labels("top_k_accuracy", y_true, y_pred)
    local scores = y_pred:cast("f32")
    local depth = y_pred.shape[y_pred.ndim]
    -- selected, not multiplied by the one-hot: a -inf score elsewhere times 0 would be NaN
    local true_score = core.where(labels:one_hot(depth):gt(0), scores, 0):sum(-1, true)
    local above = scores:gt(true_score):cast("f32"):sum(-1)
    return weighted_sum(above:lt(k):cast("f32"), weights)
  end, configure = function(opts)
    util.check_options({__name = "top_k_accuracy"}, opts, {"k"})
    if not util.is_positive_integer(opts.k) then
      util.fail("top_k_accuracy: k must be a positive integer, got %s", util.show(opts.k))
    end
    return top_k(math.tointeger(opts.k))
  end}
end

-- metrics.top_k_accuracy (k = 5 by default), metrics.top_k_accuracy{k = 3}.
M.top_k_accuracy = top_k(5)

M.mse = M.define {name = "mse", partial = function(y_true, y_pred, weights)
  y_true = require("tpu.losses").match_targets("mse", y_true, y_pred)
  local d = y_pred:cast("f32") - y_true:cast("f32")
  return weighted_sum(d:square(), weights)
end}

-- Keras's name of mse; in logs it keeps the name it was asked by, as Keras's does.
M.mean_squared_error = M.define {name = "mean_squared_error", partial = M.mse.partial}

-- Mean absolute error (Keras's "mae", "mean_absolute_error").
local function mae(name)
  return M.define {name = name, partial = function(y_true, y_pred, weights)
    y_true = require("tpu.losses").match_targets(name, y_true, y_pred)
    return weighted_sum((y_pred:cast("f32") - y_true:cast("f32")):abs(), weights)
  end}
end
M.mae, M.mean_absolute_error = mae("mae"), mae("mean_absolute_error")

-- Keras's sparse_categorical_accuracy: class ids (0-based, [batch] or [batch, 1]) against the
-- argmax of the scores over the last axis, whatever the number of classes.
M.sparse_categorical_accuracy = M.define {name = "sparse_categorical_accuracy",
  partial = function(y_true, y_pred, weights)
    local labels = class_labels("sparse_categorical_accuracy", y_true, y_pred)
    return weighted_sum(y_pred:argmax(-1):eq(labels):cast("f32"), weights)
  end}

-- exp of the mean cross-entropy over the tokens not equal to mask_token_id (Keras-NLP's
-- Perplexity: from_logits defaults to false, probabilities). By name ("perplexity") it reads
-- the model's output as the losses by name do: logits, unless it is a softmax's output.
local function perplexity(from_logits, mask_id)
  return M.define {name = "perplexity", partial = function(y_true, y_pred, weights)
    local ce, keep = require("tpu.losses")._token_crossentropy("perplexity", y_true, y_pred,
                                                             from_logits, mask_id)
    if weights then
      local shape = {weights.shape[1]}
      for i = 2, keep.ndim do shape[i] = 1 end
      keep = keep * weights:reshape(shape)
    end
    return (ce * keep):sum(), keep:sum()
  end, result = function(v) return type(v) == "number" and math.exp(v) or v:exp() end}
end

M.perplexity = perplexity("auto", nil)

function M.Perplexity(opts, extra)
  errors.none(2, "Perplexity", extra)
  opts = opts or {}
  util.check_options({__name = "Perplexity"}, opts, {"from_logits", "mask_token_id", "name"})
  if opts.from_logits ~= nil and type(opts.from_logits) ~= "boolean" then
    util.fail("Perplexity: from_logits must be true or false, got %s", util.show(opts.from_logits))
  end
  if opts.mask_token_id ~= nil and math.type(opts.mask_token_id) ~= "integer" then
    util.fail("Perplexity: mask_token_id must be an integer token id (e.g. 0, the padding id), "
      .. "got %s", util.show(opts.mask_token_id))
  end
  local m = perplexity(opts.from_logits == true, opts.mask_token_id)
  if opts.name ~= nil then m.name = tostring(opts.name) end
  return m
end

-- "acc": accuracy logged under the name it was asked by ("acc", "val_acc"), as Keras 3 does.
local acc = M.define {name = "acc", partial = M.accuracy.partial}

-- A metric from a name, a metric object, or a function(y_true, y_pred) -> batch mean.
function M.get(m, extra)
  errors.none(2, "get", extra)
  if getmetatable(m) == Metric then return m end
  if type(m) == "string" then
    local found = m == "acc" and acc or rawget(M, m)
    if getmetatable(found) == Metric then return found end
  end
  if type(m) == "function" then
    return M.define {name = "metric", partial = function(y_true, y_pred)  -- batch-size weighted
      local n = y_pred.shape[1]
      return m(y_true, y_pred):cast("f32") * n, core.tensor(n, {dtype = "f32"})
    end}
  end
  local known = {"accuracy", "acc", "binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy", "top_k_accuracy", "mse",
                 "mean_squared_error", "mae", "mean_absolute_error", "perplexity"}
  util.fail("unknown metric %s%s (expected a metric or one of: %s)", util.show(m), errors.did_you_mean(m, known),
    table.concat(known, ", "))
end

-- A name tpu.metrics lacks is an error listing what it has.
return errors.strict_namespace(M, "tpu.metrics")
