-- Helpers shared by the tpu.data tests (not a test file itself).
local tpu = require "tpu"
local files = require "files"
local data = tpu.data

local M = {}

local function plain(v)
  if tpu.is_tensor(v) then return v:totable() end
  if type(v) == "table" then
    local out = {}
    for k, x in pairs(v) do out[k] = plain(x) end
    return out
  end
  return v
end
M.plain = plain

-- Every element of one pass, each as a list of components converted with totable() (strings
-- stay); single-component elements unwrapped.
function M.collect(ds, opts)
  local out = {}
  local it = ds:iter(opts)
  while true do
    local e = table.pack(it())
    if e[1] == nil then break end
    for i = 1, e.n do e[i] = plain(e[i]) end
    e.n = nil
    if #e == 1 then out[#out + 1] = e[1] else out[#out + 1] = e end
  end
  return out
end

function M.iota(n, from)
  local t = {}
  for i = 1, n do t[i] = (from or 0) + i - 1 end
  return t
end

-- A generator data set of 0 .. n-1 (not indexable: elements come one by one).
function M.counter(n)
  return data.generator(function()
    local i = -1
    return function()
      i = i + 1
      if i < n then return tpu.tensor(i, {dtype = "i32"}) end
    end
  end)
end

-- A generator of (i32[len] token ids, label) for the given lengths: ids 1..len, label = len.
function M.sequences(lengths)
  return data.generator(function()
    local k = 0
    return function()
      k = k + 1
      local len = lengths[k]
      if len == nil then return nil end
      return tpu.tensor(M.iota(len, 1), {dtype = "i32"}), len
    end
  end)
end

-- A new empty directory, removed at exit if the test does not remove it (files.tmpdir).
M.temp_dir = files.tmpdir
M.remove = files.rmdir

function M.write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end

-- Writes a .npy file: descr like "<f4", shape as the header writes it ("(2, 3)"), the raw
-- payload; opts: fortran (bool), version (1..3), header (the whole dict text instead).
function M.write_npy(path, descr, shape, payload, opts)
  opts = opts or {}
  local dict = opts.header or string.format("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }",
    descr, opts.fortran and "True" or "False", shape)
  local version = opts.version or 1
  local len_format = version == 1 and "<I2" or "<I4"
  local pre = 8 + (version == 1 and 2 or 4)
  local header = dict .. string.rep(" ", (64 - (pre + #dict + 1) % 64) % 64) .. "\n"
  return M.write(path, "\x93NUMPY" .. string.char(version, 0) .. string.pack(len_format, #header)
    .. header .. payload)
end

-- Whether a message starts with a user file:line.
function M.located(msg) return msg:match("^[^:]+%.lua:%d+: ") ~= nil end

return M
