-- Composite tensor operations, built from the primitives of tpu.core (no new kernels).
local core = require "tpu.core"
local errors = require "tpu.errors"
local T = core.Tensor

local function has_string_key(t)
  for k in pairs(t) do if type(k) == "string" then return true end end
  return false
end

-- (axis, keepdims) of fname(t, axis, keepdims) or fname(t, {axis=, keepdims=}), checked as the
-- reductions in C check theirs (argument numbers count from the one after t, as for methods).
local function reduce_args(fname, t, axis, keepdims, extra)
  errors.check(1, fname, t, "tensor")
  if type(axis) == "table" and has_string_key(axis) then
    errors.check_keys(fname, axis, {"axis", "keepdims"})
    errors.none(2, fname, keepdims)
    axis, keepdims = axis.axis, axis.keepdims
  elseif axis ~= nil and type(axis) ~= "number" and type(axis) ~= "table" then
    errors.type_error(1, fname, "number or {axis=, keepdims=}", axis)
  end
  if keepdims ~= nil and type(keepdims) ~= "boolean" then errors.type_error(2, fname, "boolean keepdims", keepdims) end
  errors.none(3, fname, extra)
  if type(axis) == "number" then axis = math.tointeger(axis) or axis end  -- 2.0 is axis 2, as in C
  if axis ~= nil and math.type(axis) ~= "integer" and type(axis) ~= "table" then
    errors.arg_error(1, fname, "axis = an integer or a list of them expected, got " .. errors.typename(axis))
  end
  for i, a in ipairs(type(axis) == "table" and axis or {}) do
    if math.type(a) ~= "integer" then
      errors.arg_error(1, fname, "list of integer axes expected, got " .. errors.typename(a) .. " at [" .. i .. "]")
    end
  end
  return axis, keepdims
end

-- The axis of fname(x, axis) or fname(x, {axis=}): the last by default.
local function axis_arg(fname, x, axis, extra)
  errors.check(1, fname, x, "tensor")
  if type(axis) == "table" then
    errors.check_keys(fname, axis, {"axis"})
    axis = axis.axis
  end
  if axis ~= nil and math.type(axis) ~= "integer" then errors.type_error(1, fname, "integer or {axis=}", axis) end
  errors.none(2, fname, extra)
  return axis or -1
end

