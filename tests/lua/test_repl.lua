-- The REPL: what it prints for the values of an expression (tpu/repl.lua), and a session on a
-- terminal (a pseudo-terminal made by script(1), so that tputrain starts its REPL).
local tpu = require "tpu"
local check = require "check"
local files = require "files"
local repl = require "tpu.repl"

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
    if not files.sh("command -v script >/dev/null") then return end  -- util-linux's script(1)
    local input, out = os.tmpname(), os.tmpname()
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
    if not files.sh("command -v script >/dev/null") then return end
    local out = os.tmpname()
    local typing = "{ printf 'x = 41\\n'; sleep 1; printf 'for i = 1,\\n'; sleep 0.5; printf 'bad'; sleep 0.5; " ..
      "printf '\\003'; sleep 0.5; printf 'print(x + 1)\\n'; sleep 0.5; }"
    -- script(1) runs the command through $SHELL -c; `exec` leaves no shell in the terminal's
    -- process group, where dash took the Ctrl-C too and exited 130 after tputrain's 0.
    local cmd = string.format("%s | TERM=dumb script -qec %q /dev/null >%q 2>&1", typing, "exec " .. arg[-1], out)
    local ok = files.sh(cmd)
    local text = files.must_read(out):gsub("\r", "")
    os.remove(out)
    check.is_true(ok, "the session failed: " .. text)
    check.is_true(text:find(">> bad\n> print(x + 1)\n42\n", 1, true) ~= nil, text)
  end,
  -- Ctrl-C while fit runs stops it after the step in progress, with fit's message for the
  -- user's line, and leaves weights and optimizer state of the same step (Adam counts its
  -- steps); a plain Lua loop stops too, and the session goes on. The hook that interrupted
  -- fit anywhere said "[tpu]/nn/training.lua:832: interrupted!".
  ["Ctrl-C during fit stops it after a step and keeps the session"] = function()
    if not files.sh("command -v script >/dev/null") then return end
    local out, started = os.tmpname(), os.tmpname()
    os.remove(started)
    local fit = "m = tpu.nn.Sequential{tpu.nn.Dense(1)}; m:compile{optimizer = 'adam', loss = 'mse'}; " ..
      "go = {on_train_batch_end = function() io.open('" .. started .. "', 'w'):close() end}; " ..
      "m:fit(tpu.ones{64000, 4}, tpu.ones{64000, 1}, {epochs = 50, batch_size = 8, verbose = 0, callbacks = {go}})"
    local typing = "{ printf '%s\n' \"" .. fit .. "\"; while [ ! -e " .. started .. " ]; do sleep 0.1; done; " ..
      "sleep 0.3; printf '\003'; sleep 0.5; printf 'print(m.optimizer_state.step:item() == m.train_steps)\n'; " ..
      "sleep 0.5; printf 'while true do end\n'; sleep 0.5; printf '\003'; sleep 0.5; printf 'print(40 + 2)\n'; sleep 0.5; }"
    local cmd = string.format("%s | TERM=dumb script -qec %q /dev/null >%q 2>&1", typing, "exec " .. arg[-1], out)
    local ok = files.sh(cmd)
    local text = files.must_read(out):gsub("\r", "")
    os.remove(out)
    os.remove(started)
    check.is_true(ok, "the session failed: " .. text)
    check.is_true(text:find("stdin:1: fit: interrupted %(SIGINT%) after step %d+ %(epoch %d+, batch %d+%)\n") ~= nil, text)
    check.is_true(text:find("\ntrue\n", 1, true) ~= nil, text)
    check.is_true(text:find("stdin:1: interrupted (SIGINT)\n", 1, true) ~= nil, text)
    check.is_true(text:find("\n42\n", 1, true) ~= nil, text)
  end,
}
