-- Small helpers shared by the layers, losses, metrics and optimizers: user-facing errors,
-- value echoing, shapes and option checks.
local M = {}

local core = require "tpu.core"
local errors = require "tpu.errors"

-- "file:line: " of the user's code; fail raises where() .. the formatted message.
M.where, M.fail = errors.where, errors.fail

M.is_tensor = core.is_tensor

-- "f32[32,100]"
function M.describe(t)
  return t.dtype .. "[" .. table.concat(t.shape, ",") .. "]"
end

-- Echoes a received value in an error message.
M.show = errors.show

function M.copy(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  return out
end

function M.numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

-- Shape of a tensor, or a list of shapes for a table of tensors.
function M.shape_of(x)
  if M.is_tensor(x) then return x.shape end
  if type(x) == "table" and getmetatable(x) and type(rawget(x, "shape")) == "table" then
    return M.copy(x.shape)  -- a symbolic tensor
  end
  if type(x) == "table" then
    local out = {}
    for i, v in ipairs(x) do out[i] = M.shape_of(v) end
    return out
  end
  return nil
end

-- "MultiHeadAttention" -> "multi_head_attention"
function M.snake_case(name)
  return (name:gsub("(%l)(%u)", "%1_%2"):gsub("(%u)(%u%l)", "%1_%2"):lower())
end

function M.is_positive_integer(v)
  return math.type(v) == "integer" and v > 0 or (math.type(v) == "float" and v > 0 and v == math.floor(v))
end

-- Rejects option keys a layer does not know (catches typos like `activaton`).
function M.check_options(obj, opts, allowed)
  if type(opts) ~= "table" then
    M.fail("%s: options must be a table, got %s", obj.__name, M.show(opts))
  end
  errors.check_keys(obj.__name, opts, allowed)
end

local float_dtypes = {f32 = true, bf16 = true}

local function mixed_precision() return require "tpu.mixed_precision" end

-- A layer's {name, compute_dtype, variable_dtype} from its `dtype =` option: the global
-- mixed-precision policy when nil, else a dtype ("f32", "bf16") or a policy name.
function M.layer_policy(obj, dtype)
  local p, err = mixed_precision().layer_policy(dtype)
  if not p then M.fail("%s: %s, got %s", obj.__name, err, M.show(dtype)) end
  return p
end

-- Casts a floating tensor to dtype when it differs (integer inputs are left alone).
function M.cast_float(x, dtype)
  if x.dtype ~= dtype and float_dtypes[x.dtype] then return x:cast(dtype) end
  return x
end

-- x @ w under a layer's policy {compute_dtype, variable_dtype}: bf16 compute multiplies bf16
-- operands and sums in f32 (the MXU's contract); the result has the layer's output dtype.
function M.policy_matmul(x, w, policy)
  local c, out = policy.compute_dtype, M.output_dtype(policy)
  return M.cast_float(x, c):matmul(M.cast_float(w, c), c ~= out and {to = out} or nil)
end

-- The dtype of a layer's outputs: f32 when its variables are f32 (mixed_bfloat16 keeps the f32
-- sums of its bf16 matmuls; the next matmul rounds its inputs to bf16 again), bf16 for a layer
-- that is bf16 throughout (dtype = "bf16").
function M.output_dtype(policy)
  return policy.variable_dtype == "f32" and "f32" or policy.compute_dtype
end

-- Option list of a layer: its own names plus the ones every layer takes.
function M.options(own)
  local list = M.copy(own)
  for _, k in ipairs {"name", "dtype", "trainable"} do list[#list + 1] = k end
  return list
end

-- 3 -> {3, 3}; {2, 3} -> {2, 3}. `what` names the option in the error ("Conv2D: kernel_size").
function M.pair(v, what)
  if M.is_positive_integer(v) then return {math.tointeger(v), math.tointeger(v)} end
  if type(v) == "table" and not M.is_tensor(v) and #v == 2 and M.is_positive_integer(v[1])
     and M.is_positive_integer(v[2]) then
    return {math.tointeger(v[1]), math.tointeger(v[2])}
  end
  M.fail("%s must be a positive integer or a pair {h, w} of them, got %s", what, M.show(v))
end

function M.padding(v, who)
  if v == nil then return "valid" end
  if v ~= "valid" and v ~= "same" then
    M.fail("%s: padding must be \"valid\" or \"same\", got %s", who, M.show(v))
  end
  return v
end

-- Output size of a window of `k` with stride `s` over `n`: "same" ceil(n / s), else
-- floor((n - k) / s) + 1.
function M.window_out(n, k, s, padding)
  if n < 0 then return -1 end  -- unknown (None) stays unknown
  if padding == "same" then return (n + s - 1) // s end
  return (n - k) // s + 1
end

-- Whether v is a number other than NaN and the infinities (NaN passes every comparison test
-- written as "fail if v < lo").
function M.is_finite(v)
  return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge
end

-- A number in [lo, hi] (hi_open: [lo, hi)).
function M.check_range(who, name, v, lo, hi, hi_open)
  if not M.is_finite(v) or v < lo or v > hi or (hi_open and v >= hi) then
    M.fail("%s: %s must be a number in [%g, %g%s, got %s", who, name, lo, hi,
      hi_open and ")" or "]", M.show(v))
  end
  return v
end

function M.check_positive(who, name, v)
  if not M.is_finite(v) or v <= 0 then
    M.fail("%s: %s must be a positive number, got %s", who, name, M.show(v))
  end
  return v
end

function M.check_integer(who, name, v)
  if not M.is_positive_integer(v) then
    M.fail("%s: %s must be a positive integer, got %s", who, name, M.show(v))
  end
  return math.tointeger(v)
end

-- Shapes of a merge layer's inputs: a list of at least two shapes.
function M.merge_shapes(layer, input_shape)
  if type(input_shape) ~= "table" or type(input_shape[1]) ~= "table" or #input_shape < 2 then
    M.fail("%s '%s' expects a list of at least 2 tensors, e.g. layer {a, b}; got %s",
      layer.__name, layer.name, input_shape and type(input_shape[1]) == "number"
      and "one tensor of shape " .. M.shape_text(input_shape) or M.show(input_shape))
  end
  return input_shape
end

function M.shapes_text(shapes)
  local parts = {}
  for i, s in ipairs(shapes) do parts[i] = M.shape_text(s) end
  return table.concat(parts, ", ")
end

-- A regularizer option checked at construction (nil stays nil): M.regularizer(opts, "Dense",
-- "kernel_regularizer").
function M.regularizer(opts, who, name)
  local v = opts[name]
  if v == nil then return nil end
  return require("tpu.nn.regularizers").get(v, who .. ": " .. name)
end

-- An initializer option (a name or a function), `default` when absent.
function M.initializer(opts, who, name, default)
  return require("tpu.nn.initializers").get(opts[name] or default, who .. ": " .. name)
end

-- The options of a layer whose first Keras argument may also come first in Lua, as
-- nn.LeakyReLU(0.1) or nn.LeakyReLU {negative_slope = 0.1}: (a, b) -> opts, with a number `a`
-- stored as opts[key] (giving it twice is an error).
function M.leading_option(self, a, b, key)
  if type(a) ~= "number" then
    require("tpu.errors").none(2, self.__name, b)
    return a or {}
  end
  local opts = b or {}
  if type(opts) ~= "table" then
    M.fail("%s: the argument after %s must be a table of options, got %s", self.__name, M.show(a), M.show(b))
  end
  if opts[key] ~= nil then
    M.fail("%s: %s given twice (%s and %s = %s)", self.__name, key, M.show(a), key, M.show(opts[key]))
  end
  local copy = {}
  for k, v in pairs(opts) do copy[k] = v end
  copy[key] = a
  return copy
end

-- A boolean option (nil gives `default`).
function M.flag(who, opts, name, default)
  local v = opts[name]
  if v == nil then return default end
  if type(v) ~= "boolean" then
    M.fail("%s: %s must be true or false, got %s", who, name, M.show(v))
  end
  return v
end

-- Resolves a 1-based or negative axis against rank n.
function M.axis(axis, n)
  return axis < 0 and n + 1 + axis or axis
end

-- fn(...) with the model's weights swapped for `params` (traced ones, in a compiled step);
-- the model's own always go back, error or not.
function M.with_params(model, params, fn, ...)
  local own = model:set_parameters(params)
  local res = table.pack(pcall(fn, ...))
  model:set_parameters(own)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- The user's line that builds a layer or an optimizer ("script.lua:12"): its scope names it
-- for the nodes it traces, rather than the fit call that traced them.
function M.built_at()
  return errors.where():match("^(.-):?%s*$")
end

-- Labels the nodes traced until the returned value is closed with `name` and `built_at`:
--   local _ <close> = util.scope(self.name, rawget(self, "_built_at"))
local scope_closer = setmetatable({}, {__close = function() core.pop_scope() end})
function M.scope(name, built_at)
  core.push_scope(name, built_at)
  return scope_closer
end

-- Whether two shapes (lists of sizes) are equal.
function M.same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- "(None, 28, 28, 1)" from a shape whose first entry is the batch.
function M.shape_text(shape)
  local dims = {"None"}
  for i = 2, #shape do dims[i] = shape[i] == -1 and "None" or tostring(shape[i]) end
  return "(" .. table.concat(dims, ", ") .. (#shape == 1 and ",)" or ")")
end

return M
