-- Composite tensor operations, built from the primitives of tpu.core (no new kernels).
local core = require "tpu.core"
local T = core.Tensor

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

function T.mean(t, axis, keepdims)
  local count, shape = 1, t.shape
  for _, a in ipairs(resolve_axes(t, axis)) do count = count * (shape[a] or 1) end
  local s = t:sum(axis, keepdims)
  if s.dtype ~= "f32" and s.dtype ~= "bf16" then s = s:cast("f32") end
  return s / count
end

function T.square(t) return t * t end
function T.relu(t) return t:maximum(0) end

-- tanh approximation, as used by BERT-style models.
function T.gelu(x)
  local c = math.sqrt(2 / math.pi)
  return 0.5 * x * (1 + ((x + 0.044715 * x * x * x) * c):tanh())
end

function T.softmax(x, axis)
  axis = axis or -1
  local e = (x - x:max(axis, true)):exp()
  return e / e:sum(axis, true)
end

function T.log_softmax(x, axis)
  axis = axis or -1
  local shifted = x - x:max(axis, true)
  return shifted - shifted:exp():sum(axis, true):log()
end

function T.numel(t)
  local n = 1
  for _, d in ipairs(t.shape) do n = n * d end
  return n
end

-- tpu.stack(list, axis): a new axis at `axis` (1-based; -1 appends).
function core.stack(list, axis)
  axis = axis or 1
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

local tpu = require "tpu"
tpu.stack = core.stack
return T
