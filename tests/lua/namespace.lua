-- is_namespace(v): whether v is a namespace (nn.initializers, optim.schedule), a table of
-- functions, plain or made strict by errors.strict_namespace; anything else (a class, a module
-- with classes or values in it, a metric object) is one name. Shared by test_arguments.lua
-- (require "namespace") and tests/docs/check.lua (dofile).
return function(v)
  if type(v) ~= "table" or rawget(v, "__name") then return false end
  local mt = getmetatable(v)
  if mt and not rawget(mt, "__namespace") then return false end
  for _, f in pairs(v) do
    if type(f) ~= "function" then return false end
  end
  return true
end
