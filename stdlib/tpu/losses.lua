-- Loss functions: fn(y_true, y_pred [, opts]) -> scalar f32 tensor (mean over the batch).
-- Each built-in one is the batch mean of a per-example loss, losses.per_example(fn) -> [batch]
-- f32 tensor; fit weighs those (padding rows weigh 0) and sums them across cores.
--
--   losses.sparse_categorical_crossentropy(labels, probs)             -- probabilities, as Keras
--   losses.sparse_categorical_crossentropy(labels, logits, {from_logits = true})
--   model:compile{loss = "sparse_categorical_crossentropy", ...}     -- Keras's rule, below
--   model:compile{loss = losses.SparseCategoricalCrossentropy {from_logits = true}, ...}
--   losses.SparseCategoricalCrossentropy {from_logits = true, ignore_class = 0}  -- padding id
-- A loss given to compile by name (or as the built-in function) takes the model's output as
-- Keras does: when it is the output of a softmax activation (sigmoid for binary_crossentropy)
-- the activation's input, the logits, are used (no double softmax); the output of the other
-- (a softmax under binary_crossentropy) is read as probabilities; any other output is taken as
-- logits. Such an output stays one through Flatten, Reshape, Cropping2D and Dropout
-- (Activation._carry). With from_logits = false an activation's output is read through its logits
-- too (the same value, without the rounding of log(softmax)).
-- Labels are 0-based class ids of any integer dtype (u8, i32), shaped like y_pred without its
-- last axis (a trailing axis of size 1 is accepted too).
-- ignore_class (sparse_categorical_crossentropy, as Keras): positions whose label is that id
-- (padding) count for nothing; the loss is the mean over the other positions of the batch
-- ([batch, length] labels against [batch, length, vocab] logits: the mean token loss). Its
-- per-example form scales each row's token sum so that fit's mean over examples is that token
-- mean (exact on one core; with several, the cores' token means weighed by their examples).
local util = require "tpu.nn.util"
local errors = require "tpu.errors"
local core = require "tpu.core"

local M = {}

local EPS = 1e-7

local function f32(x)
  return x.dtype == "f32" and x or x:cast("f32")
end

local function check_opts(name, opts, allowed)
  opts = opts or {}
  util.check_options({__name = name}, opts, allowed or {"from_logits"})
  if opts.from_logits ~= nil and type(opts.from_logits) ~= "boolean" then
    util.fail("%s: from_logits must be true or false, got %s", name, util.show(opts.from_logits))
  end
  local ls = opts.label_smoothing
  if ls ~= nil and not (type(ls) == "number" and ls >= 0 and ls <= 1) then
    util.fail("%s: label_smoothing must be a number from 0 to 1, got %s", name, util.show(ls))
  end
  if opts.delta ~= nil and not (type(opts.delta) == "number" and opts.delta > 0 and opts.delta < math.huge) then
    util.fail("%s: delta must be a positive number, got %s", name, util.show(opts.delta))
  end
  if opts.ignore_class ~= nil and math.type(opts.ignore_class) ~= "integer" then
    util.fail("%s: ignore_class must be an integer class id (e.g. 0, the padding id), got %s",
      name, util.show(opts.ignore_class))
  end
  return opts
end

-- The tensor a loss reads and whether it holds logits. from_logits is true, false, or "auto"
-- (a loss by name): the input of the `activation` (softmax or sigmoid) that made y_pred when
-- there is one, else y_pred, taken as logits under "auto" unless the other of the two made it
-- (a softmax's output under binary_crossentropy is probabilities, not logits).
local function logits(y_pred, from_logits, activation)
  if from_logits == true then return y_pred, true end
  local Activation = package.loaded["tpu.nn.Activation"]
  local z = Activation and Activation._logits_of(y_pred, activation)
  if z then return z, true end
  if from_logits == "auto" and Activation and Activation._probability_activation(y_pred) then return y_pred, false end
  return y_pred, from_logits == "auto"
end

-- Integer class ids shaped like y_pred's leading axes.
local function sparse_labels(name, y_true, y_pred)
  local want = {table.unpack(y_pred.shape, 1, y_pred.ndim - 1)}
  local labels = y_true
  if y_true.ndim == y_pred.ndim and y_true.shape[y_true.ndim] == 1 then
    labels = y_true:reshape(want)
  end
  if not util.same_shape(labels.shape, want) then
    util.fail("%s: labels %s do not match predictions %s (expected labels of shape [%s])",
      name, util.describe(y_true), util.describe(y_pred), table.concat(want, ","))
  end
  return labels.dtype == "i32" and labels or labels:cast("i32")
end

-- Probabilities are divided by their row's sum first, as Keras does: a sigmoid's outputs (or
-- any scores that do not sum to 1) would otherwise lower the loss by all growing towards 1.
local function log_probs(y_pred, from_logits)
  local z, is_logits = logits(y_pred, from_logits, "softmax")
  if is_logits then return f32(z):log_softmax(-1) end
  local p = f32(z)
  return (p / p:sum(-1, true):maximum(EPS)):maximum(EPS):log()
end

local per_example, raw = {}, {}

-- The mean over every axis but the first: one value per example.
local function per_row(v)
  if v.ndim == 1 then return v end
  local axes = {}
  for i = 2, v.ndim do axes[i - 1] = i end
  return v:mean(axes)
end

local function check_pair(name, y_true, y_pred, opts, extra, allowed)
  errors.check(1, name, y_true, "tensor")
  errors.check(2, name, y_pred, "tensor")
  errors.none(4, name, extra)
  return check_opts(name, opts, allowed)
end

-- Registers a built-in loss from its per-example form fn(y_true, y_pred, from_logits, opts,
-- weights), opts holding its other options (ignore_class, label_smoothing). Called directly it
-- defaults to from_logits = false; by name (or as this function) in compile, Keras's rule
-- ("auto") and the options' defaults.
local function define(name, fn, allowed)
  local by_name = function(y_true, y_pred) return fn(y_true, y_pred, "auto", {}) end
  per_example[name], raw[name] = by_name, fn
  M[name] = function(y_true, y_pred, opts, extra)
    opts = check_pair(name, y_true, y_pred, opts, extra, allowed)
    return fn(y_true, y_pred, opts.from_logits == true, opts):mean()
  end
  per_example[M[name]] = by_name
end

-- The per-example losses' mean weighted by sample_weight as Keras's reduction
-- "sum_over_batch_size" takes it: sum(w * loss) / examples. sample_weight is a number or a
-- tensor of one weight per example ([batch] or [batch, 1]).
local function weighted_mean(name, losses, sample_weight)
  if sample_weight == nil then return losses:mean() end
  if type(sample_weight) == "number" then return losses:mean() * sample_weight end
  if not core.is_tensor(sample_weight) then errors.type_error(3, name, "number or tensor", sample_weight) end
  local n, w = losses.shape[1], sample_weight
  if w.ndim == 2 and w.shape[2] == 1 then w = w:reshape {w.shape[1]} end
  if w.ndim == 0 then return losses:mean() * f32(w) end
  if w.ndim ~= 1 or w.shape[1] ~= n then
    util.fail("%s: sample_weight %s does not match the %d examples (expected a number, or a "
      .. "tensor of shape [%d] or [%d,1])", name, util.describe(sample_weight), n, n, n)
  end
  return (losses * f32(w)):sum() / n
end

-- A loss object, Keras style: Class{from_logits=} is callable as loss(y_true, y_pred
-- [, sample_weight]) and compile uses its per-example form with that from_logits (false by
-- default). compile gives the per-example form the examples' weights (1, or 0 for a padding row).
local function define_class(class_name, name, allowed)
  local Class = {__name = "tpu.losses." .. class_name}
  Class.__index = Class
  Class.__call = function(self, y_true, y_pred, sample_weight, extra)
    check_pair(class_name, y_true, y_pred, nil, extra, {})
    return weighted_mean(class_name, self.per_example(y_true, y_pred), sample_weight)
  end
  Class.__tostring = function(self)  -- the options this class takes, as its constructor reads them
    local shown = {}
    for _, k in ipairs(allowed) do
      if k == "from_logits" then shown[#shown + 1] = "from_logits = " .. tostring(self.from_logits)
      elseif self[k] ~= nil then shown[#shown + 1] = k .. " = " .. tostring(self[k]) end
    end
    return string.format("%s{%s}", class_name, table.concat(shown, ", "))
  end
  M[class_name] = function(opts, extra)
    errors.none(2, class_name, extra)
    opts = errors.options(1, class_name, opts, allowed)
    opts = #allowed > 0 and check_opts(class_name, opts, allowed) or opts
    local obj = setmetatable({from_logits = opts.from_logits == true, ignore_class = opts.ignore_class,
                              label_smoothing = opts.label_smoothing, delta = opts.delta}, Class)
    local fn = raw[name]
    obj.per_example = function(y_true, y_pred, weights)
      return fn(y_true, y_pred, obj.from_logits, obj, weights)
    end
    return obj
  end
end

-- Fails on a label outside [0, classes) (ignore_class aside): one_hot would make it a row of
-- zeros, a loss of 0, and training would go on without a word.
local function check_label_range(name, labels, classes, ignore_class)
  for _, v in ipairs(labels:reshape {-1}:totable()) do
    if (v < 0 or v >= classes) and v ~= ignore_class then
      util.fail("%s: label %d is outside the %d classes of the predictions (class ids are 0-based: "
        .. "0 to %d); the model's last layer needs as many units as there are classes",
        name, v, classes, classes - 1)
    end
  end
end

-- Each position's log-probability of its label, gathered from logp [..., classes] flattened: a
-- one-hot selection summed over the classes (the same values) read every class of every
-- position and compared each with an iota of logp's size (a GPT-2's [32, 128, 1000] logits: a
-- 16 MB iota, and a pass over the logits, each step). Selected, not multiplied by a one-hot: another
-- class's -inf (a masked logit) times 0 would make the loss NaN. A label outside the classes (an
-- ignore_class of -1, or one the caller makes NaN) selects nothing, as the one-hot's row of zeros
-- did: the class it reads to stay in bounds may have a -inf logit. Past i32's flat indices, the
-- selection itself.
local function label_log_probs(logp, labels, classes)
  local positions = labels:numel()
  if positions * classes > math.maxinteger >> 32 then
    return core.where(labels:one_hot(classes):gt(0), logp, 0):sum(-1)
  end
  local at = labels:reshape {positions}:maximum(0):minimum(classes - 1)
  at = core.arange(positions, {dtype = "i32"}) * classes + at
  local selected = logp:reshape {positions * classes}:take(at):reshape(labels.shape)
  return core.where(labels:ge(0), core.where(labels:lt(classes), selected, 0), 0)
end

-- The cross-entropy of each position (labels' shape) and the labels as i32. Concrete labels
-- are checked; in a compiled step a label out of range makes its position's loss NaN, so fit
-- stops there and names it (check_labels in nn/training.lua).
local function token_crossentropy(name, y_true, y_pred, from_logits, ignore_class)
  local labels = sparse_labels(name, y_true, y_pred)
  local classes = y_pred.shape[y_pred.ndim]
  if classes == 0 then util.fail("%s: predictions %s have no classes", name, util.describe(y_pred)) end
  local ce = -label_log_probs(log_probs(y_pred, from_logits), labels, classes)
  if not core.is_traced(labels) then
    check_label_range(name, labels, classes, ignore_class)
    return ce, labels
  end
  ce = core.where(labels:ge(0), ce, 0 / 0)
  ce = core.where(labels:lt(classes), ce, 0 / 0)
  if ignore_class then ce = core.where(labels:eq(ignore_class), 0, ce) end
  return ce, labels
end

-- The sum over every axis but the first.
local function row_sums(v)
  if v.ndim == 1 then return v end
  local axes = {}
  for i = 2, v.ndim do axes[i - 1] = i end
  return v:sum(axes)
end

-- Per-token losses -> per-example values whose (weighted) mean over the examples is the mean
-- over the positions not labelled ignore_class: row sums times examples / kept positions.
local function ignoring(ce, labels, ignore_class, weights)
  local keep = labels:ne(ignore_class):cast("f32")
  local sums, kept = row_sums(ce * keep), row_sums(keep)
  local count = weights and weights:sum() or ce.shape[1]
  if weights then kept = kept * weights end
  return sums * (count / kept:sum():maximum(1))
end

-- Per-token cross-entropies and the positions that count (1 or 0, f32), for the perplexity
-- metric: mask_id = nil counts every position.
function M._token_crossentropy(name, y_true, y_pred, from_logits, mask_id)
  local ce, labels = token_crossentropy(name, y_true, y_pred, from_logits, mask_id)
  local keep = mask_id and labels:ne(mask_id):cast("f32") or ce * 0 + 1
  return ce, keep
end

define("sparse_categorical_crossentropy", function(y_true, y_pred, from_logits, opts, w)
  local ignore_class = opts.ignore_class
  local ce, labels = token_crossentropy("sparse_categorical_crossentropy", y_true, y_pred,
                                        from_logits, ignore_class)
  if ignore_class then return ignoring(ce, labels, ignore_class, w) end
  return per_row(ce)
end, {"from_logits", "ignore_class"})

-- y_true in y_pred's shape. As Keras squeezes, targets that differ from the predictions by a
-- trailing axis of size 1 ([batch] against [batch, 1], or the other way) are reshaped; any
-- other difference is an error (broadcasting [batch] against [batch, 1] would compare every
-- target with every prediction).
function M.match_targets(name, y_true, y_pred, extra)
  errors.check(1, "match_targets", name, "string")
  errors.check(2, "match_targets", y_true, "tensor")
  errors.check(3, "match_targets", y_pred, "tensor")
  errors.none(4, "match_targets", extra)
  if util.same_shape(y_true.shape, y_pred.shape) then return y_true end
  local t, p = y_true.shape, y_pred.shape
  if (#t == #p - 1 and p[#p] == 1 and util.same_shape(t, {table.unpack(p, 1, #p - 1)}))
     or (#p == #t - 1 and t[#t] == 1 and util.same_shape(p, {table.unpack(t, 1, #t - 1)})) then
    return y_true:reshape(p)
  end
  util.fail("%s: targets %s do not match predictions %s", name, util.describe(y_true), util.describe(y_pred))
end

-- Targets moved towards `toward` by label_smoothing ls, as Keras: y (1 - ls) + toward ls.
local function smoothed(y_true, ls, toward)
  local y = f32(y_true)
  if not ls or ls == 0 then return y end
  return y * (1 - ls) + toward * ls
end

-- One-hot (or soft) targets; label_smoothing spreads ls over the classes (ls / classes each).
define("categorical_crossentropy", function(y_true, y_pred, from_logits, opts)
  y_true = M.match_targets("categorical_crossentropy", y_true, y_pred)
  local logp = log_probs(y_pred, from_logits)
  local y = smoothed(y_true, opts.label_smoothing, 1 / y_pred.shape[y_pred.ndim])
  return per_row(-(logp * y):sum(-1))
end, {"from_logits", "label_smoothing"})

-- Targets in {0, 1}; label_smoothing moves them towards 0.5.
define("binary_crossentropy", function(y_true, y_pred, from_logits, opts)
  y_true = M.match_targets("binary_crossentropy", y_true, y_pred)
  local x, is_logits = logits(y_pred, from_logits, "sigmoid")
  local z = smoothed(y_true, opts.label_smoothing, 0.5)
  x = f32(x)
  if is_logits then
    -- max(x, 0) - x z + log(1 + exp(-|x|)), stable for large |x|
    return per_row(x:relu() - x * z + ((-x:abs()):exp() + 1):log())
  end
  local p = x:maximum(EPS):minimum(1 - EPS)
  return per_row(-(z * p:log() + (1 - z) * (1 - p):log()))
end, {"from_logits", "label_smoothing"})

define("mse", function(y_true, y_pred)
  y_true = M.match_targets("mse", y_true, y_pred)
  return per_row((f32(y_pred) - f32(y_true)):square())
end, {})
M.mean_squared_error = M.mse
per_example.mean_squared_error = per_example.mse

define("mae", function(y_true, y_pred)
  y_true = M.match_targets("mae", y_true, y_pred)
  return per_row((f32(y_pred) - f32(y_true)):abs())
end, {})
M.mean_absolute_error = M.mae
per_example.mean_absolute_error = per_example.mae

-- Keras's "huber": squared error / 2 up to an error of delta (default 1), linear beyond
-- (delta * (e - delta / 2)).
define("huber", function(y_true, y_pred, _, opts)
  y_true = M.match_targets("huber", y_true, y_pred)
  local d = opts.delta or 1
  local e = (f32(y_pred) - f32(y_true)):abs()
  return per_row(core.where(e:le(d), e:square() * 0.5, (e - 0.5 * d) * d))
end, {"delta"})

-- Kullback-Leibler divergence of the distributions in the last axis: both clipped to
-- [1e-7, 1] as Keras does (a 0 in y_true adds nothing, a 0 in y_pred no infinity).
define("kl_divergence", function(y_true, y_pred)
  y_true = M.match_targets("kl_divergence", y_true, y_pred)
  local t, p = f32(y_true):maximum(EPS):minimum(1), f32(y_pred):maximum(EPS):minimum(1)
  return per_row((t * (t / p):log()):sum(-1))
end, {})
M.kld = M.kl_divergence
per_example.kld = per_example.kl_divergence

define_class("SparseCategoricalCrossentropy", "sparse_categorical_crossentropy",
             {"from_logits", "ignore_class"})
define_class("CategoricalCrossentropy", "categorical_crossentropy", {"from_logits", "label_smoothing"})
define_class("BinaryCrossentropy", "binary_crossentropy", {"from_logits", "label_smoothing"})
define_class("MeanSquaredError", "mse", {})
define_class("MeanAbsoluteError", "mae", {})
define_class("Huber", "huber", {"delta"})
define_class("KLDivergence", "kl_divergence", {})

local names = {"sparse_categorical_crossentropy", "categorical_crossentropy",
               "binary_crossentropy", "mse", "mean_squared_error", "mae", "mean_absolute_error",
               "huber", "kl_divergence", "kld"}

-- The per-example form of a built-in loss (given by name or function), else nil: a loss of
-- the user's returns one value for the batch.
function M.per_example(loss)
  if type(loss) == "table" and type(rawget(loss, "per_example")) == "function" then return loss.per_example end
  return per_example[loss]
end

-- A loss function(y_true, y_pred) from a name or a function.
function M.get(loss, extra)
  errors.none(2, "get", extra)
  if type(loss) == "function" then return loss end
  if type(loss) == "table" and getmetatable(loss) and getmetatable(loss).__call then return loss end
  if type(loss) == "string" and per_example[loss] then return M[loss] end
  util.fail("unknown loss %s%s (expected a function(y_true, y_pred) or one of: %s)",
    util.show(loss), errors.did_you_mean(loss, names), table.concat(names, ", "))
end

-- A name tpu.losses lacks is an error listing what it has.
return errors.strict_namespace(M, "tpu.losses")
