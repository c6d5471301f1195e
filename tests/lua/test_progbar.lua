-- fit's progress line on a terminal: redrawn in place, so it must never wrap.
local check = require "check"
local Progbar = require "tpu.nn.Progbar"

local T = {}

-- A progress bar writing into a list of chunks, as on a terminal `columns` wide.
local function bar(columns, target)
  local written = {}
  local out = {write = function(self, ...) for _, s in ipairs {...} do written[#written + 1] = s end; return self end,
               flush = function() end}
  return Progbar {target = target, tty = true, out = out, columns = columns}, written
end

-- The screen lines of what was written: each "\r" returns to the line's start, each "\n" ends it.
local function screen_lines(written)
  local text = table.concat(written)
  local lines = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    local shown = line:match("([^\r]*)$")
    lines[#lines + 1] = shown
    for part in line:gmatch("[^\r]+") do check.is_true(#part < 80 or #part <= #shown, part) end
  end
  return lines
end

local metrics = {{"loss", 0.1234}, {"accuracy", 0.9}, {"val_loss", 0.2}, {"val_accuracy", 0.85},
                 {"top_k_accuracy", 0.99}}

-- A terminal that reports no width (a 0x0 pseudo-terminal): the lines are written whole.
function T.a_terminal_without_a_width_gets_whole_lines()
  local asked = Progbar._terminal_columns
  Progbar._terminal_columns = function() return nil end
  local ok, p, written = pcall(bar, nil, 10)
  Progbar._terminal_columns = asked
  check.is_true(ok, p)
  check.is_true(p.columns == nil, "no width: " .. tostring(p.columns))
  p:update(5, metrics)
  p:update(10, metrics, true)
  local shown = table.concat(screen_lines(written), "\n")
  check.is_true(shown:find("10/10 %[=+%].* top_k_accuracy: 0%.9900") ~= nil, shown)
end

function T.lines_fit_80_columns()
  local p, written = bar(80, 1875)
  for step = 1, 1875, 125 do p.last_draw = -math.huge; p:update(step, metrics) end
  p:update(1875, metrics, true)
  for _, chunk in ipairs(written) do
    for piece in chunk:gmatch("[^\r\n]+") do check.is_true(#piece < 80, piece .. " is " .. #piece .. " columns") end
  end
  local lines = screen_lines(written)
  check.is_true(#lines >= 2, "the closing line goes on below")
  check.is_true(lines[1]:find("^1875/1875 %[=+%] %- ") ~= nil, lines[1])
  check.is_true(lines[#lines - 1]:find("^    ") ~= nil, "continuation lines are indented")
  local all = table.concat(lines, " ")
  for _, m in ipairs(metrics) do check.is_true(all:find(m[1] .. ": ", 1, true) ~= nil, m[1]) end
end

function T.a_wide_terminal_keeps_the_whole_line()
  local p, written = bar(200, 10)
  p:update(10, metrics, true)
  local lines = screen_lines(written)
  check.eq(#lines, 2)  -- the line and the empty rest after its "\n"
  check.is_true(lines[1]:find("[" .. string.rep("=", 30) .. "]", 1, true) ~= nil, lines[1])
end

function T.the_bar_narrows_before_anything_is_cut()
  local p, written = bar(80, 10)
  p:update(5, {{"loss", 0.5}, {"accuracy", 0.5}, {"lr", 0.5}})
  local line = table.concat(written):match("\r([^\r]*)$")
  check.is_true(#line == 79 and line:find("lr: 0.5000", 1, true) ~= nil, line)
  check.is_true(line:find("[" .. string.rep("=", 30) .. "]", 1, true) == nil, "a narrower bar: " .. line)
end

return T
