-- Finite-difference gradient checker: build the Jacobian of fn at x twice, once by perturbing
-- each input element and once from tpu.grad (one gradient per output element), and return the
-- largest difference.
--
--   local jacobian = require "jacobian"
--   local err = jacobian.max_error(function(x) return layer(x) end, x)
--   check.near(err, 0, 1e-2)
local tpu = require "tpu"

local M = {}

local function flat(t) return t:reshape({-1}):totable() end

local function numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

-- x with element i (1-based, row-major) moved by delta.
local function perturbed(values, shape, i, delta)
  local v = {table.unpack(values)}
  v[i] = v[i] + delta
  return tpu.tensor(v):reshape(shape)
end

-- J[i][j] = d out_j / d x_i by central differences.
function M.forward(fn, x, eps)
  eps = eps or 1e-3
  local values, shape = flat(x), x.shape
  local J = {}
  for i = 1, #values do
    local plus = flat(fn(perturbed(values, shape, i, eps)))
    local minus = flat(fn(perturbed(values, shape, i, -eps)))
    J[i] = {}
    for j = 1, #plus do J[i][j] = (plus[j] - minus[j]) / (2 * eps) end
  end
  return J
end

-- The same matrix from tpu.grad: row j of the transposed Jacobian is the gradient of out_j.
function M.backward(fn, x)
  local n_out = numel(fn(x).shape)
  local J = {}
  for i = 1, numel(x.shape) do J[i] = {} end
  for j = 1, n_out do
    local pick = tpu.tensor(j - 1, {dtype = "i32"}):one_hot(n_out)
    local g = tpu.grad(function(xx) return (fn(xx):reshape({-1}) * pick):sum() end)(x)
    for i, v in ipairs(flat(g)) do J[i][j] = v end
  end
  return J
end

function M.max_error(fn, x, eps)
  local Jf, Jb = M.forward(fn, x, eps), M.backward(fn, x)
  local worst = 0
  for i, row in ipairs(Jf) do
    for j, v in ipairs(row) do worst = math.max(worst, math.abs(v - Jb[i][j])) end
  end
  return worst
end

return M
