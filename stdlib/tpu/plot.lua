-- Training curves as a self-contained SVG file (opens in any browser):
--
--   local history = model:fit(train, {epochs = 10, validation_data = test})
--   tpu.plot.history(history, "curves.svg")        -- also history:plot("curves.svg")
--   tpu.plot.csv("log.csv", "curves.svg")          -- a csv_logger file; `tputrain plot` does this
--
-- One panel per quantity (loss first, then each metric in the order fit reported them), the
-- training values as a solid line and the validation values ("val_" names) dashed, against
-- the epoch, with axes, ticks, grid lines and a legend. Missing or non-finite values leave a
-- gap in the line. `history` is what fit returns or a plain table {loss = {...}, val_loss = {...}}.
local M = {}

local core = require "tpu.core"

local errors = require "tpu.errors"
local fail = errors.fail

local PANEL_W, PANEL_H = 460, 320
local MARGIN = {left = 64, right = 24, top = 40, bottom = 52}
local COLORS = {train = "#1f77b4", validation = "#e8590c"}

---------------------------------------------------------------- data

local is_finite = require("tpu.nn.util").is_finite

-- {epochs = {...}, n = count, series = {name = {values by position}}, order = {names}}
local function from_history(h, who)
  local values = type(h) == "table" and type(h.history) == "table" and h.history or h
  if type(values) ~= "table" then fail("%s: expected the history fit returns, got %s", who, type(h)) end
  local order = {}
  if type(h.keys) == "table" and #h.keys > 0 then
    for i, k in ipairs(h.keys) do order[i] = k end
  else
    for k in pairs(values) do
      if type(k) == "string" then order[#order + 1] = k end
    end
    table.sort(order, function(a, b)
      local ka, kb = a:gsub("^val_", ""), b:gsub("^val_", "")
      if (ka == "loss") ~= (kb == "loss") then return ka == "loss" end
      return a < b
    end)
  end
  local n = 0
  for _, k in ipairs(order) do
    local list = values[k]
    if type(list) ~= "table" then fail("%s: '%s' is not a list of numbers", who, tostring(k)) end
    for i in pairs(list) do
      if math.type(i) == "integer" and i > n then n = i end
    end
  end
  local epochs = {}
  for i = 1, n do epochs[i] = type(h.epoch) == "table" and h.epoch[i] or i end
  return {epochs = epochs, n = n, series = values, order = order}
end

-- Panels: {name = "loss", train = list or nil, validation = list or nil}, in report order.
local function panels(data)
  local out, by_name = {}, {}
  for _, key in ipairs(data.order) do
    local base = key:gsub("^val_", "")
    local p = by_name[base]
    if not p then
      p = {name = base}
      by_name[base] = p
      out[#out + 1] = p
    end
    if key:match("^val_") then p.validation = data.series[key] else p.train = data.series[key] end
  end
  for i, p in ipairs(out) do  -- the loss first
    if p.name == "loss" then table.insert(out, 1, table.remove(out, i)); break end
  end
  return out
end

---------------------------------------------------------------- scales and ticks

-- Round tick positions covering [lo, hi], about `count` of them.
local function nice_ticks(lo, hi, count)
  local span = hi - lo
  local raw = span / count
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local step = mag
  for _, m in ipairs {1, 2, 2.5, 5, 10} do
    step = m * mag
    if span / step <= count then break end
  end
  local first, last = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
  local ticks = {}
  for i = 0, math.floor((last - first) / step + 0.5) do ticks[#ticks + 1] = first + i * step end
  return ticks, step
end

local function tick_label(v, step)
  if math.abs(v) < step * 1e-6 then v = 0 end
  if math.abs(v) >= 1e5 or (v ~= 0 and math.abs(v) < 1e-4) then return string.format("%.3g", v) end
  local decimals = math.max(0, -math.floor(math.log(step, 10) + 1e-9))
  if step * 10 ^ decimals % 1 > 1e-6 then decimals = decimals + 1 end
  return string.format("%." .. decimals .. "f", v)
end

local function value_range(p)
  local lo, hi = math.huge, -math.huge
  for _, list in ipairs {p.train or {}, p.validation or {}} do
    for _, v in pairs(list) do
      if is_finite(v) then lo, hi = math.min(lo, v), math.max(hi, v) end
    end
  end
  if lo > hi then return 0, 1 end
  if lo == hi then
    local pad = lo == 0 and 1 or math.abs(lo) * 0.1
    return lo - pad, hi + pad
  end
  return lo, hi
end

local function epoch_ticks(epochs, n)
  local lo, hi = epochs[1] or 1, epochs[n] or 1
  if n <= 1 or lo == hi then return {lo}, lo - 1, hi + 1 end
  if hi - lo <= 10 then
    local t = {}
    for e = lo, hi do t[#t + 1] = e end
    return t, lo, hi
  end
  local ticks = nice_ticks(lo, hi, 8)
  local t = {}
  for _, v in ipairs(ticks) do
    if v >= lo and v <= hi and v == math.floor(v) then t[#t + 1] = math.tointeger(v) or v end
  end
  return t, lo, hi
end

---------------------------------------------------------------- SVG

local function esc(s)
  return (tostring(s):gsub("[&<>\"]", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;"}))
end

local function num(v) return string.format("%.2f", v) end

local function text(out, x, y, s, attrs)
  out[#out + 1] = string.format('<text x="%s" y="%s"%s>%s</text>', num(x), num(y), attrs or "", esc(s))
end

local function line(out, x1, y1, x2, y2, attrs)
  out[#out + 1] = string.format('<line x1="%s" y1="%s" x2="%s" y2="%s"%s/>', num(x1), num(y1), num(x2), num(y2), attrs or "")
end

-- The curve of one series: a path broken at missing values, and a marker per point.
local function curve(out, list, data, sx, sy, color, dashed)
  local d, pen = {}, false
  local marks = {}
  for i = 1, data.n do
    local v = list[i]
    if is_finite(v) then
      local x, y = sx(data.epochs[i]), sy(v)
      d[#d + 1] = (pen and "L" or "M") .. num(x) .. " " .. num(y)
      pen = true
      marks[#marks + 1] = dashed
        and string.format('<rect x="%s" y="%s" width="6" height="6" fill="%s"/>', num(x - 3), num(y - 3), color)
        or string.format('<circle cx="%s" cy="%s" r="3.2" fill="%s"/>', num(x), num(y), color)
    else
      pen = false
    end
  end
  if #d > 0 then
    out[#out + 1] = string.format('<path d="%s" fill="none" stroke="%s" stroke-width="2"%s/>',
      table.concat(d, " "), color, dashed and ' stroke-dasharray="6 4"' or "")
  end
  for _, m in ipairs(marks) do out[#out + 1] = m end
end

-- The legend sits in the panel's header, right-aligned, so it never hides a curve.
local function legend(out, p, right, y)
  local entries = {}
  if p.validation then entries[#entries + 1] = {"validation", COLORS.validation, true} end
  if p.train then entries[#entries + 1] = {"train", COLORS.train, false} end
  local x = right
  for _, e in ipairs(entries) do
    x = x - 7.2 * #e[1]
    text(out, x, y + 4, e[1])
    line(out, x - 30, y, x - 6, y, string.format(' stroke="%s" stroke-width="2"%s', e[2], e[3] and ' stroke-dasharray="6 4"' or ""))
    x = x - 46
  end
end

local function draw_panel(out, p, data, ox, oy)
  local left, top = ox + MARGIN.left, oy + MARGIN.top
  local right, bottom = ox + PANEL_W - MARGIN.right, oy + PANEL_H - MARGIN.bottom
  local xt, xlo, xhi = epoch_ticks(data.epochs, data.n)
  local ylo, yhi = value_range(p)
  local yt, ystep = nice_ticks(ylo, yhi, 5)
  ylo, yhi = yt[1], yt[#yt]
  -- 4% of room inside the frame, so points on the extremes stay clear of the axes
  local xpad, ypad = (xhi - xlo) * 0.04, (yhi - ylo) * 0.04
  local function sx(e) return left + (e - xlo + xpad) / (xhi - xlo + 2 * xpad) * (right - left) end
  local function sy(v) return bottom - (v - ylo + ypad) / (yhi - ylo + 2 * ypad) * (bottom - top) end
  text(out, left, oy + 26, p.name, ' font-size="15" font-weight="bold"')
  for _, v in ipairs(yt) do
    local y = sy(v)
    line(out, left, y, right, y, ' stroke="#e5e5e5"')
    line(out, left - 5, y, left, y, ' stroke="#333333"')
    text(out, left - 8, y + 4, tick_label(v, ystep), ' text-anchor="end"')
  end
  for _, e in ipairs(xt) do
    local x = sx(e)
    line(out, x, top, x, bottom, ' stroke="#f0f0f0"')
    line(out, x, bottom, x, bottom + 5, ' stroke="#333333"')
    text(out, x, bottom + 19, tostring(e), ' text-anchor="middle"')
  end
  out[#out + 1] = string.format('<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#333333"/>',
    num(left), num(top), num(right - left), num(bottom - top))
  text(out, (left + right) / 2, bottom + 40, "epoch", ' text-anchor="middle"')
  if p.train then curve(out, p.train, data, sx, sy, COLORS.train, false) end
  if p.validation then curve(out, p.validation, data, sx, sy, COLORS.validation, true) end
  legend(out, p, right, oy + 22)
end

-- The SVG text for a history; `who` names the public function in errors.
local function svg_of(history, opts, who)
  opts = opts or {}
  local data = from_history(history, who)
  local list = panels(data)
  if #list == 0 or data.n == 0 then fail("%s: the history has no values to plot (did fit run?)", who) end
  local cols = #list >= 2 and 2 or 1
  local rows = (#list + cols - 1) // cols
  local title_h = opts.title and 36 or 0
  local w, h = cols * PANEL_W, rows * PANEL_H + title_h
  local out = {
    string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
      .. 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12" fill="#222222">', w, h, w, h),
    string.format('<rect width="%d" height="%d" fill="white"/>', w, h),
  }
  if opts.title then text(out, w / 2, 26, opts.title, ' text-anchor="middle" font-size="17" font-weight="bold"') end
  for i, p in ipairs(list) do
    local c, r = (i - 1) % cols, (i - 1) // cols
    draw_panel(out, p, data, c * PANEL_W, title_h + r * PANEL_H)
  end
  out[#out + 1] = "</svg>\n"
  return table.concat(out, "\n")
end

-- The SVG text for a history (see the top of the file).
function M.svg(history, opts, extra)
  opts = errors.options(2, "plot.svg", opts, {"title"})
  errors.none(3, "plot.svg", extra)
  return svg_of(history, opts, "plot.svg")
end

local function check_path(path, who)
  if type(path) ~= "string" or path == "" then fail("%s: expected an output file path, got %s", who, tostring(path)) end
end

-- Writes the SVG of a history to path (atomically) and returns the path.
function M.history(history, path, opts, extra)
  check_path(path, "plot.history")
  errors.options(3, "plot.history", opts, {"title"})
  errors.none(4, "plot.history", extra)
  core.write_file_atomic(path, svg_of(history, opts, "plot.history"))
  return path
end

---------------------------------------------------------------- csv_logger files

local function split(line, sep)
  local fields = {}
  for field in (line .. sep):gmatch("(.-)" .. sep:gsub("%p", "%%%0")) do fields[#fields + 1] = field end
  return fields
end

local function parse_number(s, file, line_no, column)
  s = s:match("^%s*(.-)%s*$")
  if s == "" or s == "NA" then return nil end
  if s == "nan" or s == "-nan" then return 0 / 0 end
  if s == "inf" then return math.huge end
  if s == "-inf" then return -math.huge end
  local v = tonumber(s)
  if not v then fail("%s:%d: '%s' in column '%s' is not a number", file, line_no, s, column) end
  return v
end

-- The history held by a csv_logger file.
function M.read_csv(path, extra)
  errors.check(1, "plot.read_csv", path, "string")
  errors.none(2, "plot.read_csv", extra)
  local f, err = io.open(path, "rb")
  if not f then fail("plot: cannot read %s", err) end
  local header = (f:read("l") or ""):gsub("\r$", "")
  local sep = header:match("^epoch([^%w_])")
  if not sep then
    f:close()
    fail("plot: %s is not a csv_logger file: its first line must start with the column 'epoch'", path)
  end
  local names = split(header, sep)
  local h = {history = {}, keys = {}, epoch = {}}
  for i = 2, #names do
    h.keys[#h.keys + 1] = names[i]
    h.history[names[i]] = {}
  end
  local line_no, n = 1, 0
  for line in f:lines() do
    line_no = line_no + 1
    line = line:gsub("\r$", "")
    if line ~= "" then
      local fields = split(line, sep)
      if #fields ~= #names then
        f:close()
        fail("%s:%d: %d fields but the header has %d", path, line_no, #fields, #names)
      end
      n = n + 1
      h.epoch[n] = parse_number(fields[1], path, line_no, "epoch") or n
      for i = 2, #names do h.history[names[i]][n] = parse_number(fields[i], path, line_no, names[i]) end
    end
  end
  f:close()
  if n == 0 then fail("plot: %s has no epochs yet (only the header)", path) end
  return h
end

-- tputrain plot log.csv out.svg
function M.csv(csv_path, svg_path, opts, extra)
  check_path(csv_path, "plot.csv")
  check_path(svg_path, "plot.csv")
  errors.options(3, "plot.csv", opts, {"title"})
  errors.none(4, "plot.csv", extra)
  return M.history(M.read_csv(csv_path), svg_path, opts)
end

-- A name tpu.plot lacks is an error listing what it has.
return errors.strict_namespace(M, "tpu.plot")
