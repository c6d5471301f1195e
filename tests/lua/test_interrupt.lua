-- Tests of Ctrl-C (SIGINT) in scripts: it interrupts running Lua code with exit status 130, and
-- loops inside tpu.interrupt.deferred() stop where they check for it.
local check = require "check"

local T = {}

local files = require "files"
local sh, tmpdir, write, read = files.sh, files.tmpdir, files.write, files.read

-- Runs the script in the background, sends SIGINT once it created dir/started; returns the
-- exit status and stderr.
local function interrupt(dir, script)
  write(dir .. "/s.lua", script)
  local shell = io.popen(string.format("%q %q %q 2>%q & echo $!; wait $!; echo $?", arg[-1], dir .. "/s.lua", dir,
    dir .. "/err"))
  local pid = shell:read("n")
  for _ = 1, 400 do
    if read(dir .. "/started") then break end
    sh("sleep 0.05")
  end
  sh("kill -INT " .. pid)
  local code = shell:read("n")
  shell:close()
  return code, read(dir .. "/err")
end

local BUSY = [[
local tpu = require "tpu"
io.open(arg[1] .. "/started", "w"):close()
local n = 0
while true do
  n = n + (tpu.ones {4} + 1):sum():item()
end
]]

-- Interrupts the script and checks for status 130 and the message at `line` (a pattern).
local function check_interrupted_at(script, line)
  local dir = tmpdir()
  local code, err = interrupt(dir, script)
  check.eq(code, 130)
  check.is_true(err:find("s.lua:" .. line .. ": interrupted %(Ctrl%-C%)") ~= nil, err)
  sh("rm -rf " .. dir)
end

function T.ctrl_c_interrupts_a_script_with_status_130()
  check_interrupted_at(BUSY, "%d")
end

-- A loop of pure Lua: the interrupt lands in the script's own function (no C call on top).
local PURE_LUA = [[
io.open(arg[1] .. "/started", "w"):close()
local n = 0
while true do
  n = n + 1
end
]]

function T.ctrl_c_in_a_pure_lua_loop_names_the_script_line()
  check_interrupted_at(PURE_LUA, "[45]")
end

local DEFERRED = [[
local interrupt = require "tpu.interrupt"
local function loop()
  local _ <close> = interrupt.deferred()
  io.open(arg[1] .. "/started", "w"):close()
  local rounds = 0
  while true do
    rounds = rounds + 1
    for _ = 1, 1000 do local _ = {} end
    interrupt.check("loop", "after %s", "some rounds")
  end
end
loop()
]]

function T.deferred_loops_stop_where_they_check()
  local dir = tmpdir()
  local code, err = interrupt(dir, DEFERRED)
  check.eq(code, 130)
  check.is_true(err:find("s.lua:9: loop: interrupted (Ctrl-C) after some rounds", 1, true) ~= nil, err)
  sh("rm -rf " .. dir)
end

function T.no_interrupt_no_flag()
  local tpu = require "tpu"
  check.eq(tpu.core.interrupted(), false)
  check.eq(require("tpu.interrupt").requested(), false)
end

return T
