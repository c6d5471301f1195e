-- Stateless random numbers (as in JAX): a key names a stream; split and fold_in derive new
-- keys; the same key always gives the same numbers.
local core = require "tpu.core"

local Key = {}
Key.__index = Key
Key.__name = "tpu.random.Key"

local function make(v) return setmetatable({value = v}, Key) end

function Key:split(n)
  n = n or 2
  local keys = {}
  for i = 1, n do keys[i] = make(core.random_mix(self.value, i)) end
  return keys
end

function Key:fold_in(data) return make(core.random_mix(self.value, 1000003 + data)) end
function Key.__tostring(k) return string.format("Key(%d)", k.value) end
function Key.__eq(a, b) return a.value == b.value end

local random = {}

function random.key(seed)
  if math.type(seed) ~= "integer" then
    error(core.user_where() .. "tpu.random.key needs an integer seed, got " .. tostring(seed), 0)
  end
  return make(core.random_mix(seed, 0))
end

function random.is_key(k) return getmetatable(k) == Key end

local function check_key(k)
  if getmetatable(k) ~= Key then
    error(core.user_where() .. "expected a key from tpu.random.key(seed), got " .. tostring(k), 0)
  end
  return k.value
end

function random.uniform(key, shape, opts) return core.random_uniform(check_key(key), shape, opts) end
function random.normal(key, shape, opts) return core.random_normal(check_key(key), shape, opts) end

return random
