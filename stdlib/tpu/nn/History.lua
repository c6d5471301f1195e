-- What fit returns: history.history.loss[e], history.history.val_accuracy[e], ...;
-- history:plot("curves.svg") draws them.
local class = require "tpu.class"

local History = class("History")

function History:__init(params)
  self.history = {}
  self.epoch = {}
  self.params = params or {}
  self.keys = {}  -- metric names in the order they first appeared
end

-- Records one epoch's logs {name = value}; `order` lists the names in display order.
-- The values of `key` per epoch, a new column (after the others) the first time.
local function column(self, key)
  if not self.history[key] then
    self.history[key] = {}
    self.keys[#self.keys + 1] = key
  end
  return self.history[key]
end

function History:_append(epoch, logs, order)
  for _, k in ipairs(order) do column(self, k)[#self.epoch + 1] = logs[k] end
  self.epoch[#self.epoch + 1] = epoch
end

-- The numbers the last epoch's callbacks added to its logs after append took them (lr_scheduler's
-- learning_rate), recorded for that epoch as Keras's History (the last callback) sees them; new names in
-- sorted order.
function History:_append_late(logs)
  local late, e = {}, #self.epoch
  for k, v in pairs(logs) do
    if type(k) == "string" and math.type(v) and (not self.history[k] or self.history[k][e] == nil) then
      late[#late + 1] = k
    end
  end
  table.sort(late)
  for _, k in ipairs(late) do column(self, k)[e] = logs[k] end
end

-- Writes an SVG chart of the curves per epoch (training solid, validation dashed); returns
-- the path. opts: {title = "..."} (see tpu/plot.lua).
function History:plot(path, opts)
  return require("tpu.plot").history(self, path, opts)
end

function History:__tostring()
  local parts = {}
  for _, k in ipairs(self.keys) do
    local vals = {}
    for i, v in ipairs(self.history[k]) do vals[i] = string.format("%.4f", v) end
    parts[#parts + 1] = k .. " = {" .. table.concat(vals, ", ") .. "}"
  end
  local n = #self.epoch
  return string.format("History(%d epoch%s: %s)", n, n == 1 and "" or "s", table.concat(parts, "; "))
end

return History
