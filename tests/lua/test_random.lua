-- tpu.random draws: what they give, traced and eager.
local tpu = require "tpu"
local check = require "check"
local random = tpu.random

local tests = {}

-- bernoulli(key, p, shape) with a number p is uniform(key, shape) < p, element for element,
-- made as the bool mask in one kernel: a dropout mask takes a byte an element, not four.
tests["bernoulli with a number p is the uniform draw below p, as a bool mask made directly"] = function()
  local key = random.key(11)
  local function same(a, b) return (a:cast("i32") - b:cast("i32")):abs():sum():item() == 0 end
  for _, p in ipairs {0.9, 1 / 3, 0, 1} do
    local mask = random.bernoulli(key, p, {300, 7})
    check.eq(mask.dtype, "bool")
    check.is_true(same(mask, random.uniform(key, {300, 7}):lt(p)), "eager, p = " .. p)
    local draw = tpu.jit(function(k) return random.bernoulli(k, p, {64, 129}) end)
    check.is_true(same(draw(key), random.uniform(key, {64, 129}):lt(p)), "traced, p = " .. p)
    local text = draw.last.exe:text()
    check.is_true(text:find("rng bool[64,129]", 1, true) ~= nil and text:find("kind=bernoulli", 1, true) ~= nil, text)
    check.is_true(text:find("rng f32", 1, true) == nil, text)
  end
  -- a tensor of probabilities still compares a uniform draw with it
  local probs = tpu.tensor {0, 1, 0.5}
  check.is_true(same(random.bernoulli(key, probs), random.uniform(key, {3}):lt(probs)))
end

return tests
