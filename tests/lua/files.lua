-- Shell and file helpers for tests that write files or start processes.
--
--   local files = require "files"
--   local dir = files.tmpdir(); files.write(dir .. "/a.lua", "print(1)"); files.rmdir(dir)
local M = {}

-- Runs a shell command: true when it exited 0, and its exit code.
function M.sh(cmd)
  local ok, _, code = os.execute(cmd)
  return ok == true, code
end

-- A new empty directory.
function M.tmpdir()
  local dir = os.tmpname()
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

return M
