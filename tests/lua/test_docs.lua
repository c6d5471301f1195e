-- The examples of docs/*.md run as tests: each file's ```lua blocks run in order as one chunk, and a line `print(...)   --> a  b` must print a and b (values joined by two
-- spaces).
local tpu = require "tpu"
local check = require "check"

local T = {}

local root = (arg and arg[0] and arg[0]:match("^(.*)/tests/lua/[^/]*$")) or "."
local docs = root .. "/docs"

local function blocks(text)
  local list = {}
  for code in text:gmatch("```lua\n(.-)```") do list[#list + 1] = code end
  return list
end

local function run_file(path)
  local file = assert(io.open(path))
  local text = file:read("a")
  file:close()
  local printed = {}
  local env = setmetatable({print = function(...)
    local parts = table.pack(...)
    for i = 1, parts.n do parts[i] = tostring(parts[i]) end
    printed[#printed + 1] = table.concat(parts, "  ", 1, parts.n)
  end}, {__index = _G})
  local code = table.concat(blocks(text), "\n")  -- one chunk: a block's locals reach the next
  local expected = {}
  for line in code:gmatch("[^\n]+") do
    local want = line:match("%-%->%s*(.-)%s*$")
    if want then expected[#expected + 1] = want end
  end
  assert(load(code, "=" .. path, "t", env))()
  check.eq(printed, expected, path)
end

for _, name in ipairs(tpu.core.list_dir(docs) or {}) do
  if name:match("%.md$") then
    T["docs_" .. name:gsub("%.md$", "")] = function() run_file(docs .. "/" .. name) end
  end
end

return T
