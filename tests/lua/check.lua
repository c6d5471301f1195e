-- Tiny assertions for the Lua tests. Each raises an error naming what differed.
--   check.eq(a, b, msg)          a == b; tables are compared deeply
--   check.near(a, b, tol, msg)   |a - b| <= tol; numbers, or tables of numbers deeply
--   check.is_true(v, msg)        v == true
--   check.raises(fn, pattern)    fn() must fail with a message containing `pattern` (a plain
--                                substring, or a Lua pattern); returns the message
local check = {}

local function show(v)
  if type(v) ~= "table" then return type(v) == "string" and string.format("%q", v) or tostring(v) end
  local parts, n = {}, #v
  for i = 1, n do parts[#parts + 1] = show(v[i]) end
  local keys = {}
  for k in pairs(v) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. " = " .. show(v[k]) end
  return "{" .. table.concat(parts, ", ") .. "}"
end
check.show = show

-- Deep comparison; returns nil when equal, else the path of the first difference.
local function differ(a, b, path, same)
  if type(a) == "table" and type(b) == "table" then
    for k, v in pairs(a) do
      local d = differ(v, b[k], path .. "[" .. show(k) .. "]", same)
      if d then return d end
    end
    for k in pairs(b) do
      if a[k] == nil then return path .. "[" .. show(k) .. "]" end
    end
    return nil
  end
  if not same(a, b) then return path == "" and "value" or path end
end

local function fail(msg, text) error((msg and msg .. ": " or "") .. text, 3) end

function check.eq(a, b, msg)
  local d = differ(a, b, "", function(x, y) return x == y end)
  if d then fail(msg, "expected " .. show(b) .. ", got " .. show(a) .. " (differs at " .. d .. ")") end
end

function check.near(a, b, tol, msg)
  local d = differ(a, b, "", function(x, y)
    return type(x) == "number" and type(y) == "number" and math.abs(x - y) <= tol
  end)
  if d then fail(msg, "expected " .. show(b) .. " within " .. tol .. ", got " .. show(a) .. " (differs at " .. d .. ")") end
end

function check.is_true(v, msg)
  if v ~= true then fail(msg, "expected true, got " .. show(v)) end
end

function check.raises(fn, pattern)
  local ok, err = pcall(fn)
  if ok then fail(nil, "expected an error matching " .. show(pattern) .. ", but none was raised") end
  err = tostring(err)
  local plain = err:find(pattern, 1, true)
  local okp, matched = pcall(string.find, err, pattern)
  if not (plain or (okp and matched)) then
    fail(nil, "expected an error matching " .. show(pattern) .. ", got " .. show(err))
  end
  return err
end

return check
