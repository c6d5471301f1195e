-- Base class of the functional optimizers. State is a table of tensors only (step counter,
-- learning rate unless it is a schedule, one list per slot), so a traced step never recompiles when they change.
--
--   local state = opt:init(params)                              -- params: list of tensors
--   params, state = opt:update(params, grads, state)           -- pure tensor math (traces)
--   params, state = opt:update(params, grads, state, {where = ok})  -- params kept where not ok
--
-- Every optimizer takes `lr` (a number or a schedule from optim.schedule, evaluated inside the
-- step from the step counter) and, as Keras's, at most one of `clipnorm` (each gradient scaled
-- so its own L2 norm is at most clipnorm), `global_clipnorm` (the gradients scaled together so
-- their global L2 norm is at most that) and `clipvalue` (each element clipped to [-v, v]).
-- Subclasses call `self:init_options(opts, own_option_names)`, set `slots` (names of
-- per-parameter tensors, e.g. {"m", "v"}) and implement
-- `scalars(state, step, lr)` (per-step values shared by all parameters) and
-- `update_one(p, g, slots, scalars)` -> new_p, new_slots; with `pure_update = true` on the
-- class that defines update_one (it computes from its arguments alone), a traced update runs
-- it once per parameter type and applies that to each parameter (a template).
local class = require "tpu.class"
local core = require "tpu.core"
local schedule = require "tpu.optim.schedule"
local util = require "tpu.nn.util"
local errors = require "tpu.errors"

local Optimizer = class("Optimizer")
Optimizer.slots = {}


-- Checks a hyperparameter: a number in [lo, hi) (hi may be nil).
function Optimizer:_check_number(name, value, lo, hi)
  if not util.is_finite(value) or value < lo or (hi and value >= hi) then
    local range = hi and string.format("in [%g, %g)", lo, hi) or string.format(">= %g", lo)
    util.fail("%s: %s must be a number %s, got %s", self.__name, name, range, util.show(value))
  end
  return value
end

-- Number option `name` of opts, `default` only when absent: a false (or any non-number) is
-- refused by _check_number, never replaced by the default.
function Optimizer:_number_option(opts, name, default, lo, hi)
  return self:_check_number(name, errors.option(opts, name, default), lo, hi)
end

-- The `weight_decay` option of the optimizers that take it (0 or `default` when absent): as
-- Keras 3's, before each update every parameter shrinks by lr * weight_decay * p (decoupled
-- weight decay, Loshchilov & Hutter), lr being the step's learning rate.
function Optimizer:_init_weight_decay(opts, default)
  self.weight_decay = self:_number_option(opts, "weight_decay", default or 0, 0)
  -- What update_param reads: a private field, so that a user's optimizer class with a field of
  -- its own named weight_decay (and scalars without lr) is not decayed a second time.
  self._decoupled_decay = self.weight_decay
end

function Optimizer:_check_lr(opts)
  local lr = opts.lr
  if lr == nil then return self.default_lr end
  if schedule.is_schedule(lr) then return lr end
  if not util.is_finite(lr) or lr <= 0 then
    util.fail("%s: lr must be a positive number or a schedule (optim.schedule.cosine{...}), got %s",
      self.__name, util.show(lr))
  end
  return lr
end

-- Keras's names for the options (DESIGN section 3: a Keras user's first try must not fail).
local keras_names = {learning_rate = "lr", beta_1 = "beta1", beta_2 = "beta2"}

