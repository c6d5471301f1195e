-- The `tpu` module: tensors and their operations, tracing (jit, grad), files of tensors
-- (tpu.save / tpu.load), and, loaded on first use, the libraries nn, optim, losses, metrics,
-- data, strategy, checkpoint, callbacks, plot and applications.
local core = require "tpu.core"
local errors = require "tpu.errors"

local tpu = {}
package.loaded["tpu"] = tpu  -- submodules may `require "tpu"` while this file runs

tpu.core = core
tpu.options = package.loaded["tpu.options"] or {}
tpu.class = require "tpu.class"
tpu.version = "0.1.0"

-- Every tensor method is also a function: tpu.exp(t) == t:exp().
for name, fn in pairs(core.Tensor) do tpu[name] = fn end
for _, name in ipairs {"tensor", "zeros", "ones", "full", "arange", "is_tensor", "is_traced", "where", "concat"} do
  tpu[name] = core[name]
end

require "tpu.tensor"  -- composite tensor methods (mean, relu, softmax, ...)
require "tpu.shapes"  -- boolean_mask, nonzero, unique (eager only: rule 2)
tpu.stack = core.stack
for name, fn in pairs(core.Tensor) do tpu[name] = tpu[name] or fn end

tpu.random = require "tpu.random"

local jit = require "tpu.jit"
tpu.jit, tpu.grad, tpu.value_and_grad, tpu.cond = jit.jit, jit.grad, jit.value_and_grad, jit.cond
tpu.shape_dtype = jit.shape_dtype

-- Sum (or mean) over the replicas of a replicated step; a host value used inside the trace is
-- lifted into it first, so it is reduced across replicas too.
function tpu.all_reduce(x, op, extra)
  errors.check(1, "all_reduce", x, "tensor")
  errors.check(2, "all_reduce", op, "string or nil")
  errors.none(3, "all_reduce", extra)
  if core.trace_depth() > 0 and not core.is_traced(x) then x = core.lift(x) end
  return core.all_reduce(x, op or "sum")
end

-- One table per core: {bytes_in_use=, peak_bytes_in_use=, bytes_limit=, host_bytes=}: device
-- buffers (parameters, optimizer state, computed values, compiled steps' arenas) count as HBM in
-- use; data sets live on the host (host_bytes, the same in every table). Garbage is collected
-- first, so dropped models and tensors do not count.
function tpu.memory_stats(extra)
  errors.none(1, "memory_stats", extra)
  collectgarbage("collect")
  collectgarbage("collect")
  local in_use, peak, host = core.memory()
  local current = package.loaded["tpu.strategy"] and package.loaded["tpu.strategy"].current()
  local cores = current and current.local_replicas or 1
  local limit = require("tpu.device").spec().hbm_bytes
  local stats = {}
  for i = 1, cores do stats[i] = {bytes_in_use = in_use, peak_bytes_in_use = peak, bytes_limit = limit, host_bytes = host} end
  return stats
end

-- Frees every device buffer: compiled graphs and their arenas, parameters, optimizer state and
-- every computed tensor; a tensor the program still holds then raises when used. Data sets stay
-- on the host. HBM in use returns to zero.
function tpu.reset(extra)
  errors.none(1, "reset", extra)
  jit.clear_caches()
  collectgarbage("collect")
  collectgarbage("collect")
  core.release_device_buffers()
end

-- Libraries load on first use, which keeps start-up fast.
local lazy = {
  nn = "tpu.nn", optim = "tpu.optim", losses = "tpu.losses", metrics = "tpu.metrics",
  data = "tpu.data", strategy = "tpu.strategy", mixed_precision = "tpu.mixed_precision",
  checkpoint = "tpu.checkpoint", callbacks = "tpu.callbacks", plot = "tpu.plot",
  applications = "tpu.applications", image = "tpu.image",
}
-- Any other name tpu lacks is an error (tpu.zeroes: did you mean 'zeros'?) naming the libraries;
-- names starting with "_" read nil (the command line asks for tpu._finish).
local libraries = {"random"}
for key in pairs(lazy) do libraries[#libraries + 1] = key end
table.sort(libraries)
errors.strict_namespace(tpu, "tpu", {
  load = function(key) return lazy[key] and require(lazy[key]) end,
  private = true,
  extra = libraries,
  has = function()
    return "its libraries: " .. table.concat(libraries, ", ") .. "; its functions: docs/tpu.md and docs/tensor.md"
  end,
})

-- tpu.save(path, {name = tensor, nested = {...}}[, metadata]) writes a safetensors file;
-- tpu.load(path[, {nested = true}]) -> tensors, metadata. See tpu/checkpoint.lua.
function tpu.save(path, tensors, metadata, extra)
  errors.none(4, "save", extra)
  return require("tpu.checkpoint").save_tensors(path, tensors, metadata)
end
function tpu.load(path, opts, extra)
  errors.none(3, "load", extra)
  return require("tpu.checkpoint").load_tensors(path, opts)
end

-- `local _ <close> = tpu.scope("dense_1")`: nodes traced until the variable goes out of scope
-- (also by an error) are labelled with the name, so reports say which layer made them.
local scope_closer = setmetatable({}, {__close = function() core.pop_scope() end})
function tpu.scope(name, extra)
  errors.none(2, "scope", extra)
  errors.check(1, "scope", name, "string")
  core.push_scope(name)
  return scope_closer
end

-- Warnings go through here (stderr); a script or test may replace it.
function tpu.warn(message, extra)
  errors.none(2, "warn", extra)
  errors.check(1, "warn", message, "string")
  io.stderr:write(message)
end

if tpu.options.profile then core.set_op_profiling(true) end

-- Called by the CLI when the script ends.
function tpu._finish()
  jit.report()
end

return tpu
