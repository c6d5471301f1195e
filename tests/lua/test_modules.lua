-- How the stdlib's modules depend on each other.
local check = require "check"

local here = arg[0]:match("^(.*)/[^/]*$") or "."

return {
  ["every stdlib module loads first without a require cycle (no module file runs twice)"] = function()
    local p = assert(io.popen(string.format("%s %s/load_order.lua 2>&1", arg[-1] or "tputrain", here)))
    local out = p:read("a")
    p:close()
    check.eq(out, "ok\n")
  end,
}
