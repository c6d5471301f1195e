-- `tputrain test` as a user runs it on their own scripts: --update writes the expectations,
-- never through a symbolic link.
local check = require "check"
local files = require "files"

-- Runs `tputrain test path [--update]`: whether it exited 0, and its output.
local function run_test(path, update)
  local log = files.tmpname()
  local ok = files.sh(string.format("%q test %q %s >%q 2>&1", arg[-1], path, update and "--update" or "", log))
  local text = files.must_read(log)
  os.remove(log)
  return ok, text
end

return {
  ["--update writes the .out and a later run passes"] = function()
    local dir = files.tmpdir()
    files.write(dir .. "/hello.lua", 'print("hello")\n')
    local ok, log = run_test(dir, true)
    check.is_true(ok, log)
    check.eq(files.must_read(dir .. "/hello.out"), "hello\n")
    ok, log = run_test(dir, false)
    check.is_true(ok, log)
    check.is_true(log:find("1 passed, 0 failed", 1, true) ~= nil, log)
    files.rmdir(dir)
  end,

  ["a directory without scripts is a usage error naming it, not 0 passed"] = function()
    local dir = files.tmpdir()
    files.write(dir .. "/notes.txt", "no scripts here\n")
    local log = files.tmpname()
    local ok, code = files.sh(string.format("%q test %q >%q 2>&1", arg[-1], dir, log))
    local text = files.must_read(log)
    os.remove(log)
    files.rmdir(dir)
    check.eq(ok, false, text)
    check.eq(code, 2, text)
    check.is_true(text:find("no tests found in " .. dir, 1, true) ~= nil, text)
    check.is_true(text:find("0 passed", 1, true) == nil, text)
  end,

  ["--update never writes through a symbolic link"] = function()
    local dir = files.tmpdir()
    files.write(dir .. "/target.txt", "keep me\n")
    files.write(dir .. "/hello.lua", 'print("hello")\n')
    check.is_true(files.sh(string.format("ln -s %q %q", dir .. "/target.txt", dir .. "/hello.out")))
    local ok, log = run_test(dir, true)
    check.eq(ok, false, "the run should fail")
    check.is_true(log:find("hello.out is a symbolic link", 1, true) ~= nil, log)
    check.eq(files.must_read(dir .. "/target.txt"), "keep me\n")
    -- A failing script's .err may be a link too.
    files.write(dir .. "/fails.lua", 'error("no")\n')
    check.is_true(files.sh(string.format("ln -s %q %q", dir .. "/target.txt", dir .. "/fails.err")))
    ok, log = run_test(dir .. "/fails.lua", true)
    check.eq(ok, false)
    check.is_true(log:find("fails.err is a symbolic link", 1, true) ~= nil, log)
    check.eq(files.must_read(dir .. "/target.txt"), "keep me\n")
    files.rmdir(dir)
  end,
}
