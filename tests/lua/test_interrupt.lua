-- Tests of SIGINT (Ctrl-C), SIGTERM and SIGHUP in scripts: each interrupts running Lua code with
-- exit status 128 + the signal, loops inside tpu.interrupt.deferred() stop where they check for
-- it, tracing stops at once, a second signal exits at once; stdout is flushed every time.
local check = require "check"

local T = {}

local files = require "files"
local sh, tmpdir, write, read = files.sh, files.tmpdir, files.write, files.read

-- Runs the script in the background (stdout and stderr to files), sends each of `signals`
-- (default {"INT"}, 0.3 s apart) once it created dir/started; returns the exit status, stderr,
-- stdout and the seconds from the first signal to the exit.
local function interrupt(dir, script, signals)
  write(dir .. "/s.lua", script)
  local shell = io.popen(string.format("%q %q %q >%q 2>%q & echo $!; wait $!; echo $?", arg[-1], dir .. "/s.lua", dir,
    dir .. "/out", dir .. "/err"))
  local pid = shell:read("n")
  for _ = 1, 400 do
    if read(dir .. "/started") then break end
    sh("sleep 0.05")
  end
  local now = require("tpu").core.now
  local t0 = now()
  for i, sig in ipairs(signals or {"INT"}) do
    if i > 1 then sh("sleep 0.3") end
    sh("kill -" .. sig .. " " .. pid)
  end
  local code = shell:read("n")
  local seconds = now() - t0
  shell:close()
  return code, read(dir .. "/err"), read(dir .. "/out"), seconds
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
  check.is_true(err:find("s.lua:" .. line .. ": interrupted %(SIGINT%)") ~= nil, err)
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
  check.is_true(err:find("s.lua:9: loop: interrupted (SIGINT) after some rounds", 1, true) ~= nil, err)
  sh("rm -rf " .. dir)
end

-- SIGTERM (timeout, Slurm, Kubernetes) in fit: the step ends, fit stops naming it, stdout
-- (a file here, so fully buffered) is flushed, exit status 143.
local FIT = [[
local tpu = require "tpu"
local nn, data = tpu.nn, tpu.data
print("training")
local model = nn.Sequential {nn.Dense(2)}
model:compile {optimizer = "sgd", loss = "sparse_categorical_crossentropy"}
local started = {on_train_batch_end = function() io.open(arg[1] .. "/started", "w"):close() end}
model:fit(data.from_tensors {tpu.zeros {64, 3}, tpu.zeros({64}, {dtype = "i32"})}:batch(16),
  {epochs = 100000, verbose = 0, callbacks = {started}})
]]

function T.sigterm_stops_fit_after_a_step_and_flushes_stdout()
  local dir = tmpdir()
  local code, err, out = interrupt(dir, FIT, {"TERM"})
  check.eq(code, 143)
  check.is_true(err:find("^[^\n]*s%.lua:7: fit: interrupted %(SIGTERM%) after step %d+ %(epoch %d+, batch %d+%)\n$") ~= nil, err)
  check.eq(out, "training\n")
  sh("rm -rf " .. dir)
end

-- A signal that stops a compile inside fit (here one of an eager op in a callback, after the
-- signal came) still ends fit with its own message and the steps done; it said "interrupted
-- (SIGTERM) while compiling" with no step.
local FIT_COMPILING = [[
local tpu = require "tpu"
local model = tpu.nn.Sequential {tpu.nn.Dense(1)}
model:compile {optimizer = "sgd", loss = "mse"}
local kill = {on_train_batch_end = function(_, batch)
  if batch < 2 then return end
  os.execute("kill -TERM $PPID")
  while not tpu.core.interrupted() do end
  local _ = tpu.ones {3, 7} * 2  -- compiles: the compiler sees the stop request
end}
model:fit(tpu.ones {64, 4}, tpu.ones {64, 1}, {epochs = 1, batch_size = 8, verbose = 0, callbacks = {kill}})
]]

function T.a_signal_that_stops_a_compile_in_fit_says_fit_and_the_step()
  local dir = tmpdir()
  write(dir .. "/s.lua", FIT_COMPILING)
  local shell = io.popen(string.format("%q %q 2>%q; echo $?", arg[-1], dir .. "/s.lua", dir .. "/err"))
  local code = shell:read("n")
  shell:close()
  local err = read(dir .. "/err")
  check.eq(code, 143)
  check.is_true(err:find("/s.lua:10: fit: interrupted (SIGTERM) after step 2 (epoch 1, batch 2)\n", 1, true) ~= nil, err)
  sh("rm -rf " .. dir)
end

-- Runs the script (dir/s.lua, given dir as arg[1]) to its end; returns the exit status and stderr.
local function run(dir, script)
  write(dir .. "/s.lua", script)
  local shell = io.popen(string.format("%q %q %q 2>%q; echo $?", arg[-1], dir .. "/s.lua", dir, dir .. "/err"))
  local code = shell:read("n")
  shell:close()
  return code, read(dir .. "/err")
end

