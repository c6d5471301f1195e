-- Distribution strategies (DESIGN sections 3 and 6): N simulated TPU cores in this process.
-- A replicated step is one program per core: the batch is split across the cores, variables
-- are the same on every core, tpu.all_reduce combines the cores in a fixed order.
--
--   local strategy = tpu.strategy.TPU {cores = 8, version = "v3"}
--   do local _ <close> = strategy:scope(); model = ... end
--   local out = strategy:run(step, params, strategy:shard(x))
local tpu = require "tpu"  -- no cycle: tpu loads strategy on first use, after its own file has run
local core = require "tpu.core"
local class = require "tpu.class"
local jit = require "tpu.jit"
local errors = require "tpu.errors"

local M = {}

local fail = errors.fail

-- A value split across replicas: `value` holds every replica's part along the first axis
-- (input batches), or stacked [replicas, ...] (per-replica results, `stacked` = true).
local PerReplica = class("PerReplica")
function PerReplica:__init(value, replicas, stacked)
  self.value, self.replicas, self.stacked = value, replicas, stacked
end
function PerReplica.__tostring(p)
  return string.format("PerReplica(%d replicas, %s)", p.replicas, tostring(p.value))
end
M.PerReplica = PerReplica

local Strategy = class("Strategy")
M.Strategy = Strategy

function Strategy:__init(opts)
  opts = errors.options(1, "TPU", opts, {"cores", "version", "workers", "rank"})
  local cores = opts.cores or 1
  if math.type(cores) ~= "integer" or cores < 1 then fail("TPU: cores must be a positive integer, got %s", errors.show(cores)) end
  self.num_replicas_in_sync = cores
  self.version = opts.version or require("tpu.device").version()
  self.version_given = opts.version ~= nil
  if not core.tpu_version(self.version) then
    fail("TPU: unknown version '%s' (expected \"v2\", \"v3\" or \"v4\")", tostring(self.version))
  end
  self.workers = opts.workers or 1
  self.rank = opts.rank or 0
  self.local_replicas = cores
  self.num_replicas_in_sync = cores * self.workers
  self._jitted = setmetatable({}, {__mode = "k"})
end

function Strategy.__tostring(s)
  if s.workers > 1 then
    return string.format("multi_worker{workers=%d, cores=%d, version=\"%s\"}", s.workers, s.local_replicas, s.version)
  end
  return string.format("TPU{cores=%d, version=\"%s\"}", s.num_replicas_in_sync, s.version)
end

-- Only the chief (rank 0) prints progress and writes files.
function Strategy:is_chief() return self.rank == 0 end

local current  -- the strategy whose scope is open
local current_worker  -- the multi_worker{} strategy of this process, when there are several ranks

-- The TPU version (HBM per core) of this strategy's cores until the returned value is closed;
-- then the previous one again. The default strategy runs on the version the program runs on.
local function set_version(self)
  local device = require "tpu.device"
  local previous, previous_by = device.version(), device.fixed_by()
  if not self.follows_device then device.set_version(self.version, self.version_given and tostring(self) or nil) end
  return function() device.set_version(previous, previous_by) end
end

function Strategy:version_scope()
  return setmetatable({}, {__close = set_version(self)})
end

-- `local _ <close> = strategy:scope()`: layers and models built inside belong to it.
function Strategy:scope()
  local previous = current
  current = self
  local restore_version = set_version(self)
  return setmetatable({}, {__close = function()
    current = previous
    restore_version()
  end})
end

function M.current(extra)
  errors.none(1, "current", extra)
  return current
end

-- Fails unless a global batch of n examples splits evenly across the replicas.
function Strategy:_check_batch(n)
  local R = self.num_replicas_in_sync
  if n and n > 0 and n % R == 0 then return end
  local lo, hi = (n or 0) // R * R, ((n or 0) + R - 1) // R * R
  if hi == 0 then hi = R end
  fail("the global batch %s does not divide by the %d cores of %s; use a batch of %s (a multiple of %d)",
    tostring(n), R, tostring(self), lo > 0 and (lo .. " or " .. hi) or tostring(hi), R)
