-- Streams: functions returning the next item, or nil at the end (and on every call after).
-- The data pipeline runs them on source indices or on elements alike.
local M = {}

-- The first n items of a stream.
function M.limit(next_item, n)
  local k = 0
  return function()
    if k >= n then return nil end
    k = k + 1
    return next_item()
  end
end

-- A stream without its first n items.
function M.skip(next_item, n)
  return function()
    while n > 0 do
      n = n - 1
      if next_item() == nil then n = 0 return nil end
    end
    return next_item()
  end
end

-- The items at positions i, i + n, i + 2n, ... (0-based) of a stream.
function M.every(next_item, n, i)
  local skip = i
  return function()
    for _ = 1, skip do
      if next_item() == nil then skip = 0 return nil end
    end
    skip = n - 1
    return next_item()
  end
end

-- The buffer shuffle: fill a buffer of `size` items, hand out a random one and put the next
-- upstream item in its place; when upstream ends, drain the buffer in random order.
-- below(n) draws a uniform integer in [0, n) (tpu.data.random).
function M.shuffled(next_item, size, below)
  local buf, n, done = {}, 0, false
  local function pull()
    if done then return nil end
    local v = next_item()
    done = v == nil
    return v
  end
  local filled = false
  return function()
    if not filled then
      filled = true
      for _ = 1, size do
        local v = pull()
        if v == nil then break end
        n = n + 1
        buf[n] = v
      end
    end
    if n == 0 then return nil end
    local j = below(n) + 1
    local v = buf[j]
    local refill = pull()
    if refill ~= nil then
      buf[j] = refill
    else
      buf[j] = buf[n]
      buf[n] = nil
      n = n - 1
    end
    return v
  end
end

-- Every item of a (finite) stream as a list.
function M.collect(next_item)
  local list = {}
  for v in next_item do list[#list + 1] = v end
  return list
end

-- Up to n items of a stream as a list (empty at the end).
function M.list(next_item, n)
  local list = {}
  for k = 1, n do
    local v = next_item()
    if v == nil then break end
    list[k] = v
  end
  return list
end

return M
