-- Writes each epoch's logs as a line of a CSV file.
local Callback = require "tpu.callbacks.Callback"
local util = require "tpu.callbacks.util"
local errors = require "tpu.errors"

local fail, show = errors.fail, errors.show

local CsvLogger = Callback:extend("CsvLogger")

-- csv_logger{path = "log.csv", separator = ",", append = false}, or as Keras's CSVLogger:
-- csv_logger("log.csv"[, {separator = ",", append = false}]).
-- One line per epoch: "epoch" then the logs' names in sorted order (loss, metrics, val_...),
-- written and flushed as each epoch ends. `tputrain plot log.csv out.svg` draws it.
function CsvLogger:__init(opts, more)
  local who = "csv_logger"
  if type(opts) == "string" then
    more = util.check_options(who, more, {"separator", "append"})
    more.path = opts
    opts = more
  else
    errors.none(2, who, more)
  end
  opts = util.check_options(who, opts, {"path", "separator", "append"})
  if type(opts.path) ~= "string" or opts.path == "" then
    fail("csv_logger: path must be a file name, e.g. csv_logger{path = \"log.csv\"}, got %s", show(opts.path))
  end
  self.path = opts.path
  self.separator = util.check_type(who, "separator", opts.separator, "string", ",")
  if #self.separator ~= 1 or self.separator:match("[%w%.%-\"\n]") then
    fail("csv_logger: separator must be one punctuation character such as \",\" or \";\", got %s", show(self.separator))
  end
  self.append = util.check_type(who, "append", opts.append, "boolean", false)
end

local function file_has_content(path)
  local f = io.open(path, "rb")
  if not f then return false end
  local size = f:seek("end")
  f:close()
  return size > 0
end

function CsvLogger:on_train_begin()
  self:_close()
  self.keys = nil
  local has_header = self.append and file_has_content(self.path)
  local f, err = io.open(self.path, self.append and "ab" or "wb")
  if not f then fail("csv_logger: cannot write %s", err) end
  self.file = f
  if has_header then self.keys = self:_existing_keys() end
end

-- The columns of the header already in the file (append mode), without "epoch".
function CsvLogger:_existing_keys()
  local f = io.open(self.path, "rb")
  local line = f and f:read("l")
  if f then f:close() end
  if not line then return nil end
  local keys = {}
  for field in (line .. self.separator):gmatch("(.-)" .. self.separator:gsub("%p", "%%%0")) do
    keys[#keys + 1] = field
  end
  if keys[1] ~= "epoch" then return nil end
  table.remove(keys, 1)
  return keys
end

local function format_value(v)
  if math.type(v) == "integer" then return tostring(v) end
  if type(v) ~= "number" then return v == nil and "NA" or tostring(v) end
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  return string.format("%.9g", v)
end

function CsvLogger:on_epoch_end(epoch, logs)
  if not self.file then self:on_train_begin() end
  logs = logs or {}
  local sep = self.separator
  if not self.keys then
    self.keys = {}
    for k, v in pairs(logs) do
      if type(v) == "number" then self.keys[#self.keys + 1] = k end
    end
    table.sort(self.keys)
    self.file:write("epoch", #self.keys > 0 and sep or "", table.concat(self.keys, sep), "\n")
  end
  local row = {tostring(epoch)}
  for _, k in ipairs(self.keys) do row[#row + 1] = format_value(logs[k]) end
  self.file:write(table.concat(row, sep), "\n")
  self.file:flush()
end

function CsvLogger:_close()
  if self.file then self.file:close() end
  self.file = nil
end

function CsvLogger:on_train_end() self:_close() end


return CsvLogger
