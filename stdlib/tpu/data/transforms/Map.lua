-- ds:map(fn): fn applied to every element, traced and compiled (tpu.jit); with {host = true}
-- a plain Lua function instead (HostMap).
local Dataset = require "tpu.data.Dataset"
local structure = require "tpu.data.structure"
local args = require "tpu.data.args"
local errors = require "tpu.errors"

-- "tpu" loads this module, so reach it lazily.
local tpu = require "tpu"

local Map = Dataset:extend("Map")

-- fn's results (up to the last non-nil) as an element. Numbers and booleans become scalar
-- tensors, as generators and host maps make them; converted here, in the trace, they are
-- constants of the compiled function, so its compiled runs (and the prefetch thread) return
-- them too.
local function traced_element(where, ...)
  local out, n = table.pack(...), select("#", ...)
  while n > 0 and out[n] == nil do n = n - 1 end
  local function bad(path, v)
    args.fail_at(where, "map: result %s is %s; a traced function returns tensors, numbers and "
      .. "booleans (use ds:map(fn, {host = true}) for other values)", path, args.show(v))
  end
  local element = structure.to_element(out, n, bad)
  structure.walk(element, function(v, path) if type(v) == "string" then bad(path, v) end end)
  return element
end

function Map:__init(parent, fn, where, seed)
  self._parent, self._desc, self._where, self._seed = parent, parent._desc .. ":map(fn)", where, seed
  -- Results as a list, so any number of components comes back as one structure.
  -- Named by the line that called map, so --profile tells a pipeline's maps apart.
  local at = type(where) == "string" and where:match("^(.-):?%s*$") or ""
  self._fn = tpu.jit(function(...)
    return traced_element(where, args.call(where, "map: the function", fn, ...))
  end, {name = at ~= "" and "data.map@" .. at or "data.map"})
end

local function string_error(where)
  args.fail_at(where, "map: the elements hold strings, which cannot be traced; use "
    .. "ds:map(fn, {host = true}) to run a plain Lua function on them")
end

-- With {seed =}, element k of pass `epoch` gets the key seed / epoch / k (one traced argument
-- more: the function compiles once). fold_in takes numbers of 32 bits, and an endless cycle()
-- numbers pass r of epoch e as e << 32 | r: an epoch of 30 bits or more is folded in as its
-- bits above the 30th, then its low 30 bits, so each pass keeps a stream of its own; a smaller
-- epoch is folded in once, as it always was.
function Map:_key(epoch, k)
  if self._seed == nil then return nil end
  local key = tpu.random.key(self._seed)
  if epoch >> 30 ~= 0 then key = key:fold_in(epoch >> 30) end
  return key:fold_in(epoch & 0x3fffffff):fold_in(k)
end

-- The function's arguments for element e (a list the parent may still hold: not modified).
function Map:_arguments(e, epoch, k)
  local n, key = #e, self:_key(epoch, k)
  if key == nil then return table.unpack(e, 1, n) end
  local a = table.move(e, 1, n, 1, {})
  a[n + 1] = key
  return table.unpack(a, 1, n + 1)
end

-- The mapped element for the packed arguments `a` (_arguments).
function Map:_apply(a)
  local out = self._fn(table.unpack(a, 1, a.n))
  if out[1] == nil then args.fail_at(self._where, "map: the function returned no tensors") end
  return out
end

-- (tpu.data.prefetching) Its compiled plans by batch size, when this map ends a chain that
-- runs on the prefetch thread.
function Map:_thread_plans()
  self._plans = self._plans or {}
  return self._plans
end

-- Under prefetch, the maps right after a batch that gathers on the prefetch thread run on that
-- thread (tpu.data.prefetching). Each map adds itself to ctx.map_chain, meant for its parent
-- (ctx.map_chain_for): a node in between breaks the chain. The batch that takes a chain lists
-- its maps in ctx.maps_taken; they then pass its elements through.
function Map:_elements(epoch, ctx)
  -- fit applies this map inside its train step (tpu.data.fusing): the batches pass unmapped.
  if ctx.skip_maps and ctx.skip_maps[self] then return self._parent:_elements(epoch, ctx) end
  if ctx.prefetch then
    local above = ctx.map_chain_for == self and ctx.map_chain or {}
    ctx.map_chain, ctx.map_chain_for = {{map = self, epoch = epoch}, table.unpack(above)}, self._parent
  end
  local next_element, k = self._parent:_elements(epoch, ctx), 0
  if ctx.maps_taken and ctx.maps_taken[self] then return next_element end
  return function()
    local e = next_element()
    if e == nil then return nil end
    structure.walk(e, function(v) if type(v) == "string" then string_error(self._where) end end)
    local out = self:_apply(table.pack(self:_arguments(e, epoch, k)))
    k = k + 1
    return out
  end
end

function Map:_count() return self._parent:_count() end

-- Runs fn once on zeros shaped like a full element of the parent. A result dimension is taken
-- to vary when a parent tensor's dimension at the same position varies (a smaller last batch,
-- a padded length) and has the same full size.
function Map:_spec()
  if self._spec_cache then return self._spec_cache end
  local varying = {}
  local zeros = structure.map_spec(self._parent:_spec(), function(leaf)
    if leaf.dtype == "string" then string_error(self._where) end
    for d, n in ipairs(leaf.shape) do
      if n == -1 then varying[d .. ":" .. leaf._full[d]] = true end
    end
    return tpu.zeros(leaf._full, {dtype = leaf.dtype})
  end)
  local out = self._fn(self:_arguments(zeros, 0, 0))
  self._spec_cache = structure.map(out, function(t)
    local full = t.shape
    local shape = {table.unpack(full)}
    for d, n in ipairs(shape) do
      if varying[d .. ":" .. n] then shape[d] = -1 end
    end
    return structure.spec_leaf(shape, t.dtype, full)
  end)
  return self._spec_cache
end

-- Applies fn to every element: fn(x, y) returns the new components. By default fn is traced
-- and compiled once per element signature (tpu.jit), so it must be traceable (tensors in,
-- tensors out, no branching on values). With {host = true} fn is a plain Lua function called
-- on the host for every element: it may take and return strings (text_lines(...) ->
-- vocab:encode), numbers and tensors, and read values; it runs uncompiled, once per element.
-- With {seed = n}, fn also receives a random key after the components, fn(x, y, key): a
-- different one for every element of every pass, the same for the same seed (for the random
-- functions of tpu.image and tpu.random).
function Dataset:map(fn, opts, extra)
  errors.none(3, "map", extra)
  Dataset._check_self(self, "map")
  fn = args.func(fn, "map")
  opts = args.options(opts, "map", {"host", "seed"})
  local seed = opts.seed ~= nil and args.integer(opts.seed, "map", "seed") or nil
  if opts.host ~= nil and args.boolean(opts.host, "map", "host") then
    if seed ~= nil then args.fail("map: {seed =} goes with traced functions, not {host = true}") end
    return require("tpu.data.transforms.HostMap")(self, fn, args.where())
  end
  return Map(self, fn, args.where(), seed)
end

return Map
