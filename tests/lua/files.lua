-- Shell and file helpers for tests that write files or start processes.
--
--   local files = require "files"
--   local dir = files.tmpdir(); files.write(dir .. "/a.lua", "print(1)"); files.rmdir(dir)
--
-- Every path tmpname and tmpdir give is removed when the Lua state closes (the script's end, an
-- uncaught error, os.exit(code, true)) or at files.cleanup(), so a test that fails midway leaves
-- nothing in /tmp either. Golden scripts and tests/docs/check.lua load this file with dofile.
if package.loaded.files then return package.loaded.files end  -- one list of paths per state
local M = {}

local made = {}  -- the paths tmpname and tmpdir gave, still to remove

-- Removes every path tmpname and tmpdir gave so far (and whatever was written under them).
function M.cleanup()
  for i = #made, 1, -1 do
    os.execute("rm -rf '" .. made[i] .. "'")
    made[i] = nil
  end
end

-- Collected only when the state closes, as the module stays in package.loaded.
M.at_exit = setmetatable({}, {__gc = M.cleanup})

-- A new empty file's path (os.tmpname makes the file); with `suffix`, a path that is the new
-- file's name and suffix, which nothing has made yet. Both are removed at exit.
function M.tmpname(suffix)
  local path = os.tmpname()
  made[#made + 1] = path
  if suffix then
    path = path .. suffix
    made[#made + 1] = path
  end
  return path
end

-- Runs a shell command: true when it exited 0, and its exit code.
function M.sh(cmd)
  local ok, _, code = os.execute(cmd)
  return ok == true, code
end

-- A new empty directory, removed at exit with everything in it.
function M.tmpdir()
  local dir = M.tmpname()
  os.remove(dir)
  assert(M.sh("mkdir -p " .. dir))
  return dir
end

function M.rmdir(dir) M.sh("rm -rf " .. dir) end

function M.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- The file's bytes, or nil when it cannot be read.
function M.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- The file's bytes; an error when it cannot be read.
function M.must_read(path) return assert(M.read(path), "cannot read " .. path) end

package.loaded.files = M  -- also when loaded with dofile, which keeps nothing
return M
