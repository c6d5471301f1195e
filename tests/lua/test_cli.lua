-- The command line's options meeting bad input: an error at the user's line, never a crash.
local check = require "check"
local files = require "files"

return {
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
}
