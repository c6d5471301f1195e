-- SIGINT (Ctrl-C), SIGTERM and SIGHUP in loops that must stop at a safe point (fit: between
-- steps, never while a checkpoint is being written). The first signal only sets a flag while
-- the loop runs inside
--   local _ <close> = interrupt.deferred()
-- and the loop calls interrupt.check(...) where stopping is safe. The script then ends with
-- exit status 128 + the signal (130, 143, 129, as shells report them). Outside such loops the
-- signal interrupts the Lua code at once; a second one always ends the process (once the file
-- being written is complete).
local M = {}

local core = require "tpu.core"
local errors = require "tpu.errors"

local fail = errors.fail

local closer = setmetatable({}, {__close = function(_, err)
  core.defer_interrupts(false)
  local interrupted, label = core.interrupted()
  if err == nil and interrupted then fail("interrupted (%s)", label) end
end})

function M.deferred()
  core.defer_interrupts(true)
  return closer
end

function M.requested() return core.interrupted() end

-- Raises "<what>: interrupted (SIGTERM) <detail>" when a signal came (SIGINT, SIGTERM or SIGHUP).
function M.check(what, detail, ...)
  local interrupted, label = core.interrupted()
  if not interrupted then return end
  fail("%s: interrupted (%s)%s", what, label, detail and " " .. string.format(detail, ...) or "")
end

return M