end

-- Marks a global batch tensor (or table of them) to be split across the replicas. With
-- several workers, each keeps the rows of its own replicas.
function Strategy:shard(value)
  local R = self.num_replicas_in_sync
  local function check(t)
    if #t.shape == 0 then
      fail("shard: %s is a scalar, which has no batch axis to split across the %d cores; shard tensors whose "
        .. "first axis is the global batch (a value the same on every core needs no shard: pass it to run as it is)",
        errors.show(t), R)
    end
    self:_check_batch(t.shape[1])
  end
  local leaves = core.is_tensor(value) and {value} or type(value) == "table" and jit.flatten(value) or {}
  if #leaves == 0 then
    fail("shard: expected a global batch tensor (or a table of them) to split across the %d cores, got %s",
      R, errors.show(value))
  end
  for _, t in ipairs(leaves) do check(t) end
  if self.workers > 1 then
    local function mine(t)
      local rows = t.shape[1] // self.workers
      return t:slice {{self.rank * rows + 1, (self.rank + 1) * rows}}
    end
    local leaves, spec = jit.flatten(value)
    for i, t in ipairs(leaves) do leaves[i] = mine(t) end
    value = jit.unflatten(spec, leaves)
  end
  return PerReplica(value, self.local_replicas, false)
end

-- Runs fn (a tpu.jit function, or a plain function, jitted once) on every replica.
-- PerReplica arguments are split; the rest are replicated.
function Strategy:run(fn, ...)
  local f = fn
  if getmetatable(fn) == nil or type(fn) == "function" then
    f = self._jitted[fn] or jit.jit(fn, {name = "strategy.run"})
    self._jitted[fn] = f
  end
  local args, shard = table.pack(...), {}
  for i = 1, args.n do
    if PerReplica.is_instance(args[i]) then
      shard[i] = true
      args[i] = args[i].value
    end
  end
  local per_replica, spec, results = f:run_replicated(self.local_replicas, shard, table.unpack(args, 1, args.n))
  -- Results that differ per replica come back stacked [replicas, ...]: wrap them.
  for i, flag in ipairs(per_replica) do
    if flag then results[i] = PerReplica(results[i], self.local_replicas, true) end
  end
  local outs = jit.unflatten(spec, results)
  return table.unpack(outs, 1, outs.n)
end

