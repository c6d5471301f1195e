-- An error raised in a library function that the script reached through a tail call
-- (`return f(x)`) is located at the line that called the script's function: Lua keeps no frame
-- for a function that made a tail call. `return (f(x))` is not a tail call and keeps the line.
local tpu = require "tpu"
local function loss_tail(a, b)
  return tpu.losses.mse(a, b)
end
local function loss_kept(a, b)
  return (tpu.losses.mse(a, b))
end
local a, b = tpu.zeros {2, 3}, tpu.zeros {4, 5}
print(select(2, pcall(function()
  local l = loss_tail(a, b)
  return l
end)))
print(select(2, pcall(function()
  local l = loss_kept(a, b)
  return l
end)))
