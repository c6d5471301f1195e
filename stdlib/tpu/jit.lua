-- tpu.jit, tpu.grad, tpu.value_and_grad and tpu.cond.
-- Arguments and results are trees: nested tables whose leaves are tensors (traced) or other
-- values (static: part of the signature, so a new value means a new compile).
local core = require "tpu.core"
local errors = require "tpu.errors"
local is_tensor = core.is_tensor
-- leaves, key, any traced, any shape-only[, spec] of an argument tree, walked in C (a call of
-- a jitted function needs no spec unless it compiles).
local signature = core.signature

local M = {}
local all_functions = setmetatable({}, {__mode = "k"})
local created = 0  -- jitted functions made so far: the report's order among equal names

-- ---------------------------------------------------------------- shape-only arguments
-- tpu.shape_dtype(shape[, dtype]): stands for a tensor argument known only by its shape and
-- dtype. f:lower, f:info and f:dump compile for it, HBM check included, without the host
-- holding the data (a batch too large for the device need not fit the host either).
local ShapeDtype = {__name = "ShapeDtype"}
ShapeDtype.__index = ShapeDtype
function ShapeDtype.__tostring(s) return string.format("ShapeDtype(%s[%s])", s.dtype, table.concat(s.shape, ",")) end

function M.shape_dtype(shape, dtype, extra)
  errors.none(3, "shape_dtype", extra)
  local ok = type(shape) == "table"
  for _, d in ipairs(ok and shape or {}) do ok = ok and math.type(d) == "integer" and d >= 0 end
  if not ok then error(core.user_where() .. "shape_dtype: shape must be a list of non-negative integers", 0) end
  dtype = dtype or "f32"
  if type(dtype) ~= "string" then error(core.user_where() .. "shape_dtype: dtype must be a string such as \"f32\"", 0) end
  return setmetatable({shape = {table.unpack(shape)}, dtype = dtype}, ShapeDtype)
end

local function is_shape_dtype(v) return getmetatable(v) == ShapeDtype end

local function check_runnable(self, leaves)
  for _, t in ipairs(leaves) do
    if is_shape_dtype(t) then
      error(core.user_where() .. "jit '" .. self.name .. "' cannot run on " .. tostring(t) ..
            " (a shape only); use f:lower, f:info or f:dump to compile for it, or pass a tensor", 0)
    end
  end
end

-- ---------------------------------------------------------------- trees
-- The one walk of argument trees is core.signature (in C): flatten's leaves, key and spec.
local function unflatten(spec, leaves, pos)
  if spec == true then
    pos[1] = pos[1] + 1
    return leaves[pos[1]]
  end
  if spec.object then return spec.object.__tpu_unflatten(unflatten(spec.child, leaves, pos)) end
  if spec.keys then
    local t = {}
    for i, k in ipairs(spec.keys) do t[k] = unflatten(spec.children[i], leaves, pos) end
    return t
  end
  return spec.static
end

-- The tensor leaves of the tree v, its spec (to rebuild it with other leaves) and its key.
M.flatten = function(v)
  local leaves, key, _, _, spec = signature(v, ShapeDtype, true)
  return leaves, spec, key
end
M.unflatten = function(spec, leaves) return unflatten(spec, leaves, {0}) end

local function any_traced(leaves)
  for _, t in ipairs(leaves) do
    if core.is_traced(t) then return true end
  end
  return false
end

-- ---------------------------------------------------------------- jit
local Jitted = {}
Jitted.__index = Jitted

local function default_name(fn)
  local info = debug.getinfo(fn, "S")
  return info.short_src .. ":" .. info.linedefined
end

local function sanitize(name) return (name:gsub("[^%w_.-]", "_")) end

