-- The background gather behind prefetch(n): a C++ BatchPrefetcher (engine/data/prefetch.h)
-- copies the rows of the next batches from the source tensors (or decodes an image folder's
-- files) on its own thread while the training step runs; Lua only hands it index lists and
-- takes finished batches. A source that can do this has prefetcher(depth) (the C++ object)
-- and from_leaves(list) (its batch from the list of tensors the object returns).
--
-- The traced maps right after the batch (`batch(n):map(f):map(g):prefetch(2)`) run on that
-- thread too, once compiled: the first batch of each size runs them here, on the caller's
-- thread (tracing and compiling them, with their errors at the user's line), and keeps each
-- map's compiled executable; later batches of that size are pushed with those executables
-- (and each map's random key, for map {seed =}), and come back mapped.
local jit = require "tpu.jit"

local M = {}

-- Runs the chain's maps on `element` (batch k of the pass) on this thread. Returns the mapped
-- element and, when the thread can run them the same way, the plan: each map's compiled entry.
local function run_here(chain, element, k, gathered)
  local plan, expected = {}, gathered
  for i, link in ipairs(chain) do
    local args = table.pack(link.map:_arguments(element, link.epoch, k))
    element = link.map:_apply(args)
    local leaves = jit.flatten(args)
    local extra = jit.flatten({link.map:_key(link.epoch, k)})
    -- The thread passes the previous results, then the key: only when these are the leaves.
    if #leaves ~= #expected + #extra then plan = nil end
    for j = 1, i == 1 and #expected or 0 do
      if not rawequal(leaves[j], expected[j]) then plan = nil end
    end
    if plan then plan[i] = link.map._fn:_entry(table.unpack(args, 1, args.n)) end
    expected = jit.flatten(element)
  end
  return element, plan
end

-- Stages of plans whose maps take no key: the same for every batch, so made once (flattening
-- the keys cost the caller about 6 us a batch, between its training steps).
local keyless_stages = setmetatable({}, {__mode = "k"})

-- The stages to push for batch k: each map's executable and its key's leaves.
local function stages(chain, plan, k)
  if keyless_stages[plan] then return keyless_stages[plan] end
  local out, keyed = {}, false
  for i, link in ipairs(chain) do
    local key = link.map:_key(link.epoch, k)
    keyed = keyed or key ~= nil
    out[i] = {plan[i].exe, table.unpack((jit.flatten({key})))}
  end
  if not keyed then keyless_stages[plan] = out end
  return out
end

-- A stream of batches of `source` for the index lists (or i32 vectors) of `groups`, with up to `depth` batches
-- gathered ahead, mapped by `chain` (a list, innermost first, of {map =, epoch =}; may be
-- nil). ctx.stats() then tells how the gathering went: {batches, ready (batches already
-- gathered when asked for), gather_ms, map_ms, wait_ms}. The thread ends with the pass (or
-- when the stream is garbage).
function M.batches(source, groups, depth, ctx, chain)
  local p = source:prefetcher(depth)
  local final
  ctx.stats = function() return final or p:stats() end
  -- Plans by batch size, kept on the outermost map for every pass.
  local plans = chain and chain[#chain].map:_thread_plans()
  local queued, pushed, popped, map_ms = {}, 0, 0, 0
  local done = false
  local function refill()
    while not done and p:pending() < depth do
      local indices = groups()
      if not indices then
        done = true
      else
        local size = type(indices) == "table" and #indices or indices.shape[1]  -- a list or an i32 vector
        local plan = plans and plans[size]
        p:push(indices, plan and stages(chain, plan, pushed) or nil)
        queued[pushed] = {size = size, plan = plan}
        pushed = pushed + 1
      end
    end
  end
  return function()
    refill()
    if final then return nil end
    local leaves = p:pop()
    if leaves == nil then
      final = p:stats()
      p:close()
      return nil
    end
    local k = popped
    local request = queued[k]
    queued[k], popped = nil, popped + 1
    refill()  -- keep `depth` batches in preparation during the caller's step
    if not chain then return source:from_leaves(leaves) end
    if request.plan then
      local ms = p:stats().map_ms
      for _, link in ipairs(chain) do link.map._fn:_count_runs(1, (ms - map_ms) / #chain) end
      map_ms = ms
      return jit.unflatten(request.plan[#chain].spec, leaves)[1]  -- the map's one result, a list
    end
    local element, plan = run_here(chain, source:from_leaves(leaves), k, leaves)
    plans[request.size] = plans[request.size] or plan
    return element
  end
end

return M
