-- Progress line for fit/evaluate:
--   234/234 [==============================] - 3s 11ms/step - loss: 0.4012 - accuracy: 0.8563
-- On a terminal the line is redrawn as steps complete, within the terminal's width; otherwise
-- only the final line is printed; verbose = 0 prints nothing.
local class = require "tpu.class"

local Progbar = class("Progbar")

local WIDTH = 30

local function tpu_core()
  local ok, tpu = pcall(require, "tpu")
  return ok and type(tpu) == "table" and tpu.core or {}
end

function Progbar._now()
  local core = tpu_core()
  return core.now and core.now() or os.time()
end

function Progbar._isatty()
  local core = tpu_core()
  return core.isatty ~= nil and core.isatty() == true
end

-- The terminal's width, or nil when it does not say (a pseudo-terminal of size 0x0, as `script`
-- and `docker exec -t` make). Not named `columns`: an instance without a width would find it.
function Progbar._terminal_columns()
  local core = tpu_core()
  return core.terminal_columns and core.terminal_columns() or nil
end

-- Progbar{target = steps or nil (unknown), verbose = 1, tty = bool, out = file, columns = the
-- terminal's width (asked of the terminal when tty)}
function Progbar:__init(opts)
  self.target = opts.target and opts.target > 0 and opts.target or nil
  self.verbose = opts.verbose or 1
  self.tty = opts.tty
  if self.tty == nil then self.tty = Progbar._isatty() end
  self.columns = opts.columns or (self.tty and Progbar._terminal_columns()) or nil
  self.out = opts.out or io.stdout
  self.start = Progbar._now()
  self.last_draw = -math.huge
  self.width = 0
end

local function format_value(v)
  if math.abs(v) > 1e-3 or v == 0 then return string.format("%.4f", v) end
  return string.format("%.4e", v)
end

local function format_time(t)  -- per-step time
  if t >= 1 then return string.format("%.0fs/step", t) end
  if t >= 1e-3 then return string.format("%.0fms/step", t * 1e3) end
  return string.format("%.0fus/step", t * 1e6)
end

local function format_eta(s)
  if s > 3600 then
    return string.format("%d:%02d:%02d", s // 3600, (s % 3600) // 60, s % 60)
  elseif s > 60 then
    return string.format("%d:%02d", s // 60, s % 60)
  end
  return string.format("%ds", s)
end

function Progbar:_bar(current, width)
  if not self.target then
    return string.format("%7d/Unknown", current)
  end
  local digits = #tostring(self.target)
  local filled = math.floor(width * math.min(current / self.target, 1))
  local bar = string.rep("=", math.max(filled - 1, 0))
  if filled > 0 then bar = bar .. (current < self.target and ">" or "=") end
  bar = bar .. string.rep(".", width - filled)
  return string.format("%" .. digits .. "d/%d [%s]", current, self.target, bar)
end

-- values: list of {name, number}
function Progbar:_line(current, values, final, width)
  local elapsed = Progbar._now() - self.start
  local parts = {self:_bar(current, width or WIDTH)}
  if final or not self.target then
    parts[#parts + 1] = string.format("%.0fs %s", elapsed, format_time(elapsed / math.max(current, 1)))
  else
    local eta = elapsed / math.max(current, 1) * (self.target - current)
    parts[#parts + 1] = "ETA: " .. format_eta(math.floor(eta + 0.5))
  end
  for _, nv in ipairs(values) do
    parts[#parts + 1] = nv[1] .. ": " .. format_value(nv[2])
  end
  return table.concat(parts, " - ")
end

-- The line within the terminal's columns (a wrapped line cannot be redrawn in place), as a
-- list of lines: the bar narrows first (down to 10), then a line in progress is cut, and the
-- closing one goes on in following lines, indented, split at its " - " separators.
function Progbar:_fitted(current, values, final, closing)
  local text, cols = self:_line(current, values, final), self.columns
  if not cols or #text < cols then return {text} end
  text = self:_line(current, values, final, math.max(10, WIDTH - (#text - cols + 1)))
  if #text < cols then return {text} end
  if not closing then return {text:sub(1, cols - 1)} end
  local lines, last = {}, nil
  for part in (text .. " - "):gmatch("(.-) %- ") do
    if last and #last + 3 + #part < cols then
      last = last .. " - " .. part
    else
      lines[#lines + 1] = last
      last = last and "    " .. part or part
    end
  end
  lines[#lines + 1] = last
  return lines
end

function Progbar:_draw(lines, final)
  local pad = string.rep(" ", math.max(self.width - #lines[1], 0))
  self.out:write("\r", lines[1], pad, #lines > 1 and "\n" or "", table.concat(lines, "\n", 2), final and "\n" or "")
  self.out:flush()
  self.width = #lines[#lines]
end

-- Call after each step; `final` closes the line (after validation, with its values).
function Progbar:update(current, values, final)
  if self.verbose == 0 then return end
  if final then
    if self.tty then self:_draw(self:_fitted(current, values, true, true), true)
    else self.out:write(self:_line(current, values, true), "\n") end
    return
  end
  if not self.tty then return end
  local now = Progbar._now()
  if now - self.last_draw < 0.05 and current ~= self.target then return end
  self.last_draw = now
  self:_draw(self:_fitted(current, values, current == self.target, false), false)
end

return Progbar
