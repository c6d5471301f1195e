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
function History:append(epoch, logs, order)
  for _, k in ipairs(order) do
    if not self.history[k] then
      self.history[k] = {}
      self.keys[#self.keys + 1] = k
    end
    self.history[k][#self.epoch + 1] = logs[k]
  end
  self.epoch[#self.epoch + 1] = epoch
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
