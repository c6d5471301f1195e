-- Loss functions: fn(y_true, y_pred [, opts]) -> scalar f32 tensor (mean over the batch).
-- Each built-in one is the batch mean of a per-example loss, losses.per_example(fn) -> [batch]
-- f32 tensor; fit weighs those (padding rows weigh 0) and sums them across cores.
--
--   losses.sparse_categorical_crossentropy(labels, logits)            -- from_logits by default
--   losses.sparse_categorical_crossentropy(labels, probs, {from_logits = false})
--   model:compile{loss = "sparse_categorical_crossentropy", ...}
-- Labels are 0-based class ids of any integer dtype (u8, i32), shaped like y_pred without its
-- last axis (a trailing axis of size 1 is accepted too).
local util = require "tpu.nn.util"

local M = {}

local EPS = 1e-7

local function f32(x)
  return x.dtype == "f32" and x or x:cast("f32")
end

local function check_opts(name, opts)
  opts = opts or {}
  util.check_options({__name = name}, opts, {"from_logits"})
  return opts
end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- Integer class ids shaped like y_pred's leading axes.
local function sparse_labels(name, y_true, y_pred)
  local want = {table.unpack(y_pred.shape, 1, y_pred.ndim - 1)}
  local labels = y_true
  if y_true.ndim == y_pred.ndim and y_true.shape[y_true.ndim] == 1 then
    labels = y_true:reshape(want)
  end
  if not same_shape(labels.shape, want) then
    util.fail("%s: labels %s do not match predictions %s (expected labels of shape [%s])",
      name, util.describe(y_true), util.describe(y_pred), table.concat(want, ","))
  end
  return labels.dtype == "i32" and labels or labels:cast("i32")
end

local function log_probs(y_pred, from_logits)
  if from_logits then return f32(y_pred):log_softmax(-1) end
  return f32(y_pred):maximum(EPS):log()
end

local per_example = {}

-- The mean over every axis but the first: one value per example.
local function per_row(v)
  if v.ndim == 1 then return v end
  local axes = {}
  for i = 2, v.ndim do axes[i - 1] = i end
  return v:mean(axes)
end

-- Registers a built-in loss from its per-example form.
local function define(name, fn)
  per_example[name] = fn
  M[name] = function(y_true, y_pred, opts) return fn(y_true, y_pred, opts):mean() end
  per_example[M[name]] = fn
end

define("sparse_categorical_crossentropy", function(y_true, y_pred, opts)
  opts = check_opts("sparse_categorical_crossentropy", opts)
  local labels = sparse_labels("sparse_categorical_crossentropy", y_true, y_pred)
  local logp = log_probs(y_pred, opts.from_logits ~= false)
  local depth = y_pred.shape[y_pred.ndim]
  return per_row(-(logp * labels:one_hot(depth)):sum(-1))
end)

local function check_same(name, y_true, y_pred)
  if not same_shape(y_true.shape, y_pred.shape) then
    util.fail("%s: targets %s do not match predictions %s", name,
      util.describe(y_true), util.describe(y_pred))
  end
end

-- One-hot (or soft) targets.
define("categorical_crossentropy", function(y_true, y_pred, opts)
  opts = check_opts("categorical_crossentropy", opts)
  check_same("categorical_crossentropy", y_true, y_pred)
  local logp = log_probs(y_pred, opts.from_logits ~= false)
  return per_row(-(logp * f32(y_true)):sum(-1))
end)

-- Targets in {0, 1}; from_logits = false by default (sigmoid outputs).
define("binary_crossentropy", function(y_true, y_pred, opts)
  opts = check_opts("binary_crossentropy", opts)
  check_same("binary_crossentropy", y_true, y_pred)
  local z, x = f32(y_true), f32(y_pred)
  if opts.from_logits then
    -- max(x, 0) - x z + log(1 + exp(-|x|)), stable for large |x|
    return per_row(x:relu() - x * z + ((-x:abs()):exp() + 1):log())
  end
  local p = x:maximum(EPS):minimum(1 - EPS)
  return per_row(-(z * p:log() + (1 - z) * (1 - p):log()))
end)

define("mse", function(y_true, y_pred)
  check_same("mse", y_true, y_pred)
  return per_row((f32(y_pred) - f32(y_true)):square())
end)
M.mean_squared_error = M.mse
per_example.mean_squared_error = per_example.mse

local names = {"sparse_categorical_crossentropy", "categorical_crossentropy",
               "binary_crossentropy", "mse"}

-- The per-example form of a built-in loss (given by name or function), else nil: a loss of
-- the user's returns one value for the batch.
function M.per_example(loss)
  return per_example[loss]
end

-- A loss function(y_true, y_pred) from a name or a function.
function M.get(loss)
  if type(loss) == "function" then return loss end
  if type(loss) == "table" and getmetatable(loss) and getmetatable(loss).__call then return loss end
  if type(loss) == "string" and per_example[loss] then return M[loss] end
  util.fail("unknown loss %s (expected a function(y_true, y_pred) or one of: %s)",
    util.show(loss), table.concat(names, ", "))
end

return M
