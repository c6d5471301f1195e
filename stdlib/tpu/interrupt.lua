-- SIGINT (Ctrl-C), SIGTERM and SIGHUP in loops that must stop at a safe point (fit: between
-- steps, never while a checkpoint is being written). The first signal only sets a flag while
-- the loop runs inside
--   local _ <close> = interrupt.deferred()
-- and the loop calls interrupt.check(...) where stopping is safe; interrupt.deferred(fn) also
-- turns an error the signal raised inside the loop (a compile it stopped) into fn's message;
-- every other error passes through unchanged. The script then ends with exit status 128 + the
-- signal (130, 143, 129, as shells report them). Outside such loops the signal interrupts the
-- Lua code at once; a second one always ends the process (once the file being written is
-- complete).
local M = {}

local core = require "tpu.core"
local errors = require "tpu.errors"

local fail = errors.fail

-- True for an error the stop raised: the interpreter's "file:line: interrupted (SIGTERM)", the
-- engine's "interrupted (SIGTERM) while compiling", interrupt.check's "fit: interrupted
-- (SIGTERM) after step N" (so also an inner loop's, as validation's inside fit).
local function raised_by_signal(err)
  return type(err) == "string" and err:find("interrupted (SIG", 1, true) ~= nil
end

local function closer(on_interrupt)
  return setmetatable({}, {__close = function(_, err)
    core.defer_interrupts(false)
    local interrupted, label = core.interrupted()
    if not interrupted then return end
    -- Any other error (a callback's bug, a nonfinite loss, a shape error) unwinds unchanged,
    -- with its own message and file:line, also after a signal came.
    if err ~= nil and not raised_by_signal(err) then return end
    -- The loop's own message, also for an error the signal raised inside a step (a compile
    -- stopped: "interrupted (SIGINT) while compiling"); it replaces that error. In nested
    -- scopes the outermost loop's message stands (fit's, not its validation's).
    if on_interrupt then on_interrupt() end
    if err == nil then fail("interrupted (%s)", label) end
  end})
end

local plain = closer()

-- on_interrupt (optional): called when the scope ends after a signal, normally or by an error,
-- to raise the loop's own message (interrupt.check's).
function M.deferred(on_interrupt)
  core.defer_interrupts(true)
  return on_interrupt and closer(on_interrupt) or plain
end

function M.requested() return core.interrupted() end

-- Raises "<where><what>: interrupted (SIGTERM) <detail>" when a signal came (SIGINT, SIGTERM or
-- SIGHUP). A deferred scope's on_interrupt passes the where it took on entry: while an error
-- unwinds, the loop's frame is gone.
function M.check_at(where, what, detail, ...)
  local interrupted, label = core.interrupted()
  if not interrupted then return end
  errors.fail_at(where, "%s: interrupted (%s)%s", what, label, detail and " " .. string.format(detail, ...) or "")
end

function M.check(what, detail, ...)
  if core.interrupted() then M.check_at(errors.where(), what, detail, ...) end
end

return M
