-- The command line's options meeting bad input: an error at the user's line, never a crash.
local check = require "check"
local files = require "files"

return {
  ["--help lists every environment variable docs/cli.md documents"] = function()
    local help = io.popen(string.format("%q --help", arg[-1])):read("a")
    local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
    local doc = files.must_read(here .. "/../../docs/cli.md")
    local n = 0
    for name in doc:gmatch("\n### `(TPUTRAIN_[%u_]+)") do
      n = n + 1
      check.is_true(help:find(name, 1, true) ~= nil, name .. " missing from --help")
    end
    check.is_true(n >= 8, "found " .. n .. " variables in docs/cli.md")
  end,

  ["--dump-graphs into a path that cannot be a directory is an error at the jit call"] = function()
    local dir = files.tmpdir()
    files.write(dir .. "/s.lua", "local f = tpu.jit(function(a) return a + 1 end)\nprint(f(tpu.ones {2}))\n")
    local ok, code = files.sh(string.format("%q --dump-graphs /dev/null/graphs %q >%q 2>%q", arg[-1],
      dir .. "/s.lua", dir .. "/out", dir .. "/err"))
    local err = files.must_read(dir .. "/err")
    files.rmdir(dir)
    check.eq(ok, false)
    check.eq(code, 1, "exit status (not a crash): " .. err)
    check.is_true(err:find("s.lua:2: ", 1, true) ~= nil and err:find("/dev/null/graphs", 1, true) ~= nil, err)
  end,

  ["--profile names each map of a pipeline by its line, and numbers those of one line"] = function()
    local dir = files.tmpdir()
    files.write(dir .. "/p.lua", "local ds = tpu.data.range(8):batch(4):map(function(x) return x * 2 end)\n" ..
      "ds = ds:map(function(x) return x + 1 end):map(function(x) return x - 1 end)\n" ..
      "for _ in ds:iter() do end\n")
    check.is_true(files.sh(string.format("cd %q && %q --profile p.lua 2>err", dir, arg[-1])))
    local err = files.must_read(dir .. "/err")
    files.rmdir(dir)
    for _, name in ipairs {"data.map@p.lua:1 ", "data.map@p.lua:2 #1 ", "data.map@p.lua:2 #2 "} do
      check.is_true(err:find("\n  " .. name, 1, true) ~= nil, name .. " in:\n" .. err)
    end
  end,
  ["--quiet silences fit's progress unless verbose is given"] = function()
    local dir = files.tmpdir()
    files.write(dir .. "/q.lua", "local m = tpu.nn.Sequential {tpu.nn.Dense(1)}\n" ..
      "m:compile {optimizer = 'sgd', loss = 'mse'}\n" ..
      "m:fit(tpu.ones {4, 2}, tpu.ones {4, 1}, {epochs = 2})\n" ..
      "print('verbose 2:') m:fit(tpu.ones {4, 2}, tpu.ones {4, 1}, {verbose = 2})\n")
    check.is_true(files.sh(string.format("cd %q && %q --quiet q.lua >out 2>&1", dir, arg[-1])))
    local quiet = files.must_read(dir .. "/out")
    check.is_true(files.sh(string.format("cd %q && %q q.lua >out 2>&1", dir, arg[-1])))
    local loud = files.must_read(dir .. "/out")
    files.rmdir(dir)
    check.is_true(quiet:match("^verbose 2:\n.*loss") ~= nil, quiet)
    check.is_true(loud:find("Epoch 2/2", 1, true) ~= nil, loud)
  end,
}
