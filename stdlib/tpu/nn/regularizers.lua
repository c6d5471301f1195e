-- Weight regularizers: a penalty on a weight that fit adds to the loss.
--
--   nn.Dense(64, {kernel_regularizer = nn.regularizers.l2(1e-4)})
--   nn.Dense(64, {kernel_regularizer = "l2"})          -- factor 0.01 (the default)
--   self:add_weight{name = "w", shape = {4}, regularizer = nn.regularizers.l1_l2{l1 = 1e-5, l2 = 1e-4}}
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local M = {}

local Regularizer = {}
Regularizer.__index = Regularizer
Regularizer.__call = function(self, w) return self.fn(w) end
Regularizer.__tostring = function(self) return self.text end

local function make(text, fn)
  return setmetatable({text = text, fn = fn}, Regularizer)
end

local function f32(w) return w.dtype == "f32" and w or w:cast("f32") end

local function factor(who, v)
  if type(v) ~= "number" or v < 0 then
    util.fail("regularizers.%s: the factor must be a non-negative number, got %s", who, util.show(v))
  end
  return v
end

-- l2(f): f * sum(w^2)
function M.l2(f, extra)
  errors.none(2, "l2", extra)
  f = factor("l2", f == nil and 0.01 or f)
  return make(string.format("l2(%g)", f), function(w) return f32(w):square():sum() * f end)
end

-- l1(f): f * sum(|w|)
function M.l1(f, extra)
  errors.none(2, "l1", extra)
  f = factor("l1", f == nil and 0.01 or f)
  return make(string.format("l1(%g)", f), function(w) return f32(w):abs():sum() * f end)
end

-- l1_l2{l1 = a, l2 = b}
function M.l1_l2(opts, extra)
  errors.none(2, "l1_l2", extra)
  if opts ~= nil and not errors.is(opts, "table") then errors.type_error(1, "l1_l2", "table {l1=, l2=}", opts) end
  opts = opts or {}
  util.check_options({__name = "regularizers.l1_l2"}, opts, {"l1", "l2"})
  local a, b = M.l1(opts.l1 or 0.01), M.l2(opts.l2 or 0.01)
  return make(string.format("l1_l2(%g, %g)", opts.l1 or 0.01, opts.l2 or 0.01),
    function(w) return a(w) + b(w) end)
end

function M.is_regularizer(v) return getmetatable(v) == Regularizer end

-- A regularizer, a name ("l1", "l2", "l1_l2" with the default factors 0.01) or a function(w).
-- `who` ("Dense: kernel_regularizer") starts the error message.
function M.get(v, who, extra)
  errors.check(2, "get", who, "string or nil")
  errors.none(3, "get", extra)
  if getmetatable(v) == Regularizer then return v end
  if type(v) == "function" then return make("custom", v) end
  if v == "l1" or v == "l2" then return M[v]() end
  if v == "l1_l2" then return M.l1_l2() end
  util.fail("%sunknown regularizer %s (expected nn.regularizers.l2(factor), a function(w) or one of: "
    .. "l1, l2, l1_l2)", who and who .. ": " or "", util.show(v))
end

-- A name tpu.nn.regularizers lacks is an error listing what it has.
return errors.strict_namespace(M, "tpu.nn.regularizers")
