-- A tiny class helper: `local Dense = class("Dense", Module)`; `Dense{...}` or `Dense(...)`
-- calls `Dense:__init(...)`; `Dense:extend("Name")` makes a subclass.
-- A constructor takes the arguments its __init names and nothing else (nil counts as absent).
-- A class whose chain defines __dot_call(cls, name, got) checks its methods' self: each function
-- set on it (or a subclass) later whose first parameter is named self, except names starting
-- with "_", becomes a wrapper that calls
-- __dot_call when self is not an instance (obj.method(...) instead of obj:method(...)), one
-- type check per call.
local errors = require "tpu.errors"

local function check_arity(name, init, ...)
  local info = debug.getinfo(init, "u")
  if info.isvararg then return end
  for i = info.nparams, select("#", ...) do
    local v = select(i, ...)
    if v ~= nil then errors.none(i, name, v) end
  end
end

local originals = setmetatable({}, {__mode = "k"})  -- checking wrapper -> its function

-- fn checked as a method of cls: a function taken from another class is checked anew.
local function checked(cls, key, fn)
  fn = originals[fn] or fn
  local is_instance = cls.is_instance
  local function method(self, ...)
    if not is_instance(self) then cls.__dot_call(cls, key, self) end
    return fn(self, ...)
  end
  originals[method] = fn
  return method
end

-- A method takes self first (`function X:m()` names it so): a plain function stored on a class
-- (`MyAct.activation = function(x) ... end`, a static `function MyModel.create(cfg)`) is left as is.
local function is_method(fn)
  return debug.getlocal(originals[fn] or fn, 1) == "self"
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
    __newindex = function(c, key, value)
      if type(value) == "function" and type(key) == "string" and key:sub(1, 1) ~= "_"
         and c.__dot_call and is_method(value) then
        value = checked(c, key, value)
      end
      rawset(c, key, value)
    end,
  })
  return cls
end
return class