-- Tensor leaves under a spec (M.flatten's): a walk that allocates nothing.
local function spec_leaves(spec)
  if spec == true then return 1 end
  if spec.object then return spec_leaves(spec.child) end
  local n = 0
  for _, child in ipairs(spec.children or {}) do n = n + spec_leaves(child) end
  return n
end

-- Per argument of args, in order: {arg = number, name = the parameter's name or nil, count =
-- its tensor leaves}. The leaves of args are argument 1's, then argument 2's, and so on. One
-- walk of args per call of a jitted function (a fit step's arguments have tens of thousands of
-- leaves; their owners are asked for several times as it compiles).
local groups_of_args = setmetatable({}, {__mode = "k"})
local function arg_groups(self, args, spec)
  local memo = groups_of_args[args]
  if memo and memo.fn == self.fn then return memo.groups end
  if not spec then spec = select(2, M.flatten(args)) end
  local counts = {}
  for i, key in ipairs(spec.keys or {}) do
    if math.type(key) == "integer" then counts[key] = spec_leaves(spec.children[i]) end
  end
  local groups = {}
  for i = 1, args.n do
    local name = type(self.fn) == "function" and debug.getlocal(self.fn, i) or nil
    groups[i] = {arg = i, name = name, count = counts[i] or 0}
  end
  groups_of_args[args] = {fn = self.fn, groups = groups}
  return groups
end

-- Per leaf of args, f(its argument's group, the leaf's number k within the argument).
local function per_leaf(self, args, f)
  local out = {}
  for _, g in ipairs(arg_groups(self, args)) do
    for k = 1, g.count do out[#out + 1] = f(g, k) end
  end
  return out
end

-- What leaf k of an argument's group is, for the HBM report: "argument 2 (x)", or for a leaf
-- of a table argument "argument 1 (params), tensor 3 of 16".
local function label(g, k)
  local head = "argument " .. g.arg .. (g.name and " (" .. g.name .. ")" or "")
  return g.count == 1 and head or string.format("%s, tensor %d of %d", head, k, g.count)
end

-- The label of leaf j of args.
local function leaf_label(self, args, j)
  for _, g in ipairs(arg_groups(self, args)) do
    if j <= g.count then return label(g, j) end
    j = j - g.count
  end
  return nil
end

local function leaf_labels(self, args) return per_leaf(self, args, label) end

-- Per leaf: whether it belongs to an argument listed in donate_argnums.
local function donation_mask(self, args)
  if not self.donate then return nil end
  return per_leaf(self, args, function(g) return self.donate[g.arg] or false end)
end

-- ---------------------------------------------------------------- recursion while tracing
-- A jitted function that calls itself while it is being traced would trace forever (an inlined
-- call is a tail call, so nothing overflows). Each function keeps the signature keys it is
-- tracing now: the same key again is a recursion that cannot end; a recursion whose static
-- arguments change (f(x, n - 1)) may end, up to kMaxSelfCalls levels. The guard is a
-- to-be-closed value, so an error that unwinds the trace releases it.
local kMaxSelfCalls = 100

local function recursion_error(self, why)
  error(core.user_where() .. "jit '" .. self.name .. "' calls itself while tracing" .. why ..
    "; recursion cannot be traced into a static graph (unroll it with a Lua loop of a fixed count, " ..
    "recurse in a plain Lua function on a Lua number that ends it, or choose between tensor values " ..
    "with tpu.where or tpu.cond)", 0)
end

local function enter(self, key)
  local active = self.tracing
  if not active then
    active = {n = 0}
    self.tracing = active
  end
  if active[key] then recursion_error(self, " with arguments of the same shapes and static values") end
  if active.n >= kMaxSelfCalls then recursion_error(self, ", " .. kMaxSelfCalls .. " calls deep") end
  active[key], active.n = true, active.n + 1
  return setmetatable({}, {__close = function()
    active[key], active.n = nil, active.n - 1
  end})
end

-- Traces fn on symbolic arguments shaped like `leaves` and compiles it. A probe compile
-- (leaves may be plain {dtype=, shape=} tables) skips the HBM check and the statistics.
local function compile(self, spec, leaves, args, probe, rep, key)
  local t0 = core.now()
  local options = package.loaded["tpu.options"] or {}
  local optimize = self.optimize
  if optimize == nil and options.optimize == false then optimize = false end  -- --no-opt
  local compile_options = {
    replicas = rep and rep.replicas, sharded = rep and rep.sharded,
    hbm_version = not probe and require("tpu.device").version() or nil,
    donate = args and donation_mask(self, args),
    -- Only the HBM report's five largest buffers need a label: asked for when one is reported.
    arg_label = args and not probe and function(j) return leaf_label(self, args, j) end or nil,
    optimize = optimize,
    dump_dir = options.dump_graphs ~= "" and options.dump_graphs or nil,
    dump_name = sanitize(self.name) .. "." .. (self.compiles + 1),
  }
  -- Tracing makes many small Lua objects (traced tensors, argument tables) that mostly live
  -- until trace_end. A collection cycle under way would walk the whole heap, the model's too,
  -- as the trace allocates (a 10000-layer model's parameters took 80 ms to trace, not 35), so
  -- the collector stops while tracing. Should the heap grow by more than it held before (and
  -- by at least 256 MiB), the trace restarts it.
  local restart = collectgarbage("isrunning")
  local heap_kb = collectgarbage("count")
  collectgarbage("stop")
  core.trace_begin(self.name, restart and math.floor(heap_kb + math.max(heap_kb, 256 * 1024)) or nil, optimize)
  local ok, result = pcall(function()
    local _ <close> = enter(self, key or "")
    local symbolic = {}
    for i, t in ipairs(leaves) do
      local rows = rep and rep.sharded[i] and t.shape[1] // rep.replicas or nil  -- one replica's rows
      if core.is_tensor(t) then
        symbolic[i] = core.trace_param(t, rows)
      else
        local shape = {table.unpack(t.shape)}
        shape[1] = rows or shape[1]
        symbolic[i] = core.trace_param(t.dtype, shape)
      end
    end
    local args = M.unflatten(spec, symbolic)
    local outs = table.pack(self.fn(table.unpack(args, 1, args.n)))
    local out_leaves, out_spec = M.flatten(outs)
    return {exe = core.trace_end(out_leaves, compile_options), spec = out_spec}
  end)
  if restart then collectgarbage("restart") end
  if not ok then
    if core.trace_depth() > self.depth then core.trace_abort() end
    if not probe and type(result) == "table" and result.kind == "ResourceExhausted" then
      result = result.message .. M.batch_advice(self, spec, leaves, args, rep)
    end
    error(result, 0)
  end
  if probe then return result end
  self.compiles = self.compiles + 1
  self.compile_ms = self.compile_ms + (core.now() - t0) * 1000
  local carries = M.batch_leaves(self, leaves, args)
  result.batch = M.leading_batch(leaves, carries)
  -- The sizes the data fixes (input features, one-hot classes): each non-batch dimension of the
  -- batch, and each product of neighbouring ones (what Flatten or a reshape makes of them).
  result.data_dims = {}
  for i, t in ipairs(leaves) do
    for first = 2, carries[i] and #t.shape or 0 do
      local n = 1
      for k = first, #t.shape do
        n = n * t.shape[k]
        result.data_dims[n] = true
      end
    end
  end
  self.last = result
  return result
end

-- ---------------------------------------------------------------- recompilation warning
local kSignatureWarning = 8

-- "argument 1 (x), dimension 2 (seen 13, 17, 25)" for the first leaf dimension that varies.
local function varying_dimension(self, owners)
  local sigs = self.signatures
  for j, owner in ipairs(owners) do
    local first = sigs[#sigs][j]
    for d = 1, first and #first or 0 do
      local seen, list = {}, {}
      for _, sig in ipairs(sigs) do
        local v = sig[j] and sig[j][d]
        if v and not seen[v] then seen[v], list[#list + 1] = true, v end
      end
      if #list > 1 then
        table.sort(list)
        local shown = {}
        for k = 1, math.min(#list, 6) do shown[k] = tostring(list[k]) end
        return string.format("argument %d%s, dimension %d (seen %s%s)", owner.arg,
          owner.name and " (" .. owner.name .. ")" or "", d, table.concat(shown, ", "), #list > 6 and ", ..." or "")
      end
    end
  end
  return nil
end

local function note_signature(self, leaves, args)
  local shapes = {}
  for i, t in ipairs(leaves) do shapes[i] = t.shape end
  self.signatures[#self.signatures + 1] = shapes
  if #self.signatures ~= kSignatureWarning then return end
  local owners = per_leaf(self, args, function(g) return g end)
  local what = varying_dimension(self, owners)
  local head = string.format("%swarning: jit '%s' has compiled %d signatures; ", core.user_where(), self.name,
                             kSignatureWarning)
  if not what then
    -- No tensor shape differs: numbers, strings or booleans passed as arguments are part of the
    -- signature, so each new value compiles again.
    require("tpu").warn(head .. "its non-tensor arguments (numbers, strings, booleans) vary.\n" ..
      "  Each new value traces and compiles the function again. Pass a number that changes from\n" ..
      "  call to call as a tensor, tpu.tensor(x), so one compiled version serves every value.\n")
    return
  end
  require("tpu").warn(head .. what .. " varies.\n" ..
    "  Each new shape traces and compiles the function again. Give the inputs a few fixed shapes:\n" ..
    "  data:padded_batch(n, {pad_to_multiple_of = 16}) for variable-length sequences, or\n" ..
    "  batch(n, {drop_remainder = true}) so a partial last batch does not make a new shape.\n")
end

-- ---------------------------------------------------------------- HBM advice
-- The batch is the leading dimension of the largest tensor argument; every argument with that
-- leading dimension scales with it. Probe compiles (shapes only, no memory) find the largest
-- batch, a multiple of 8 when possible, whose plan fits one core.
local function scaled(leaves, batch, b, carries)
  local out = {}
  for i, t in ipairs(leaves) do
    local shape = {table.unpack(t.shape)}
    if shape[1] == batch and carries[i] then shape[1] = b end
    out[i] = {dtype = t.dtype, shape = shape}
  end
  return out
end

-- The leading dimension of the largest tensor argument (the batch, for a training step);
-- `carries` (leaf -> true) limits the search to the leaves that hold the batch.
function M.leading_batch(leaves, carries)
  local batch, biggest = nil, -1
  for i, t in ipairs(leaves) do
    local n = 1
    for _, d in ipairs(t.shape) do n = n * d end
    if #t.shape > 0 and n > biggest and (not carries or carries[i]) then batch, biggest = t.shape[1], n end
  end
  return batch
end

-- Leaf -> true for the leaves of batch_argnums (every leaf when the function names none): a
-- step's weights are not its batch, however large (an embedding of 30522 rows).
function M.batch_leaves(self, leaves, args)
  local carries = {}
  if not self.batch_args then
    for i = 1, #leaves do carries[i] = true end
    return carries
  end
  for j, g in ipairs(per_leaf(self, args, function(g) return g end)) do carries[j] = self.batch_args[g.arg] or nil end
  return carries
end

-- What to try when even a batch of 1 needs `bytes`: the TPU version that holds it, named the way
-- that changes it (a strategy's version= wins over --tpu), or, when none does, what else helps.
local function version_advice(bytes)
  local device = require "tpu.device"
  local fits = device.smallest_holding(bytes)
  if not fits then
    return string.format("\n  Even a batch of 1 does not fit (it needs %s), and no TPU version has that much HBM " ..
      "per core (v4, the largest, has %s): make the model smaller, or compute in bf16 (--bf16) to halve the " ..
      "activations.", core.format_bytes(bytes), core.format_bytes(core.tpu_version("v4").hbm_bytes))
  end
  local by = device.fixed_by()
  local how = by and string.format("TPU{version=\"%s\"}; the strategy %s sets its version, which --tpu does not change", fits, by)
    or "--tpu " .. fits
  return string.format("\n  Even a batch of 1 does not fit: use a smaller model, or a TPU version with more HBM (%s).", how)
end

local function batch_advice(self, spec, leaves, args, rep)
  local carries = M.batch_leaves(self, leaves, args)
  local batch = M.leading_batch(leaves, carries)
  local capacity = require("tpu.device").spec().hbm_bytes
  -- args: the probes donate what the real step donates, so they plan the same memory
  local function need(b) return compile(self, spec, scaled(leaves, batch, b, carries), args, true).exe:info().hbm_bytes end
  local one = need(1)  -- the whole step's need when it has no batch to shrink
  if not batch or batch < 2 or one > capacity then return version_advice(one) end
  local step = batch >= 16 and 8 or 1
  local lo, hi = 0, (batch - 1) // step  -- largest k with need(k * step) <= capacity
  while lo < hi do
    local mid = (lo + hi + 1) // 2
    if need(math.max(1, mid * step)) <= capacity then lo = mid else hi = mid - 1 end
  end
  local fit = math.max(1, lo * step)
  local cores = rep and rep.replicas or 1
  local global = cores > 1 and string.format("a global batch of %d on these %d cores; ", fit * cores, cores) or ""
  return string.format("\n  Try: a per-core batch of at most %d (%sneeds %s), or more cores (TPU{cores=%d}) " ..
    "to split the batch.", fit, global, core.format_bytes(need(fit)), math.max(8, 2 * cores))
end

-- The advice, or when a probe fails (the dimension taken for the batch is not one: another
-- size in the function depends on it) a note that says how to name the batch; the report of
-- what does not fit stays the error.
function M.batch_advice(self, spec, leaves, args, rep)
  local ok, advice = pcall(batch_advice, self, spec, leaves, args, rep)
  if ok then return advice end
  if core.interrupted() then error(advice, 0) end
  return "\n  No batch advice: the leading dimension of the largest argument, taken for the batch, cannot " ..
    "change without breaking the function; name the arguments that carry the batch: " ..
    "tpu.jit(f, {batch_argnums = ...})."
end

-- The cache entry for args, whose leaves and key core.signature gave, compiling on a miss.
-- `run`: the entry runs next, so a hit counts, and a new entry is shown to before_first_run and
-- noted among the signatures; rep: run_replicated's replicas and per-argument shard flags.
local function cached(self, key, leaves, args, run, rep)
  local entry = self.cache[key]
  if entry then
    if run then self.cache_hits = self.cache_hits + 1 end
    return entry
  end
  self.depth = core.trace_depth()
  for _, o in ipairs {{"donate_argnums", self.donate}, {"batch_argnums", self.batch_args}} do
    local option, most = o[1], 0
    for i in pairs(o[2] or {}) do most = math.max(most, i) end
    if most > args.n then
      error(core.user_where() .. string.format("jit '%s': %s names argument %d, but the call passes %d argument%s; " ..
        "pass it, or change %s", self.name, option, most, args.n, args.n == 1 and "" or "s", option), 0)
    end
  end
  local _, spec = M.flatten(args)
  arg_groups(self, args, spec)
  if rep then rep.sharded = per_leaf(self, args, function(g) return rep.shard[g.arg] or false end) end
  entry = compile(self, spec, leaves, args, false, rep, key)
  if rep then entry.per_replica = entry.exe:per_replica() end
  if run and M.before_first_run then M.before_first_run(self.name, entry.exe, leaves, leaf_labels(self, args)) end
  self.cache[key] = entry
  if run then note_signature(self, leaves, args) end
  return entry
end

-- Runs entry on leaves, timed; its result leaves.
local function run(self, entry, leaves)
  local t0 = core.now()
  local results = entry.exe:run(leaves)
  self.executions = self.executions + 1
  self.run_ms = self.run_ms + (core.now() - t0) * 1000
  return results
end

function Jitted:__call(...)
  local args = table.pack(...)
  local leaves, key, traced, shape_only = signature(args, ShapeDtype)
  if traced then  -- inside another trace: inline (not a tail call, for the guard)
    local _ <close> = enter(self, key)
    return self.fn(...)
  end
  if shape_only then check_runnable(self, leaves) end
  local entry = cached(self, key, leaves, args, true)
  local outs = M.unflatten(entry.spec, run(self, entry, leaves))
  return table.unpack(outs, 1, outs.n)
end

-- Runs fn as one program per replica (SPMD): arguments whose entry in `shard` is true are
-- split along their first axis, one part per replica; the others are the same everywhere.
-- Returns per result leaf whether it came back stacked [replicas, ...], the results' spec and
-- the result leaves.
function Jitted:run_replicated(replicas, shard, ...)
  local args = table.pack(...)
  local leaves, key, traced, shape_only = signature(args, ShapeDtype)
  if traced then
    error(core.user_where() .. "strategy:run inside a traced function is not supported; call it from the host loop", 0)
  end
  if shape_only then check_runnable(self, leaves) end
  local flags = {}
  for i = 1, args.n do flags[i] = shard[i] and "1" or "0" end
  key = key .. " |replicas=" .. replicas .. " shard=" .. table.concat(flags)
  local entry = cached(self, key, leaves, args, true, {replicas = replicas, shard = shard})
  return entry.per_replica, entry.spec, run(self, entry, leaves)
end

function Jitted:stats()
  return {compiles = self.compiles, cache_hits = self.cache_hits, compile_ms = self.compile_ms,
          executions = self.executions, run_ms = self.run_ms}
end

-- The cache entry for these arguments, compiling on a miss (lower, info, dump); without any,
-- the signature compiled last, if there is one (f(x) then f:dump("f.dot")).
local function entry_for(self, what, ...)
  if select("#", ...) == 0 then
    if self.last then return self.last end
    -- A function of no parameters compiles for no arguments; any other needs a signature.
    local info = type(self.fn) == "function" and debug.getinfo(self.fn, "u")
    if what ~= "_entry" and (not info or info.nparams > 0 or info.isvararg) then
      errors.fail("jit '%s': %s: no signature compiled yet; call f(...) first, or give the arguments: " ..
        "f:%s (tpu.shape_dtype(shape, dtype) stands for a tensor known only by its shape)",
        self.name, what, what == "dump" and "dump(path, x, ...)" or what .. "(x, ...)")
    end
  end
  local args = table.pack(...)
  local leaves, key = signature(args, ShapeDtype)
  return cached(self, key, leaves, args, false)
end

-- (tpu.data) The cache entry {exe, spec} for these arguments, compiling on a miss: the prefetch
-- thread runs a data set's compiled map itself (tpu.data.prefetching) and counts those runs
-- here with _count_runs.
function Jitted:_entry(...) return entry_for(self, "_entry", ...) end
function Jitted:_count_runs(n, ms)
  self.executions = self.executions + n
  self.run_ms = self.run_ms + ms
end

-- The compiled graph's text for these arguments (compiling if needed).
function Jitted:lower(...)
  return entry_for(self, "lower", ...).exe:text()
end

-- Writes the compiled graph for these arguments as Graphviz DOT.
function Jitted:dump(path, ...)
  local dot = entry_for(self, "dump", ...).exe:dot()
  local f, err = io.open(path, "w")
  if not f then error(core.user_where() .. "dump: cannot write " .. tostring(err), 0) end
  f:write(dot)
  f:close()
end

-- Information about the compiled graph for these arguments: nodes, kernels, planned bytes.
function Jitted:info(...)
  return entry_for(self, "info", ...).exe:info()
end

errors.colon_methods(Jitted, "jitted function", {"run_replicated", "stats", "_entry", "_count_runs", "lower", "dump", "info"},
  function(f) return getmetatable(f) == Jitted end, "f")

-- The executed nodes (exe:nodes(): op, dtype, shape, loc, flops, bytes) of fn traced on the
-- arguments (tensors or tpu.shape_dtype) and compiled without the pass pipeline or the HBM
-- check, so each node is one traced op: what model:summary() costs per layer.
function M.cost_nodes(fn, name, ...)
  local self = M.jit(fn, {name = name, optimize = false})
  local args = table.pack(...)
  local leaves, spec = M.flatten(args)
  self.depth = core.trace_depth()
  return compile(self, spec, leaves, args, true).exe:nodes()
end

-- before_first_run(name, exe, leaves, labels), when set (multi_worker{}), sees every step
-- compiled to run on the host's data before it first runs.
M.before_first_run = nil

-- {n = true, ...} of the option's argument number or list of them (nil when not given).
local function argument_set(opts, key)
  local v = opts[key]
  if v == nil then return nil end
  local set = {}
  for _, i in ipairs(type(v) == "table" and v or {v}) do
    if math.type(i) ~= "integer" or i < 1 then
      errors.fail("jit: %s must be an argument number or a list of them, got %s", key, errors.show(v))
    end
    set[i] = true
  end
  return set
end

function M.jit(fn, opts, extra)
  errors.none(3, "jit", extra)
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn) and getmetatable(fn).__call) then
    error(core.user_where() .. "tpu.jit expects a function, got " .. type(fn), 0)
  end
  opts = errors.options(2, "jit", opts, {"name", "donate_argnums", "batch_argnums", "optimize"})
  local self = setmetatable({
    donate = argument_set(opts, "donate_argnums"), batch_args = argument_set(opts, "batch_argnums"),
    optimize = opts.optimize,
    fn = fn, name = opts.name or default_name(type(fn) == "function" and fn or getmetatable(fn).__call),
    cache = {}, signatures = {}, compiles = 0, cache_hits = 0, compile_ms = 0, executions = 0, run_ms = 0, depth = 0,
  }, Jitted)
  created = created + 1
  self.serial = created
  all_functions[self] = true
  return self
end

-- ---------------------------------------------------------------- grad
local function selected(args, argnums)
  if type(argnums) == "number" then return args[argnums] end
  local t = {}
  for i, n in ipairs(argnums) do t[i] = args[n] end
  return t
end

local function lift(leaves)
  for i, t in ipairs(leaves) do
    if not core.is_traced(t) then leaves[i] = core.lift(t) end
  end
end

local function replace_selected(args, argnums, values)
  if type(argnums) == "number" then
    args[argnums] = values
  else
    for i, n in ipairs(argnums) do args[n] = values[i] end
  end
end

local grad_options = {"argnums", "has_aux", "name"}

local function check_grad_args(fname, fn, opts)
  errors.check(1, fname, fn, "function")
  opts = errors.options(2, fname, opts, grad_options)
  local argnums = opts.argnums
  local list = type(argnums) == "table" and not is_tensor(argnums) and argnums or {argnums}
  local ok = argnums == nil or #list > 0
  for _, n in ipairs(list) do ok = ok and math.type(n) == "integer" and n >= 1 end
  if not ok then
    errors.fail("%s: argnums must be an argument number (1 for the first) or a non-empty list of them, got %s",
      fname, errors.show(argnums))
  end
  if opts.has_aux ~= nil and type(opts.has_aux) ~= "boolean" then
    errors.fail("%s: has_aux must be true or false, got %s", fname, errors.show(opts.has_aux))
  end
  return opts
end

-- Fails unless the call passes every argument that argnums names.
local function check_argnums(fname, argnums, n)
  for _, i in ipairs(type(argnums) == "table" and argnums or {argnums}) do
    if i > n then
      errors.fail("%s: argnums names argument %d, but the call passes %d argument%s; pass it, or change argnums",
        fname, i, n, n == 1 and "" or "s")
    end
  end
end

local function value_and_grad(fname, fn, opts)
  local argnums = opts.argnums or 1
  local has_aux = opts.has_aux
  local function traced(...)
    local args = table.pack(...)
    local leaves, spec = M.flatten(selected(args, argnums))
    lift(leaves)
    replace_selected(args, argnums, M.unflatten(spec, leaves))
    local results = table.pack(fn(table.unpack(args, 1, args.n)))
    if has_aux and results.n ~= 2 then
      error(core.user_where() .. string.format("%s: with {has_aux = true} the function must return two values, " ..
        "the scalar to differentiate and aux (several aux values go in one table), got %d", fname, results.n), 0)
    elseif not has_aux and results.n > 1 then
      error(core.user_where() .. string.format("%s: the function returned %d values; to return auxiliary values " ..
        "beside the scalar to differentiate, pass {has_aux = true} (the function then returns value, aux)",
        fname, results.n), 0)
    end
    local value, aux = results[1], results[2]
    if not is_tensor(value) then
      error(core.user_where() .. "grad: the function must return a scalar tensor, got " .. type(value), 0)
    end
    local grads = M.unflatten(spec, core.gradients(value, leaves))
    if has_aux then return value, aux, grads end
    return value, grads
  end
  local compiled = M.jit(traced, {name = opts.name or ("grad of " .. default_name(fn))})
  return function(...)
    check_argnums(fname, argnums, select("#", ...))
    if core.trace_depth() > 0 then
      local leaves, _, key = M.flatten(table.pack(...))
      if any_traced(leaves) then
        local _ <close> = enter(compiled, key)
        return traced(...)
      end
    end
    return compiled(...)
  end
end

function M.value_and_grad(fn, opts, extra)
  errors.none(3, "value_and_grad", extra)
  return value_and_grad("value_and_grad", fn, check_grad_args("value_and_grad", fn, opts))
end

function M.grad(fn, opts, extra)
  errors.none(3, "grad", extra)
  opts = check_grad_args("grad", fn, opts)
  local vg = value_and_grad("grad", fn, opts)
  return function(...)
    if opts.has_aux then
      local _, aux, grads = vg(...)
      return grads, aux
    end
    local _, grads = vg(...)
    return grads
  end
end

-- ---------------------------------------------------------------- cond
-- tpu.cond(pred, f_true, f_false, ...): on a concrete predicate runs one branch; on a traced
-- one traces both and selects their results elementwise (branches must be side-effect free).
function M.cond(pred, f_true, f_false, ...)
  if not is_tensor(pred) and type(pred) ~= "boolean" then errors.type_error(1, "cond", "boolean or tensor", pred) end
  if is_tensor(pred) and (pred.dtype ~= "bool" or #pred.shape ~= 0) then
    errors.fail("tpu.cond: the predicate must be a bool scalar (a Lua boolean, or a bool tensor of shape [] such as " ..
      "x:sum():gt(0)), got %s; to choose elementwise between tensors use tpu.where(cond, a, b)", errors.show(pred))
  end
  errors.check(2, "cond", f_true, "function")
  errors.check(3, "cond", f_false, "function")
  if not core.is_traced(pred) then
    local p = pred
    if is_tensor(p) then p = p:item() end
    if p then return f_true(...) end
    return f_false(...)
  end
  local a_leaves, a_spec, a_key = M.flatten(table.pack(f_true(...)))
  local b_leaves, _, b_key = M.flatten(table.pack(f_false(...)))
  if a_key ~= b_key then
    error(core.user_where() .. "tpu.cond: the branches return different structures or types:\n  " ..
          a_key .. "\n  " .. b_key, 0)
  end
  local out = {}
  for i = 1, #a_leaves do out[i] = core.where(pred, a_leaves[i], b_leaves[i]) end
  local r = M.unflatten(a_spec, out)
  return table.unpack(r, 1, r.n)
end

-- Drops every compiled graph (tpu.reset).
function M.clear_caches()
  for f in pairs(all_functions) do
    f.cache, f.signatures, f.last = {}, {}, nil
  end
end

-- ---------------------------------------------------------------- profile
function M.report()
  local options = package.loaded["tpu.options"] or {}
  if not options.profile then return end
  local list, count = {}, {}
  for f in pairs(all_functions) do
    if f.compiles > 0 then
      list[#list + 1] = f
      count[f.name] = (count[f.name] or 0) + 1
    end
  end
  table.sort(list, function(a, b) return a.name < b.name or (a.name == b.name and a.serial < b.serial) end)
  -- Functions of one name (two maps on one line) are told apart by their order of creation.
  local seen, label = {}, {}
  for _, f in ipairs(list) do
    seen[f.name] = (seen[f.name] or 0) + 1
    label[f] = count[f.name] > 1 and string.format("%s #%d", f.name, seen[f.name]) or f.name
  end
  io.stderr:write("--profile: jitted functions\n")
  for _, f in ipairs(list) do
    io.stderr:write(string.format("  %-40s compiles %d  cache hits %d  compile %.1f ms  runs %d  %.3f ms/run\n",
      label[f], f.compiles, f.cache_hits, f.compile_ms, f.executions,
      f.executions > 0 and f.run_ms / f.executions or 0))
  end
  local advisor = require "tpu.advisor"
  for _, f in ipairs(list) do
    if f.last and f.executions > 0 then
      local nodes, info = f.last.exe:nodes(), f.last.exe:info()
      io.stderr:write(string.format("--profile: '%s' (last signature): %d kernels, %.3g GFLOP, planned %s, HBM %s\n",
        label[f], info.kernels, info.flops / 1e9, core.format_bytes(info.planned_bytes), core.format_bytes(info.hbm_bytes)))
      for _, v in ipairs {"v2", "v3", "v4"} do
        local sec, util = advisor.estimate(nodes, v)
        io.stderr:write(string.format("  estimated step on TPU %s: %.3f ms, MXU utilisation %.0f%%\n", v, sec * 1000, util * 100))
      end
      for _, line in ipairs(advisor.advice(nodes, f.last.batch, f.compiles, f.last.data_dims)) do
        io.stderr:write("  advice: " .. line .. "\n")
      end
    end
  end
  local times, total = core.op_times(), 0
  for _, t in ipairs(times) do total = total + t.seconds end
  if #times > 0 then
    io.stderr:write("--profile: top ops by time\n")
    for i = 1, math.min(10, #times) do
      local t = times[i]
      io.stderr:write(string.format("  %-12s %9.1f ms  %5.1f%%  %8d calls\n", t.op, t.seconds * 1000,
        100 * t.seconds / total, t.calls))
    end
  end
  -- Where in the script: each kernel's runs after its first (which pays one-time set-up).
  local kernels = core.kernel_times()
  if #kernels > 0 and kernels[1].calls > 0 then
    io.stderr:write("--profile: top kernels by time, after each one's first run (which pays one-time set-up)\n")
    for i = 1, math.min(10, #kernels) do
      local k = kernels[i]
      if k.calls == 0 then break end
      io.stderr:write(string.format("  %9.1f ms %7d runs %9.3f ms/run %8.1f ms first  %-8s %-18s %s\n", k.seconds * 1000,
        k.calls, k.seconds * 1000 / k.calls, k.first_seconds * 1000, k.op, k.type, k.where ~= "" and k.where or "-"))
    end
  end
end

return M