local function resolve_axes(t, axis)
  local rank = #t.shape
  local axes = {}
  if axis == nil then
    for i = 1, rank do axes[#axes + 1] = i end
  elseif type(axis) == "table" then
    for _, a in ipairs(axis) do axes[#axes + 1] = a < 0 and rank + a + 1 or a end
  else
    axes[1] = axis < 0 and rank + axis + 1 or axis
  end
  return axes
end

-- Raises as the C reductions do when a list names an axis twice (out-of-range axes are left to
-- sum, which reports them).
local function check_distinct(fname, t, axis)
  if type(axis) ~= "table" then return end
  local seen = {}
  for _, a in ipairs(resolve_axes(t, axis)) do
    if seen[a] then
      errors.fail("%s: axis list {%s} names axis %d twice", fname, table.concat(axis, ", "), a)
    end
    if a >= 1 and a <= #t.shape then seen[a] = true end
  end
end

function T.mean(t, axis, keepdims, extra)
  axis, keepdims = reduce_args("mean", t, axis, keepdims, extra)
  check_distinct("mean", t, axis)
  local count, shape = 1, t.shape
  for _, a in ipairs(resolve_axes(t, axis)) do count = count * (shape[a] or 1) end
  -- Sum and divide in f32, rounding a bf16 mean once (a bf16 sum would round before the divide).
  if t.dtype ~= "f32" then
    local m = t:cast("f32"):sum(axis, keepdims) / count
    return t.dtype == "bf16" and m:cast("bf16") or m
  end
  return t:sum(axis, keepdims) / count
end

function T.square(t, extra)
  errors.check(1, "square", t, "tensor")
  errors.none(1, "square", extra)
  return t * t
end
function T.relu(t, extra)
  errors.check(1, "relu", t, "tensor")
  errors.none(1, "relu", extra)
  return t:maximum(0)
end

-- x:gelu() is exact, x/2 (1 + erf(x/sqrt 2)); x:gelu{approximate = true} the tanh form of
-- BERT-style models (as Keras's gelu).
function T.gelu(x, opts, extra)
  errors.check(1, "gelu", x, "tensor")
  opts = errors.options(1, "gelu", opts, {"approximate"})
  errors.none(2, "gelu", extra)
  if opts.approximate then
    local c = math.sqrt(2 / math.pi)
    return 0.5 * x * (1 + ((x + 0.044715 * x * x * x) * c):tanh())
  end
  return 0.5 * x * (1 + (x * (1 / math.sqrt(2))):erf())
end

-- Keras's swish (also named silu): x * sigmoid(x).
function T.swish(x, extra)
  errors.check(1, "swish", x, "tensor")
  errors.none(1, "swish", extra)
  return x * x:sigmoid()
end
T.silu = T.swish

-- min(max(x, 0), 6)
function T.relu6(x, extra)
  errors.check(1, "relu6", x, "tensor")
  errors.none(1, "relu6", extra)
  return x:maximum(0):minimum(6)
end

-- Keras's hard_sigmoid: 0 below -3, 1 above 3, x/6 + 1/2 between (relu6(x + 3) / 6).
function T.hard_sigmoid(x, extra)
  errors.check(1, "hard_sigmoid", x, "tensor")
  errors.none(1, "hard_sigmoid", extra)
  return (x + 3):relu6() * (1 / 6)
end

-- Keras's hard_swish (also named hard_silu): x * hard_sigmoid(x), MobileNetV3's activation.
function T.hard_swish(x, extra)
  errors.check(1, "hard_swish", x, "tensor")
  errors.none(1, "hard_swish", extra)
  return x * x:hard_sigmoid()
end
T.hard_silu = T.hard_swish

-- log(1 + u) for u >= 0 without losing a small u to rounding: log(w) * u / (w - 1) with
-- w = 1 + u (Goldberg's form; u itself where w rounds to 1). The divisor is never 0, so
-- gradients through either branch stay finite.
local function log1p(u)
  local w = u + 1
  local d = w - 1
  local tiny = d:eq(0)
  return core.where(tiny, u, w:log() * u / core.where(tiny, d + 1, d))
end

-- exp(x) - 1 for x <= 0 without losing a small x to rounding: (u - 1) * x / log(u) with
-- u = exp(x) (Kahan's form; x itself where u rounds to 1) for x > -1, plain exp(x) - 1 below
-- (where the form would divide by log(0) once exp(x) underflows).
local function expm1_nonpositive(x)
  local near = x:maximum(-1)
  local u = near:exp()
  local one = u:eq(1)
  local l = u:log()
  local small = core.where(one, near, (u - 1) * near / core.where(one, l - 1, l))
  return core.where(x:gt(-1), small, x:exp() - 1)
end

-- Keras's elu: x where x > 0, alpha (exp(x) - 1) elsewhere; x:elu{alpha = 1}.
function T.elu(x, opts, extra)
  errors.check(1, "elu", x, "tensor")
  opts = errors.options(1, "elu", opts, {"alpha"})
  errors.none(2, "elu", extra)
  local alpha = opts.alpha or 1
  if type(alpha) ~= "number" then errors.type_error(1, "elu", "number alpha", alpha) end
  return core.where(x:gt(0), x, alpha * expm1_nonpositive(x:minimum(0)))
end

-- Keras's selu: scale * elu(x, alpha) with the constants of Klambauer et al. (2017).
local selu_alpha, selu_scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
function T.selu(x, extra)
  errors.check(1, "selu", x, "tensor")
  errors.none(1, "selu", extra)
  return selu_scale * x:elu {alpha = selu_alpha}
end

-- Keras's leaky_relu: x where x >= 0, negative_slope * x elsewhere (default slope 0.2, as
-- keras.activations.leaky_relu; the LeakyReLU layer's default is 0.3).
function T.leaky_relu(x, opts, extra)
  errors.check(1, "leaky_relu", x, "tensor")
  opts = errors.options(1, "leaky_relu", opts, {"negative_slope"})
  errors.none(2, "leaky_relu", extra)
  local slope = opts.negative_slope or 0.2
  if type(slope) ~= "number" then errors.type_error(1, "leaky_relu", "number negative_slope", slope) end
  return core.where(x:ge(0), x, x * slope)
end

-- log(1 + exp(x)), computed as max(x, 0) + log1p(exp(-|x|)) (no overflow for a large x).
function T.softplus(x, extra)
  errors.check(1, "softplus", x, "tensor")
  errors.none(1, "softplus", extra)
  return x:maximum(0) + log1p((-x:abs()):exp())
end

-- x / (|x| + 1)
function T.softsign(x, extra)
  errors.check(1, "softsign", x, "tensor")
  errors.none(1, "softsign", extra)
  return x / (x:abs() + 1)
end

-- Misra's mish: x * tanh(softplus(x)).
function T.mish(x, extra)
  errors.check(1, "mish", x, "tensor")
  errors.none(1, "mish", extra)
  return x * x:softplus():tanh()
end

-- The max taken out of x for the exponentials is a constant to gradients (as in jax.nn.softmax):
-- the result does not depend on it, so its gradient is zero up to rounding, and differentiating
-- it cost the backward pass a comparison with the max and two more passes over x's shape (of
-- the attention scores in a transformer: a tenth of its step).
function T.softmax(x, axis, extra)
  axis = axis_arg("softmax", x, axis, extra)
  local e = (x - x:max(axis, true):stop_gradient()):exp()
  return e / e:sum(axis, true)
end

function T.log_softmax(x, axis, extra)
  axis = axis_arg("log_softmax", x, axis, extra)
  local shifted = x - x:max(axis, true):stop_gradient()
  return shifted - shifted:exp():sum(axis, true):log()
end

function T.numel(t, extra)
  errors.check(1, "numel", t, "tensor")
  errors.none(1, "numel", extra)
  local n = 1
  for _, d in ipairs(t.shape) do n = n * d end
  return n
end

-- tpu.stack(list, axis): a new axis at `axis` (1-based; -1 appends).
function core.stack(list, axis, extra)
  errors.check(1, "stack", list, "table")
  errors.check(2, "stack", axis, "integer or nil")
  errors.none(3, "stack", extra)
  for i, t in ipairs(list) do
    if not core.is_tensor(t) then errors.arg_error(1, "stack", "list of tensors expected, got " .. errors.show(t) .. " at " .. i) end
  end
  axis = math.tointeger(axis or 1)
  -- The new axis is one of rank + 1 positions: checked here, where the user's line is known.
  local rank = list[1] and #list[1].shape or 0
  if axis == 0 or axis > rank + 1 or axis < -(rank + 1) then
    errors.arg_error(2, "stack", string.format("axis %d is out of range for stacking rank-%d tensors (1 to %d, or -%d to -1)",
      axis, rank, rank + 1, rank + 1))
  end
  local parts = {}
  for i, t in ipairs(list) do
    local shape = t.shape
    local pos = axis < 0 and #shape + axis + 2 or axis
    table.insert(shape, pos, 1)
    parts[i] = t:reshape(shape)
  end
  local first = parts[1] and #parts[1].shape or 1
  return core.concat(parts, axis < 0 and first + axis + 1 or axis)
end

return T
