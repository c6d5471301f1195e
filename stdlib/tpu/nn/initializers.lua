-- Weight initializers: fn(key, shape, dtype) -> tensor. Keys come from one global seed and a
-- counter, so a script that builds the same model with the same seed gets the same weights.
--
--   nn.set_seed(42)          -- also reset by `tputrain --seed N`, default 0
--   local w = nn.initializers.get("he_normal")(key, {784, 512}, "f32")
local core = require "tpu.core"
local errors = require "tpu.errors"
local random = require "tpu.random"
local util = require "tpu.nn.util"

local M = {}

local state = {seed = nil, counter = 0}

-- `tputrain --seed N` (the CLI options table), else 0.
local function initial_seed()
  local cli = package.loaded["tpu.options"]
  local s = type(cli) == "table" and cli.seed or nil
  return math.type(s) == "integer" and s >= 0 and s or 0
end

function M.set_seed(n, extra)
  errors.none(2, "set_seed", extra)
  if math.type(n) ~= "integer" or n < 0 then
    util.fail("set_seed expects a non-negative integer, got %s", util.show(n))
  end
  state.seed, state.counter = n, 0
end

-- The current seed (set_seed, --seed, else 0).
function M.seed(extra)
  errors.none(1, "seed", extra)
  state.seed = state.seed or initial_seed()
  return state.seed
end

-- The key for the next weight created.
function M._next_key(extra)
  errors.none(1, "next_key", extra)
  state.seed = state.seed or initial_seed()
  state.counter = state.counter + 1
  return random.key(state.seed):fold_in(state.counter)
end

-- fan_in, fan_out: the last two dims times the receptive field (the product of the others).
local function fans(shape)
  local n = #shape
  if n == 0 then return 1, 1 end
  if n == 1 then return shape[1], shape[1] end
  local receptive = 1
  for i = 1, n - 2 do receptive = receptive * shape[i] end
  return shape[n - 1] * receptive, shape[n] * receptive
end

-- An initializer's (key, shape, dtype) checked; `key_used`: false for zeros and ones.
local function check_init_args(name, key, shape, dtype, extra, key_used)
  if key_used and not random.is_key(key) and not core.is_tensor(key) then
    errors.type_error(1, name, "random key", key)
  end
  errors.check(2, name, shape, "table")
  errors.check(3, name, dtype, "string or nil")
  errors.none(4, name, extra)
end

local function uniform(limit_of, name)
  return function(key, shape, dtype, extra)
    check_init_args(name, key, shape, dtype, extra, true)
    local limit = limit_of(fans(shape))
    local t = random.uniform(key, shape, {minval = -limit, maxval = limit})
    return dtype and t.dtype ~= dtype and t:cast(dtype) or t
  end
end

-- Keras's variance scaling draws from a normal truncated at two standard deviations, whose
-- spread it widens by this factor (the truncated unit normal's standard deviation) so that the
-- weights keep the variance asked for.
local kTruncatedStddev = 0.87962566103423978

local function normal(stddev_of, name, truncated)
  return function(key, shape, dtype, extra)
    check_init_args(name, key, shape, dtype, extra, true)
    local sd = stddev_of(fans(shape))
    local t = truncated and random.normal(key, shape, {stddev = sd / kTruncatedStddev, truncated = true})
      or random.normal(key, shape, {stddev = sd})
    return dtype and t.dtype ~= dtype and t:cast(dtype) or t
  end
end

M.glorot_uniform = uniform(function(fi, fo) return math.sqrt(6 / (fi + fo)) end, "glorot_uniform")
M.glorot_normal = normal(function(fi, fo) return math.sqrt(2 / (fi + fo)) end, "glorot_normal", true)
M.he_uniform = uniform(function(fi) return math.sqrt(6 / fi) end, "he_uniform")
M.he_normal = normal(function(fi) return math.sqrt(2 / fi) end, "he_normal", true)
M.lecun_normal = normal(function(fi) return math.sqrt(1 / fi) end, "lecun_normal", true)

-- Uniform in [-0.05, 0.05] (Embedding's default) and normal with stddev 0.05.
M.random_uniform = uniform(function() return 0.05 end, "random_uniform")
M.random_normal = normal(function() return 0.05 end, "random_normal")

function M.zeros(key, shape, dtype, extra)
  check_init_args("zeros", key, shape, dtype, extra, false)
  return core.zeros(shape, {dtype = dtype})
end
function M.ones(key, shape, dtype, extra)
  check_init_args("ones", key, shape, dtype, extra, false)
  return core.ones(shape, {dtype = dtype})
end

-- constant(v): every element v.
function M.constant(v, extra)
  errors.none(2, "constant", extra)
  if type(v) ~= "number" then
    util.fail("initializers.constant needs a number, got %s", util.show(v))
  end
  return function(key, shape, dtype, extra)
    check_init_args("constant", key, shape, dtype, extra, false)
    return core.full(shape, v, {dtype = dtype})
  end
end

local names = {"glorot_uniform", "glorot_normal", "he_uniform", "he_normal", "lecun_normal",
               "random_uniform", "random_normal", "zeros", "ones"}

-- A name or a function(key, shape, dtype) -> tensor. `who` ("Dense: kernel_initializer")
-- starts the error message.
function M.get(init, who, extra)
  errors.check(2, "get", who, "string or nil")
  errors.none(3, "get", extra)
  if type(init) == "function" then return init end
  for _, n in ipairs(names) do
    if n == init then return M[n] end
  end
  util.fail("%sunknown initializer %s%s (expected a function or one of: %s)",
    who and who .. ": " or "", util.show(init), errors.did_you_mean(init, names), table.concat(names, ", "))
end

-- A name tpu.nn.initializers lacks is an error listing what it has.
return errors.strict_namespace(M, "tpu.nn.initializers")
