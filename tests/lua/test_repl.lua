-- The REPL: what it prints for the values of an expression (tpu/repl.lua), and a session on a
-- terminal (a pseudo-terminal made by script(1), so that tputrain starts its REPL).
local tpu = require "tpu"
local check = require "check"
local files = require "files"
local repl = require "tpu.repl"

-- util-linux's script(1), which makes the terminal; a test without it says it was skipped.
local function have_script(test)
  if files.sh("command -v script >/dev/null") then return true end
  print("skipped: test_repl.lua: " .. test .. ": script(1) (util-linux) is not installed")
  return false
end

local function quote(text) return "'" .. text:gsub("'", "'\\''") .. "'" end

-- Types each step's `text` into a REPL session on a terminal, each after the session printed
-- what the one before waited for (no fixed sleeps): `wait` (a plain string, on one line) on at
-- least `count` (default 1) lines, or the file `file` created. Waits at most 30 s per step.
-- Returns whether the session ended with status 0, and its output (without \r).
local function session(steps)
  local out, drive = files.tmpname(), files.tmpname()
  local lines = {
    "wait_for() { n=0; while [ \"$(tr -d '\\r' <" .. quote(out) .. " | grep -cF -- \"$1\")\" -lt \"$2\" ] && " ..
      "[ $n -lt 600 ]; do n=$((n + 1)); sleep 0.05; done; }",
    "wait_file() { n=0; while [ ! -e \"$1\" ] && [ $n -lt 600 ]; do n=$((n + 1)); sleep 0.05; done; }",
  }
  for _, step in ipairs(steps) do
    lines[#lines + 1] = "printf '%s' " .. quote(step.text)
    if step.wait then lines[#lines + 1] = "wait_for " .. quote(step.wait) .. " " .. (step.count or 1) end
    if step.file then lines[#lines + 1] = "wait_file " .. quote(step.file) end
  end
  files.write(drive, table.concat(lines, "\n") .. "\n")
  -- script(1) runs the command through $SHELL -c; `exec` leaves no shell in the terminal's
  -- process group, where dash took the Ctrl-C too and exited 130 after tputrain's 0.
  local cmd = string.format("sh %q | TERM=dumb script -qec %q /dev/null >%q 2>&1", drive, "exec " .. arg[-1], out)
  local ok = files.sh(cmd)
  local text = files.must_read(out):gsub("\r", "")
  os.remove(out)
  os.remove(drive)
  return ok, text
end

return {
  ["tables print as constructors"] = function()
    check.eq(repl.format({28, 28, 1}), "{28, 28, 1}")
    check.eq(repl.format({"s", a = 1, b = {2, 3}}), '{"s", a = 1, b = {2, 3}}')
    check.eq(repl.format({[10] = true, ["two words"] = "x"}), '{[10] = true, ["two words"] = "x"}')
    check.eq(repl.format({}), "{}")
    check.eq(repl.format("plain"), "plain")
    check.eq(repl.format(nil), "nil")
  end,

  ["deep, long and cyclic tables are cut"] = function()
    check.eq(repl.format({{{{1}}}}), "{{{{...}}}}")
    local t = {}
    t.self = t
    check.eq(repl.format(t), "{self = <cycle>}")
    local long = {}
    for i = 1, 100 do long[i] = i end
    local text = repl.format(long)
    check.is_true(text:match(", 40, %.%.%.}$") ~= nil, text)
  end,

  ["values with __tostring print through it"] = function()
    check.eq(repl.format(tpu.ones {2}), tostring(tpu.ones {2}))
    check.eq(repl.format(setmetatable({}, {__tostring = function() return "mine" end})), "mine")
  end,

  ["a terminal session prints =x.shape as {28, 28, 1}"] = function()
    if not have_script("a terminal session") then return end
    local input, out = files.tmpname(), files.tmpname()
    files.write(input, "x = tpu.zeros{28, 28, 1}\n=x.shape\n1, 'two', {k = 'v'}\n")
    local cmd = string.format("TERM=dumb script -qec %q /dev/null <%q >%q 2>&1", "exec " .. arg[-1], input, out)
    check.is_true(files.sh(cmd), "the session failed")
    local text = files.must_read(out):gsub("\r", "")
    os.remove(input)
    os.remove(out)
    check.is_true(text:find("\n{28, 28, 1}\n", 1, true) ~= nil, text)
    check.is_true(text:find('\n1\ttwo\t{k = "v"}\n', 1, true) ~= nil, text)
  end,
  -- Ctrl-C at the prompt (here in an unfinished chunk) drops what was typed and prompts again;
  -- it ended the process, and the session's values with it.
  ["Ctrl-C at the prompt keeps the session"] = function()
    if not have_script("Ctrl-C at the prompt") then return end
    -- ("o" .. "k1" prints a marker that the typed line's echo does not contain.)
    local ok, text = session {
      {text = 'x = 41; print("o" .. "k1")\n', wait = "ok1"},
      {text = "for i = 1,\n", wait = ">> "},
      {text = "bad", wait = ">> bad"},
      {text = "\3", wait = "> ", count = 4},  -- a prompt after "> x = 41", "> for i = 1,", ">> bad"
      {text = "print(x + 1)\n", wait = "42"},
    }
    check.is_true(ok, "the session failed: " .. text)
    check.is_true(text:find(">> bad\n> print(x + 1)\n42\n", 1, true) ~= nil, text)
  end,
  -- Ctrl-C while fit runs stops it after the step in progress, with fit's message for the
  -- user's line, and leaves weights and optimizer state of the same step (Adam counts its
  -- steps); a plain Lua loop stops too, and the session goes on. The hook that interrupted
  -- fit anywhere said "[tpu]/nn/training.lua:832: interrupted!".
  ["Ctrl-C during fit stops it after a step and keeps the session"] = function()
    if not have_script("Ctrl-C during fit") then return end
    local started, looping = files.tmpname(), files.tmpname()
    os.remove(started)
    os.remove(looping)
    local fit = "m = tpu.nn.Sequential{tpu.nn.Dense(1)}; m:compile{optimizer = 'adam', loss = 'mse'}; " ..
      "go = {on_train_batch_end = function() io.open('" .. started .. "', 'w'):close() end}; " ..
      "m:fit(tpu.ones{64000, 4}, tpu.ones{64000, 1}, {epochs = 50, batch_size = 8, verbose = 0, callbacks = {go}})"
    local ok, text = session {
      {text = fit .. "\n", file = started},
      {text = "\3", wait = "fit: interrupted"},
      {text = "print(m.optimizer_state.step:item() == m.train_steps, 'd' .. 'one')\n", wait = "\tdone"},
      {text = "io.open('" .. looping .. "', 'w'):close(); while true do end\n", file = looping},
      {text = "\3", wait = "stdin:1: interrupted (SIGINT)"},
      {text = "print(40 + 2)\n", wait = "42"},
    }
    os.remove(started)
    os.remove(looping)
    check.is_true(ok, "the session failed: " .. text)
    check.is_true(text:find("stdin:1: fit: interrupted %(SIGINT%) after step %d+ %(epoch %d+, batch %d+%)\n") ~= nil, text)
    check.is_true(text:find("\ntrue\tdone\n", 1, true) ~= nil, text)
    check.is_true(text:find("stdin:1: interrupted (SIGINT)\n", 1, true) ~= nil, text)
    check.is_true(text:find("\n42\n", 1, true) ~= nil, text)
  end,
}
