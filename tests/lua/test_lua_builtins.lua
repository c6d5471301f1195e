-- The standard functions tputrain wraps or extends (collectgarbage, require with the stdlib
-- searcher, print, error, the tpu and arg globals) behave as in stock Lua 5.4, error messages
-- included.
local tpu = require "tpu"
local check = require "check"

-- The message of calling f(...) in protected mode (as Lua's own tests take them).
local function message_of(f, ...)
  local ok, msg = pcall(f, ...)
  check.eq(ok, false, "the call should have failed")
  return msg
end

local function has(text, part) check.is_true(string.find(text, part, 1, true) ~= nil, text .. " lacks " .. part) end

return {
  ["tonumber reads a one-element tensor and is Lua's for everything else"] = function()
    check.eq(tonumber(tpu.tensor(2.5)), 2.5)
    check.eq(math.type(tonumber(tpu.tensor(3, {dtype = "i32"}))), "integer")
    check.eq(tonumber(tpu.tensor(true, {dtype = "bool"})), 1)
    check.raises(function() return tonumber(tpu.ones{2}) end, "tonumber%(%) needs a tensor with one element, got f32%[2%]")
    check.eq({tonumber("12"), tonumber("ff", 16), tonumber("0x10"), tonumber("z", 36)}, {12, 255, 16, 35})
    check.eq(tonumber({}), nil)
    check.eq(tonumber(tpu.ones{1}, nil), 1)
    has(message_of(tonumber), "bad argument #1 to 'tonumber' (value expected)")
    has(message_of(tonumber, "10", 99), "bad argument #2 to 'tonumber' (base out of range)")
    has(message_of(tonumber, 10, 16), "bad argument #1 to 'tonumber' (string expected, got number)")
    has(message_of(tonumber, tpu.ones{1}, 16), "bad argument #1 to 'tonumber' (string expected, got tpu.Tensor)")
  end,

  ["collectgarbage takes every option of Lua's"] = function()
    check.eq(math.type(collectgarbage("count")), "float")
    check.eq(collectgarbage("isrunning"), true)
    collectgarbage("stop")
    check.eq(collectgarbage("isrunning"), false)
    collectgarbage("restart")
    check.eq(collectgarbage("isrunning"), true)
    check.eq(collectgarbage(), 0)
    check.eq(collectgarbage("collect"), 0)
    check.eq(type(collectgarbage("step", 0)), "boolean")
    local pause = collectgarbage("setpause", 200)
    check.eq(collectgarbage("setpause", pause), 200)
    local stepmul = collectgarbage("setstepmul", 200)
    check.eq(collectgarbage("setstepmul", stepmul), 200)
    check.eq(collectgarbage("generational"), "incremental")
    check.eq(collectgarbage("incremental"), "generational")
  end,

  ["collectgarbage's bad arguments name collectgarbage"] = function()
    has(message_of(collectgarbage, "nooption"), "bad argument #1 to 'collectgarbage' (invalid option 'nooption')")
    has(message_of(collectgarbage, {}), "bad argument #1 to 'collectgarbage' (string expected, got table)")
    has(message_of(collectgarbage, "step", "x"), "bad argument #2 to 'collectgarbage' (number expected, got string)")
    has(message_of(collectgarbage, "incremental", 1, 2, {}), "bad argument #4 to 'collectgarbage'")
    -- Called through an expression, as Lua's test suite does: the name comes from the globals.
    has(message_of(load("(collectgarbage or print){}")), "collectgarbage")
  end,

  ["require finds the stdlib, user modules, and reports what it tried"] = function()
    check.is_true(rawequal(require("tpu"), tpu))
    check.is_true(rawequal(require("tpu.nn"), tpu.nn))
    check.is_true(rawequal(package.loaded["tpu.nn"], tpu.nn))
    local msg = message_of(require, "no_such_module_anywhere")
    has(msg, "module 'no_such_module_anywhere' not found")
    has(msg, "no field package.preload['no_such_module_anywhere']")
    has(msg, "no file")
    has(message_of(require, "tpu.no_such_part"), "no stdlib module 'tpu.no_such_part'")
    package.preload["preloaded_here"] = function(name, extra) return {name = name, extra = extra} end
    local m, extra = require("preloaded_here")
    check.eq(m.name, "preloaded_here")
    check.eq(extra, ":preload:")
    has(message_of(require, {}), "bad argument #1 to 'require' (string expected, got table)")
  end,

  ["print uses __tostring and __name, and tostring's errors"] = function()
    local t = setmetatable({}, {__tostring = function() return "custom" end})
    local named = setmetatable({}, {__name = "MyType"})
    check.eq(tostring(t), "custom")
    check.is_true(tostring(named):match("^MyType: ") ~= nil, tostring(named))
    local bad = setmetatable({}, {__tostring = function() return {} end})
    has(message_of(print, bad), "'__tostring' must return a string")
  end,

  ["error keeps its level, its object and nil messages"] = function()
    local function raise(level) error("boom", level) end
    check.eq(message_of(raise, 0), "boom")
    has(message_of(raise, 1), "test_lua_builtins.lua:")
    local object = {}
    local ok, got = pcall(error, object)
    check.eq(ok, false)
    check.is_true(rawequal(got, object))
    check.eq(select(2, pcall(error)), nil)
    check.eq(select(2, pcall(error, 42)), 42)
  end,

  ["the tpu global is the tpu module and arg holds the script"] = function()
    check.is_true(rawequal(_G.tpu, tpu))
    check.eq(type(arg), "table")
    check.eq(type(arg[0]), "string")
  end,
}