-- An error the signal did not cause (a callback's bug raised after the signal came) keeps its
-- own message and file:line; fit's "interrupted" message replaced it.
local FIT_CALLBACK_BUG = [[
local tpu = require "tpu"
local model = tpu.nn.Sequential {tpu.nn.Dense(1)}
model:compile {optimizer = "sgd", loss = "mse"}
local buggy = {on_train_batch_end = function(_, batch)
  if batch < 2 then return end
  os.execute("kill -TERM $PPID")
  while not tpu.core.interrupted() do end
  local t = nil
  return t.field
end}
model:fit(tpu.ones {64, 4}, tpu.ones {64, 1}, {epochs = 1, batch_size = 8, verbose = 0, callbacks = {buggy}})
]]

function T.an_error_the_signal_did_not_cause_keeps_its_message()
  local dir = tmpdir()
  local code, err = run(dir, FIT_CALLBACK_BUG)
  check.eq(code, 143)  -- the error came after SIGTERM
  check.is_true(err:find("s.lua:9: attempt to index a nil value (local 't')", 1, true) ~= nil, err)
  check.is_true(err:find("interrupted", 1, true) == nil, err)
  sh("rm -rf " .. dir)
end

-- A signal during fit's validation: the validation loop stops after its batch, and fit's
-- message stands (as for any signal in fit: the steps done, where a resumed run goes on); an
-- ordinary error raised there after the signal passes through both loops unchanged.
local FIT_VALIDATION = [[
local tpu = require "tpu"
local mode = arg[2]
local model = tpu.nn.Sequential {tpu.nn.Dense(1)}
model:compile {optimizer = "sgd", loss = "mse"}
local validation = tpu.data.generator(function()
  local i = 0
  return function()
    i = i + 1
    if i == 20 then
      os.execute("kill -TERM $PPID")
      while not tpu.core.interrupted() do end
      if mode == "bug" then error("validation element " .. i .. " is broken") end
    end
    if i <= 64 then return tpu.ones {4}, tpu.ones {1} end
  end
end):batch(8)
model:fit(tpu.ones {64, 4}, tpu.ones {64, 1}, {epochs = 1, batch_size = 8, verbose = 0, validation_data = validation})
]]

function T.a_signal_in_fits_validation_ends_with_fits_message()
  local dir = tmpdir()
  local code, err = run(dir, FIT_VALIDATION)
  check.eq(code, 143)
  check.is_true(err:find("^[^\n]*s%.lua:17: fit: interrupted %(SIGTERM%) after step 8 %(epoch 1, batch 8%)\n$") ~= nil, err)
  sh("rm -rf " .. dir)
end

function T.an_ordinary_error_in_fits_validation_after_a_signal_keeps_its_message()
  local dir = tmpdir()
  write(dir .. "/s.lua", FIT_VALIDATION)
  local shell = io.popen(string.format("%q %q %q bug 2>%q; echo $?", arg[-1], dir .. "/s.lua", dir, dir .. "/err"))
  local code = shell:read("n")
  shell:close()
  local err = read(dir .. "/err")
  check.eq(code, 143)
  check.is_true(err:find("validation element 20 is broken", 1, true) ~= nil, err)
  check.is_true(err:find("interrupted", 1, true) == nil, err)
  sh("rm -rf " .. dir)
end

-- SIGHUP outside fit: the Lua code stops at once with a message; exit status 129.
function T.sighup_interrupts_a_script_with_status_129()
  local dir = tmpdir()
  local code, err, out = interrupt(dir, "print('busy')\n" .. PURE_LUA, {"HUP"})
  check.eq(code, 129)
  check.is_true(err:find("s.lua:[56]: interrupted %(SIGHUP%)") ~= nil, err)
  check.eq(out, "busy\n")
  sh("rm -rf " .. dir)
end

-- A loop that never reaches a safe point: the second signal ends it at once, with a message,
-- stdout flushed, and the status of that signal.
local STUCK = [[
local interrupt = require "tpu.interrupt"
print("waiting")
local _ <close> = interrupt.deferred()
io.open(arg[1] .. "/started", "w"):close()
while true do end
]]

function T.a_second_signal_exits_at_once()
  local dir = tmpdir()
  local code, err, out = interrupt(dir, STUCK, {"TERM", "INT"})
  check.eq(code, 130)
  check.eq(err, "tputrain: interrupted again (SIGINT), exiting at once\n")
  check.eq(out, "waiting\n")
  sh("rm -rf " .. dir)
end

-- A trace that would not end (as a very deep model's) stops within a second inside fit.
local TRACE = [[
local tpu = require "tpu"
local interrupt = require "tpu.interrupt"
local _ <close> = interrupt.deferred()
local f = tpu.jit(function(x)
  io.open(arg[1] .. "/started", "w"):close()
  while true do x = x * 0.5 + 1 end
end)
f(tpu.ones {4})
]]

function T.a_signal_stops_tracing_within_a_second()
  local dir = tmpdir()
  local code, err, _, seconds = interrupt(dir, TRACE, {"TERM"})
  check.eq(code, 143)
  check.is_true(err:find("s.lua:6: interrupted (SIGTERM) while tracing", 1, true) ~= nil, err)
  check.is_true(seconds < 1, seconds .. " s")
  sh("rm -rf " .. dir)
end

-- Every other way out flushes stdout too (a file here, so fully buffered): the end of the
-- script, an error, os.exit with and without closing the state.
function T.every_exit_path_flushes_stdout()
  local dir = tmpdir()
  for _, case in ipairs {{"", 0}, {"error('boom')", 1}, {"os.exit(3)", 3}, {"os.exit(false, true)", 1}} do
    write(dir .. "/s.lua", "io.write('partial line') print(' and more')\n" .. case[1])
    local shell = io.popen(string.format("%q %q >%q 2>/dev/null; echo $?", arg[-1], dir .. "/s.lua", dir .. "/out"))
    check.eq(shell:read("n"), case[2], case[1])
    shell:close()
    check.eq(read(dir .. "/out"), "partial line and more\n", case[1])
  end
  sh("rm -rf " .. dir)
end

function T.no_interrupt_no_flag()
  local tpu = require "tpu"
  check.eq(tpu.core.interrupted(), false)
  check.eq(require("tpu.interrupt").requested(), false)
end

return T
