-- A tiny class helper: `local Dense = class("Dense", Module)`; `Dense{...}` or `Dense(...)`
-- calls `Dense:__init(...)`; `Dense:extend("Name")` makes a subclass.
-- A constructor takes the arguments its __init names and nothing else (nil counts as absent).
local errors = require "tpu.errors"

local function check_arity(name, init, ...)
  local info = debug.getinfo(init, "u")
  if info.isvararg then return end
  for i = info.nparams, select("#", ...) do
    local v = select(i, ...)
    if v ~= nil then errors.none(i, name, v) end
  end
end

local function class(name, parent)
  errors.check(1, "class", name, "string")
  if parent ~= nil and type(parent) ~= "table" then errors.type_error(2, "class", "class", parent) end
  local cls = {}
  cls.__index = cls
  cls.__name = name
  cls.super = parent
  cls.extend = function(self, subname) return class(subname, self) end
  cls.is_instance = function(obj)
    local mt = getmetatable(obj)
    while mt do
      if mt == cls then return true end
      mt = mt.super
    end
    return false
  end
  -- Metamethods are not inherited through __index; copy the parent's.
  if parent then
    for _, k in ipairs {"__tostring", "__call", "__len", "__close", "__newindex"} do
      if rawget(parent, k) and not rawget(cls, k) then cls[k] = parent[k] end
    end
  end
  setmetatable(cls, {
    __index = parent,
    __call = function(c, ...)
      local obj = setmetatable({}, c)
      if obj.__init then
        check_arity(c.__name, obj.__init, ...)
        obj:__init(...)
      end
      return obj
    end,
    __tostring = function() return "class " .. name end,
  })
  return cls
end
return class