local CHUNK = 4096  -- values packed per string.pack call (Lua caps a call's values)

-- The sum over the workers of each one's tensor t (same shape everywhere), added in rank order
-- so every rank gets the same bits.
local function sum_over_workers(t)
  local mine = t:reshape {-1}:totable()
  local packed = {}
  for i = 1, #mine, CHUNK do
    local j = math.min(i + CHUNK - 1, #mine)
    packed[#packed + 1] = string.pack("<" .. string.rep("d", j - i + 1), table.unpack(mine, i, j))
  end
  local parts = core.mpi_allgather(table.concat(packed), "reducing a per-replica value")
  local total = {}
  for _, part in ipairs(parts) do
    for i = 1, #mine do total[i] = (total[i] or 0) + string.unpack("<d", part, 8 * i - 7) end
  end
  return core.tensor(total, {dtype = t.dtype}):reshape(t.shape)
end

-- strategy:reduce("sum"|"mean", value): combines a per-replica value over every replica (of
-- every worker); a replicated one is returned as it is (it is already the same everywhere).
function Strategy:reduce(op, value)
  if op ~= "sum" and op ~= "mean" then fail("reduce: unknown op '%s' (expected \"sum\" or \"mean\")", tostring(op)) end
  if not PerReplica.is_instance(value) then return value end
  local v = value.stacked and value.value or value.value:reshape {value.replicas, -1}
  local r = v:sum(1)
  if self.workers > 1 then r = sum_over_workers(r) end
  if op == "mean" then r = r / (value.replicas * self.workers) end
  return r
end

-- strategy:distribute(ds): batches split across the replicas (the global batch must divide by
-- the number of cores; fit pads and masks a partial last batch itself).
function Strategy:distribute(ds)
  if type(ds) ~= "table" or type(ds.iter) ~= "function" or type(ds.cardinality) ~= "function" then
    fail("distribute: expected a data set (e.g. tpu.data.from_tensors {x, y}:batch(64)), got %s", errors.show(ds))
  end
  local strategy = self
  local spec = type(ds.element_spec) == "function" and ds:element_spec()
  if type(spec) == "table" and spec.shape then
    -- A batch size that varies (-1: a partial last batch) still has its full size in _full.
    local n = spec.shape[1] or -1
    if n < 0 and spec._full then n = spec._full[1] or -1 end
    if n > 0 then self:_check_batch(n) end
  end
  return {
    iter = function()
      local it = ds:iter()
      return function()
        local values = table.pack(it())
        if values[1] == nil then return nil end
        for i = 1, values.n do values[i] = strategy:shard(values[i]) end
        return table.unpack(values, 1, values.n)
      end
    end,
    cardinality = function() return ds:cardinality() end,
  }
end

errors.colon_methods(Strategy, "strategy", {"is_chief", "version_scope", "scope", "shard", "run", "reduce",
  "distribute", "_check_batch", "_agree"}, Strategy.is_instance)

function M.TPU(opts, extra)
  errors.none(2, "TPU", extra)
  return Strategy(errors.options(1, "TPU", opts, {"cores", "version"}))
end

---------------------------------------------------------------- multi-worker agreement

-- Fields travel as {name, value} string pairs, each packed with its length.
local function encode(fields)
  local out = {}
  for i, f in ipairs(fields) do out[i] = string.pack(">s4s4", f[1], tostring(f[2])) end
  return table.concat(out)
end

local function decode(s)
  local fields, pos = {}, 1
  while pos <= #s do
    local name, value
    name, value, pos = string.unpack(">s4s4", s, pos)
    fields[#fields + 1] = {name, value}
  end
  return fields
end

local function lines(s)
  local out = {}
  for l in (s .. "\n"):gmatch("(.-)\n") do out[#out + 1] = l end
  return out
end

-- A graph's line without its source location ("  # file:line"), which may differ harmlessly.
local function bare(line) return (line:gsub("[ \t]*#[^\n]*", "")) end

local function same(fa, fb)
  if not fa or not fb or fa[1] ~= fb[1] then return fa == fb end
  if fa[1] == "graph" then return bare(fa[2]) == bare(fb[2]) end
  return fa[2] == fb[2]
end

-- A graph line as the error shows it: a fusion names the ops it fuses, the source comes last.
local function shown_line(all, k)
  local line = all[k]
  if not line then return "(end)" end
  local loc = line:match("#%s*(.-)%s*$")
  line = bare(line)
  if line:find("{$") then
    local ops = {}
    for j = k + 1, #all do
      local op = all[j]:match("^%s+%%%d+ = (%S+)")
      if not op then break end
      if op ~= "parameter" and op ~= "constant" and op ~= "broadcast" then ops[#ops + 1] = op end
    end
    line = line .. " " .. table.concat(ops, ", ") .. " }"
  end
  return loc and line .. " (" .. loc .. ")" or line
end

-- How field i of two ranks reads: "epochs 3"; for a graph its first line that differs,
-- "graph line 12: %5 = tanh f32[16,64] %4 (model.lua:7)".
local function difference(a, b, i)
  local what_a, what_b = a[1][2], b[1][2]
  if i == 1 then return what_a, what_b end
  local fa, fb = a[i] or {"nothing more", ""}, b[i] or {"nothing more", ""}
  if fa[1] == "graph" and fb[1] == "graph" then
    local la, lb = lines(fa[2]), lines(fb[2])
    local k = 1
    while la[k] and lb[k] and bare(la[k]) == bare(lb[k]) do k = k + 1 end
    return string.format("%s with graph line %d: %s", what_a, k, shown_line(la, k)),
           string.format("graph line %d: %s", k, shown_line(lb, k))
  end
  local function show(f) return f[2] == "" and f[1] or f[1] .. " " .. f[2] end
  return what_a .. " with " .. show(fa), show(fb)
end

-- Every rank compares `fields` (a list of {name, value}, the first {"", what}) with every other
-- rank's; where one differs from rank 0's, every rank fails naming the first field that differs.
function Strategy:_agree(fields)
  if self.workers == 1 then return end
  local all = core.mpi_allgather(encode(fields), "comparing its " .. fields[1][2] .. " with the other ranks'")
  local ours = decode(all[1])
  for r = 2, #all do
    local theirs = decode(all[r])
    local i = 1
    while (theirs[i] or ours[i]) and same(theirs[i], ours[i]) do i = i + 1 end
    if theirs[i] or ours[i] then
      local a, b = difference(theirs, ours, i)
      fail("multi_worker: ranks differ: rank %d compiled %s, rank 0 compiled %s\n" ..
        "  Every rank must build the same model and train it with the same options; only the data's values may differ.",
        r - 1, a, b)
    end
  end
end

-- The fingerprint of a compiled step that all-reduces across the ranks: its name, batch,
-- argument shapes and graph (without source lines, which may differ harmlessly).
local function agree_on_step(name, exe, leaves, labels)
  local text = exe:text()
  if not text:find(" all_reduce ", 1, true) then return end  -- runs alone on this rank
  local fields = {{"", "step '" .. name .. "'"}, {"batch", tostring(jit.leading_batch(leaves))}}
  for i, t in ipairs(leaves) do
    fields[#fields + 1] = {labels[i] or ("argument " .. i), string.format("%s[%s]", t.dtype, table.concat(t.shape, ","))}
  end
  fields[#fields + 1] = {"graph", (text:gsub("^[^\n]*\n", ""))}
  current_worker:_agree(fields)
end

-- multi_worker{cores=} under `mpirun -np K tputrain script.lua`: one process per worker, each
-- with its own cores; all-reduces span the processes (summed in rank order, so every worker
-- holds the same weights); each worker takes its rows of every global batch; only rank 0
-- prints.
function M.multi_worker(opts, extra)
  opts = errors.options(1, "multi_worker", opts, {"cores", "version"})
  errors.none(2, "multi_worker", extra)
  local rank, size = core.mpi_init()
  local s = Strategy {cores = opts.cores or 1, version = opts.version, workers = size, rank = rank}
  if size > 1 then
    current_worker = s
    jit.before_first_run = agree_on_step
  end
  if rank ~= 0 then
    print = function() end
    io.write = function() return io.stdout end
    tpu.warn = function() end
  end
  return s
end

local default_strategy
function M.default(extra)
  errors.none(1, "default", extra)
  if not default_strategy then
    default_strategy = Strategy {cores = 1}
    default_strategy.follows_device = true
  end
  return default_strategy
end

-- TPU{cores=N} when --cores or TPUTRAIN_CORES gave N, else the default strategy.
function M.auto(extra)
  errors.none(1, "auto", extra)
  local options = package.loaded["tpu.options"] or {}
  if options.cores and options.cores > 0 then return Strategy {cores = options.cores} end
  return M.default()
end

-- tpu.all_reduce(x, "sum"|"mean") inside a replicated step.
function M.all_reduce(x, op, extra)
  errors.none(3, "all_reduce", extra)
  return tpu.all_reduce(x, op)
end

-- A name tpu.strategy lacks is an error listing what it has.
return errors.strict_namespace(M, "tpu.strategy")