-- Checks the options every optimizer takes (lr, clipnorm) plus `own`, and returns them with
-- Keras's names (learning_rate, beta_1, beta_2) turned into ours; a number or a schedule in
-- place of the table is the learning rate.
function Optimizer:init_options(opts, own)
  -- The learning rate alone, as Keras's Adam(1e-3) and Torch's positional lr.
  if type(opts) == "number" or schedule.is_schedule(opts) then opts = {lr = opts} end
  local names = {"lr", "clipnorm", "global_clipnorm", "clipvalue"}
  for _, k in ipairs(own) do names[#names + 1] = k end
  if type(opts) == "table" and not util.is_tensor(opts) then opts = errors.keras_names(self.__name, opts, keras_names, names) end
  util.check_options(self, opts, names)
  self._built_at = util.built_at()
  self.lr = self:_check_lr(opts)
  local clips = 0
  for _, name in ipairs {"clipnorm", "global_clipnorm", "clipvalue"} do
    local v = opts[name]
    if v ~= nil and (not util.is_finite(v) or v <= 0) then
      util.fail("%s: %s must be a positive number, got %s", self.__name, name, util.show(v))
    end
    self[name] = v
    if v ~= nil then clips = clips + 1 end
  end
  if clips > 1 then
    util.fail("%s: give one of clipnorm, global_clipnorm and clipvalue, not several (as Keras)", self.__name)
  end
  return opts
end

local function check_params(self, params, what)
  if type(params) ~= "table" then
    util.fail("%s: %s must be a list of tensors, got %s", self.__name, what, util.show(params))
  end
  for i, p in ipairs(params) do
    if not util.is_tensor(p) then
      util.fail("%s: %s[%d] is not a tensor, got %s", self.__name, what, i, util.show(p))
    end
  end
end

-- The learning rate as a number (a schedule's value at step 0).
function Optimizer:_initial_lr()
  return schedule.is_schedule(self.lr) and self.lr:initial() or self.lr
end

function Optimizer:init(params)
  check_params(self, params, "params")
  local state = {step = core.tensor(0, {dtype = "i32"})}
  if not schedule.is_schedule(self.lr) then state.lr = core.tensor(self.lr, {dtype = "f32"}) end
  for _, name in ipairs(self.slots) do
    state[name] = {}
    for i, p in ipairs(params) do state[name][i] = core.zeros(p.shape, {dtype = p.dtype}) end
  end
  return state
end

-- The step's learning rate tensor: the schedule at the number of updates done so far (such a
-- state has no lr field: the rate is a function of state.step), else state.lr (which callbacks
-- may change).
function Optimizer:learning_rate(state)
  if schedule.is_schedule(self.lr) then return self.lr(state.step) end
  return state.lr
end

-- The factor min(1, global_clipnorm / global_norm) that scales the gradients (nil without any).
function Optimizer:_clip_scale(grads)
  local total
  for _, g in ipairs(grads) do
    local s = util.cast_float(g, "f32"):square():sum()
    total = total and total + s or s
  end
  if not total then return nil end
  return self.global_clipnorm / total:sqrt():maximum(self.global_clipnorm)
end

-- One gradient clipped on its own: clipnorm (its L2 norm at most that) or clipvalue.
local function clipped(self, g)
  if self.clipvalue then return g:maximum(-self.clipvalue):minimum(self.clipvalue) end
  if not self.clipnorm then return g end
  local norm = util.cast_float(g, "f32"):square():sum():sqrt()
  return g * Optimizer.like(self.clipnorm / norm:maximum(self.clipnorm), g)
end

-- One parameter's update: its gradient clipped (clipnorm, clipvalue) or scaled with the others
-- (global_clipnorm), weight decay (when the optimizer has weight_decay), update_one, and the
-- new value taken only where `keep` holds (update's `where`).
local function update_param(self, p, g, slots, scalars, scale, keep)
  g = clipped(self, g)
  if scale then g = g * Optimizer.like(scale, g) end
  local decayed = p
  if (self._decoupled_decay or 0) > 0 then  -- the scalars of such an optimizer hold the step's lr
    decayed = p - Optimizer.like(scalars.lr * self._decoupled_decay, p) * p
  end
  local new_p, new_slots = self:update_one(decayed, g, slots, scalars)
  if keep then new_p = core.where(keep, new_p, p) end
  return new_p, new_slots
end

-- The tensors one parameter's update reads, in order: p, g, its slots, the scalars' tensors
-- (by name), the clip scale and `keep` when there are; into `args`, one table reused from
-- parameter to parameter (a deep model's update made a table per weight).
local function fill_args(args, self, p, g, slots, scalar_names, scalars, scale, keep)
  local n = 2
  args[1], args[2] = p, g
  for _, name in ipairs(self.slots) do n = n + 1; args[n] = slots[name] end
  for _, name in ipairs(scalar_names) do n = n + 1; args[n] = scalars[name] end
  if scale then n = n + 1; args[n] = scale end
  if keep then n = n + 1; args[n] = keep end
  return args
end

-- The table of templates for updates of these types, made on first use: tables nested by the
-- type of p, of g and of each slot (the scalars, clip scale and `keep` are the same tensors for
-- every parameter), indexed by core.type_key's short strings, so a parameter's lookup makes no
-- key of its own.
local function templates_for(templates, self, p, g, slots)
  local at = templates
  for k = 1, 2 + #self.slots do
    local t = k == 1 and p or k == 2 and g or slots[self.slots[k - 2]]
    local key = core.type_key(t)
    local next_level = at[key]
    if not next_level then
      next_level = {}
      at[key] = next_level
    end
    at = next_level
  end
  return at
end

-- The update of one parameter type traced on its own and kept as a template (core.apply_template
-- adds its fused nodes for each parameter of that type), or nil and the error when it cannot be
-- traced apart (an update_one that reads a traced tensor it was not given, say).
local function update_template(self, args, scalar_names, scalars, has_scale, has_keep)
  local depth = core.trace_depth()
  core.trace_begin(self.__name .. " update")
  local ok, result = pcall(function()
    local x = {}
    for i, t in ipairs(args) do x[i] = core.trace_param(t) end
    local slots, own, k = {}, {}, 2
    for _, name in ipairs(self.slots) do k = k + 1; slots[name] = x[k] end
    for name, v in pairs(scalars) do own[name] = v end
    for _, name in ipairs(scalar_names) do k = k + 1; own[name] = x[k] end
    local scale = has_scale and x[k + 1] or nil
    local keep = has_keep and x[k + (has_scale and 2 or 1)] or nil
    local new_p, new_slots = update_param(self, x[1], x[2], slots, own, scale, keep)
    local outs = {new_p}
    for k, name in ipairs(self.slots) do outs[k + 1] = new_slots[name] end
    for k = 1, #self.slots + 1 do  -- anything else is left to the direct path to make or report
      if not util.is_tensor(outs[k]) then error("update_one's results are not tensors", 0) end
    end
    return core.trace_end_template(outs)
  end)
  while not ok and core.trace_depth() > depth do core.trace_abort() end
  return ok and result or nil, result
end

-- Whether update_one may be traced once per parameter type: the class that defines it says so
-- (pure_update = true: it computes from its arguments alone). An update_one that keeps Lua
-- state from call to call (a counter, a table keyed by parameter) is traced per parameter.
local function pure_update(self)
  if rawget(self, "update_one") ~= nil then return false end
  local cls = getmetatable(self)
  while cls and rawget(cls, "update_one") == nil do cls = cls.super end
  return cls ~= nil and rawget(cls, "pure_update") == true
end

-- update's options: {where = a bool scalar tensor}: where it is false the parameters stay as
-- they were (fit keeps a step's weights when its loss is not finite); the state advances.
local update_options = {"where"}

function Optimizer:update(params, grads, state, opts)
  check_params(self, params, "params")
  check_params(self, grads, "grads")
  if #grads ~= #params then
    util.fail("%s: got %d gradients for %d parameters", self.__name, #grads, #params)
  end
  util.check_options(self, opts or {}, update_options)
  local keep = opts and opts.where
  if keep ~= nil and (not util.is_tensor(keep) or keep.dtype ~= "bool" or #keep.shape ~= 0) then
    util.fail("%s: update's where must be a bool scalar tensor, got %s", self.__name, util.show(keep))
  end
  -- The update's nodes carry the optimizer's name and the line that built it, as a layer's
  -- carry the layer's: reports name them, and a traced op then finds its place without
  -- searching the stack for the user's frame (a deep model's update is most of its ops).
  local _ <close> = util.scope(self.__name, rawget(self, "_built_at"))
  local scale = self.global_clipnorm and self:_clip_scale(grads) or nil
  local step = state.step + 1
  -- The rate from step - 1 (= state.step) rather than state.step itself: then only `step`
  -- reads the donated counter, which an engine bug in buffer donation needs for now.
  local lr = self:learning_rate({step = step - 1, lr = state.lr})
  local new_state = {step = step, lr = state.lr}
  for _, name in ipairs(self.slots) do new_state[name] = {} end
  local scalars = self:scalars(state, step, lr)
  local scalar_names = {}
  for name, v in pairs(scalars) do
    if util.is_tensor(v) then scalar_names[#scalar_names + 1] = name end
  end
  table.sort(scalar_names, function(a, b) return tostring(a) < tostring(b) end)
  -- Traced, each parameter type's update is traced once and applied to every parameter of
  -- that type as a template (fused already); eager, or should the template fail, directly.
  local traced = core.trace_depth() > 0 and (core.is_traced(step) or core.is_traced(params[1] or step))
    and pure_update(self)
  local templates, args = {}, {}
  local new_params = {}
  local slots = {}  -- one table for every parameter's slots: update_one's results are copied out
  local function store(i, new_p, ...)
    new_params[i] = new_p
    for k, name in ipairs(self.slots) do new_state[name][i] = select(k, ...) end
  end
  for i, p in ipairs(params) do
    for _, name in ipairs(self.slots) do slots[name] = state[name][i] end
    local kind = traced and templates_for(templates, self, p, grads[i], slots)
    if kind then  -- the template's arguments (the direct path takes them as they are)
      fill_args(args, self, p, grads[i], slots, scalar_names, scalars, scale, keep)
      if kind.template == nil then
        kind.template = update_template(self, args, scalar_names, scalars, scale ~= nil, keep ~= nil) or false
      end
    end
    if kind and kind.template then
      store(i, core.apply_template(kind.template, args))
    else
      local new_slots
      new_params[i], new_slots = update_param(self, p, grads[i], slots, scalars, scale, keep)
      for _, name in ipairs(self.slots) do new_state[name][i] = new_slots[name] end
    end
  end
  return new_params, new_state
end

-- A scalar f32 tensor in the dtype of p (mixed-precision safe).
function Optimizer.like(s, p)
  return p.dtype == s.dtype and s or s:cast(p.dtype)
end

function Optimizer:__tostring()
  local lr = schedule.is_schedule(self.lr) and tostring(self.lr) or string.format("%g", self.lr)
  local clip = ""
  for _, name in ipairs {"clipnorm", "global_clipnorm", "clipvalue"} do
    if self[name] then clip = string.format(", %s = %g", name, self[name]) end
  end
  return string.format("optim.%s{lr = %s%s}", self.__name, lr, clip)
end

return Optimizer
