-- Ctrl-C in loops that must stop at a safe point (fit: between steps, never while a checkpoint
-- is being written). The first Ctrl-C only sets a flag while the loop runs inside
--   local _ <close> = interrupt.deferred()
-- and the loop calls interrupt.check(...) where stopping is safe. The script then ends with
-- exit status 130 (as shells report Ctrl-C). Outside such loops Ctrl-C interrupts the Lua code
-- at once; a second Ctrl-C always ends the process (once the file being written is complete).
local M = {}

local function core() return require("tpu").core end

local function fail(fmt, ...)
  error(core().user_where() .. string.format(fmt, ...), 0)
end

local closer = setmetatable({}, {__close = function(_, err)
  core().defer_interrupts(false)
  if err == nil and core().interrupted() then fail("interrupted (Ctrl-C)") end
end})

function M.deferred()
  core().defer_interrupts(true)
  return closer
end

function M.requested() return core().interrupted() end

-- Raises "<what>: interrupted (Ctrl-C) <detail>" when Ctrl-C was pressed.
function M.check(what, detail, ...)
  if not core().interrupted() then return end
  fail("%s: interrupted (Ctrl-C)%s", what, detail and " " .. string.format(detail, ...) or "")
end

return M
