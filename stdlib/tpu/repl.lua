-- How the REPL shows the values of an expression: tables as constructors ({28, 28, 1},
-- {compute_dtype = "bf16", variable_dtype = "f32"}), nested a few levels deep and cut when long;
-- anything with __tostring (tensors, layers) and every other value through tostring.
local M = {}

local kMaxDepth, kMaxItems = 3, 40

local function is_identifier(k)
  return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil
end

local function key_order(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

local format

local function format_table(t, depth, seen)
  if seen[t] then return "<cycle>" end
  if depth >= kMaxDepth then return "{...}" end
  seen[t] = true
  local parts, n = {}, #t
  for i = 1, math.min(n, kMaxItems) do parts[#parts + 1] = format(t[i], depth + 1, seen, true) end
  local keys = {}
  for k in pairs(t) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, key_order)
  for _, k in ipairs(keys) do
    if #parts >= kMaxItems then break end
    local name = is_identifier(k) and k or "[" .. format(k, depth + 1, seen, true) .. "]"
    parts[#parts + 1] = name .. " = " .. format(t[k], depth + 1, seen, true)
  end
  if n + #keys > kMaxItems then parts[#parts + 1] = "..." end
  seen[t] = nil
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- The text of v; strings are quoted inside tables, as they would be written.
function format(v, depth, seen, nested)
  if type(v) == "string" then return nested and string.format("%q", v) or v end
  if type(v) ~= "table" then return tostring(v) end
  local mt = getmetatable(v)
  if mt and mt.__tostring then return tostring(v) end
  return format_table(v, depth, seen)
end

-- The text the REPL prints for one value.
function M.format(v) return format(v, 0, {}, false) end

-- Prints the values tab-separated on one line, as print does.
function M.print(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = M.format((select(i, ...))) end
  print(table.concat(parts, "\t"))
end

return M
