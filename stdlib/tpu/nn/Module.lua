-- Base class of every layer and model: a layer is constructed with its options, builds its
-- weights on the first call (when the input shape is known), then computes on every call.
--
--   local Scale = nn.Module:extend("Scale")
--   function Scale:build(input_shape)
--     self:add_weight{name = "scale", shape = {input_shape[#input_shape]}, initializer = "ones"}
--   end
--   function Scale:call(x, ctx) return x * self.scale end
--   local layer = Scale{name = "my_scale"}
--   local y = layer(x)          -- builds on the first call (the input shape is known then)
--
-- A subclass with its own __init(...) calls `self:init_common(opts)` (name, dtype, trainable).
-- `self:compute_dtype()` and `self:variable_dtype()` give the layer's mixed-precision dtypes:
-- its `dtype =` option, else the tpu.mixed_precision policy when it was constructed.
-- Weights are plain tensors stored in `self[name]`; `set_parameters` swaps them (traced tensors
-- while tpu.jit traces a step, updated values after it). Containers keep their children in
-- `self.modules`; layers held in fields (`self.dense = nn.Dense(8)`, or a list of them) join it
-- when the layer is built, as Keras tracks layer-valued attributes. The training methods (compile, fit, evaluate, predict) come from
-- tpu.nn.training, generate (decoder language models) from tpu.nn.generate.
--
-- ctx, the second argument of call: `ctx.training` (bool), `ctx.frozen` (true under a layer
-- whose trainable is false), `ctx.key` (a tpu.random key; use
-- `self:random_key(ctx)` for a fresh key derived from it), `ctx.updates` (set by the train step:
-- `self:update_state(ctx, name, value)` records a new value of a non-trainable weight, as
-- BatchNorm does for its moving statistics; fit writes it back after the step),
-- `ctx.sample_weight` (train step: [batch] f32, 1 for an example and 0 for a row that pads a
-- partial batch to the static size; statistics over the batch must weigh rows by it) and
-- `ctx.cross_replica` (sums a tensor over the cores of a replicated step; nil on one core).
-- Called on symbolic tensors (nn.Input), a layer records a node of a functional model instead.
local tpu = require "tpu"  -- no cycle: tpu loads nn on first use, after tpu's own file has run
local class = require "tpu.class"
local util = require "tpu.nn.util"
local initializers = require "tpu.nn.initializers"
local regularizers = require "tpu.nn.regularizers"
local Node = require "tpu.nn.Node"
local errors = require "tpu.errors"

local Module = class("Module")

-- How each method is called, for the error of a call with a dot (layer.call(x), m.summary()):
-- Lua then passes no layer, or the first argument in its place.
local usage = {
  compile = "model:compile {optimizer = ..., loss = ...}",
  fit = "model:fit(x, y, {epochs = ...}) or model:fit(dataset, {...})",
  evaluate = "model:evaluate(x, y) or model:evaluate(dataset)",
  predict = "model:predict(x) or model:predict(dataset)",
  get_weights = "model:get_weights()", set_weights = "model:set_weights(weights)",
  summary = "model:summary()", count_params = "model:count_params()",
  parameters = "model:parameters()", named_parameters = "model:named_parameters()",
  set_parameters = "model:set_parameters(tensors)", each_weight = "model:each_weight(fn)",
  compile_stats = "model:compile_stats()", export = "model:export(path)",
  save = "model:save(path)", load = "model:load(path)",
  generate = "model:generate(ids, {max_length = ...})", add = "model:add(layer)",
  get_layer = "model:get_layer(name)", pop = "model:pop()",
  add_weight = "self:add_weight {name = ..., shape = ...}", build = "self:build(input_shape)",
  init_common = "self:init_common(opts)", update_state = "self:update_state(ctx, name, value)",
  random_key = "self:random_key(ctx)", call = "layer:call(x, ctx), or layer(x)",
}

local function is_model_class(cls)
  while cls do
    if cls.__name == "Model" or cls.__name == "Sequential" then return true end
    cls = cls.super
  end
  return false
end

-- class.lua calls it when a method of cls gets a self that is not one of its instances.
function Module.__dot_call(cls, method, got)
  local how = usage[method]
  local noun = how and how:match("^(%a+):") or (is_model_class(cls) and "model" or "layer")
  if noun == "self" then noun = "layer" end
  how = how or string.format("%s:%s(...)", noun, method)
  local what = noun == "model" and "the model"
    or cls == Module and "every layer" or string.format("the layer (%s)", cls.__name)
  local shown, fix = util.show(got), ""
  if type(got) == "table" and rawget(got, "__index") == got and got.__name then
    shown = "the class " .. got.__name
    fix = string.format(": make one first, e.g. nn.%s(...)", got.__name)
  elseif Module.is_instance(got) then
    shown = string.format("%s '%s'", got.__name, got.name)  -- model.add(layer)
  end
  errors.dot_call(method, what, how, shown, noun, fix)
end

local counters = {}  -- per default-name counters: dense_1, dense_2, ...

local function default_name(cls_name)
  local base = util.snake_case(cls_name)
  counters[base] = (counters[base] or 0) + 1
  return base .. "_" .. counters[base]
end

-- Options every layer accepts; subclasses pass their own list to check_options.
Module.common_options = {"name", "dtype", "trainable"}

function Module:__init(opts)
  opts = opts or {}
  util.check_options(self, opts, Module.common_options)
  self:init_common(opts)
end

-- Sets the fields every module has; subclasses call it from their __init.
function Module:init_common(opts)
  if opts.name ~= nil and type(opts.name) ~= "string" then
    util.fail("%s: name must be a string, got %s", self.__name, util.show(opts.name))
  end
  self.name = opts.name or default_name(self.__name)
  -- Reports (HBM, --profile, summary) name the layer's nodes by the line that built it.
  self._built_at = util.built_at()
  self.dtype = opts.dtype
  self.dtype_policy = util.layer_policy(self, opts.dtype)  -- the global policy, read now
  self.trainable = opts.trainable ~= false
  self.built = false
  self.modules = self.modules or {}
  self._weights = {}
end

-- Sublayers held in fields are tracked as Keras tracks layer-valued attributes:
-- `self.dense = nn.Dense(8)`, `self.blocks = {nn.Dense(8), nn.Dense(8)}` or
-- `self.heads = {a = nn.Dense(2), b = nn.Dense(2)}` makes them children (in self.modules, after
-- the ones listed there), so their weights are this layer's. The modules are adopted when the
-- layer is built (and by any later walk of its weights after a new field): first those of the
-- fields that held a table when first set, in that order; then those of the other fields set
-- the same way (`self.proj = false` in __init, `self.proj = nn.Dense(3)` in build), by key name.
-- In a table, the list entries come first, then the string keys by name. Fields set with rawset
-- are not tracked, nor is a layer that holds this one (a back reference).
local untracked_fields = {modules = true, layers = true, _weights = true, _field_keys = true,
                          _other_keys = true, _fields_pending = true}

function Module:__newindex(key, value)
  rawset(self, key, value)
  if untracked_fields[key] then return end
  if type(value) == "table" then
    local keys = rawget(self, "_field_keys")
    if not keys then keys = {}; rawset(self, "_field_keys", keys) end
    keys[#keys + 1] = key
    rawset(self, "_fields_pending", true)
  elseif type(key) == "string" then  -- may hold a layer later (an existing key is set raw)
    local others = rawget(self, "_other_keys")
    if not others then others = {}; rawset(self, "_other_keys", others) end
    others[key] = true
  end
end

local function is_module(v)
  return type(v) == "table" and Module.is_instance(v)
end

-- Whether `target` is m or one of its sublayers.
local function reaches(m, target, seen)
  if rawequal(m, target) then return true end
  if seen[m] then return false end
  seen[m] = true
  for _, c in ipairs(rawget(m, "modules") or {}) do
    if reaches(c, target, seen) then return true end
  end
  return false
end

-- The string keys of t, sorted.
local function sorted_names(t)
  local names = {}
  for k in pairs(t) do
    if type(k) == "string" then names[#names + 1] = k end
  end
  table.sort(names)
  return names
end

-- Appends the modules held in fields (a module, or a list or table of them) that self.modules
-- lacks, in the order described above.
local function adopt_fields(self)
  rawset(self, "_fields_pending", nil)
  local modules = rawget(self, "modules")
  if not modules then modules = {}; rawset(self, "modules", modules) end
  local listed = {}
  for _, m in ipairs(modules) do listed[m] = true end
  local function adopt(m)
    if listed[m] or reaches(m, self, {}) then return end
    listed[m] = true
    modules[#modules + 1] = m
  end
  local function adopt_value(v)
    if is_module(v) then
      adopt(v)
    elseif type(v) == "table" and getmetatable(v) == nil then
      local n = #v
      for i = 1, n do
        if is_module(v[i]) then adopt(v[i]) end
      end
      for _, k in ipairs(sorted_names(v)) do
        if is_module(v[k]) then adopt(v[k]) end
      end
    end
  end
  local done = {}
  for _, key in ipairs(rawget(self, "_field_keys") or {}) do
    done[key] = true
    adopt_value(rawget(self, key))
  end
  local others = rawget(self, "_other_keys")
  if others then
    for _, key in ipairs(sorted_names(others)) do
      if not done[key] then adopt_value(rawget(self, key)) end
    end
  end
end

-- Fields every module needs, for subclasses whose __init forgot init_common.
local function ensure_init(self)
  if rawget(self, "_weights") == nil then self:init_common({}) end
end

-- Floating dtypes for the layer's variables and its computation: its `dtype =` option, else
-- the mixed-precision policy in force when the layer was constructed (tpu.mixed_precision).
function Module:variable_dtype()
  ensure_init(self)
  return self.dtype_policy.variable_dtype
end

function Module:compute_dtype()
  ensure_init(self)
  return self.dtype_policy.compute_dtype
end

-- A weight without a name is named as Keras names one: "variable", then "variable_1", ...
local function unnamed(self)
  local taken = {}
  for _, e in ipairs(self._weights) do taken[e.name] = true end
  local name, n = "variable", 0
  while taken[name] do n = n + 1; name = "variable_" .. n end
  return name
end

-- How many weights of any module have a regularizer: while none has, regularization_loss
-- (traced in every train step) need not walk the model.
local regularized_weights = 0

local function shape_list(shape)
  local parts = {}
  for i, d in ipairs(shape) do parts[i] = util.show(d) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- The largest tensor a weight may be (the core's limit on a tensor's elements).
local MAX_ELEMENTS = 2 ^ 40

-- A weight's shape: known sizes (>= 0) of a tensor that can exist. A size out of range names
-- the layer's option that holds it, when one does (Dense(1e12): units).
local function check_weight_shape(self, name, shape)
  local n, big = 1, 0
  for i = 1, #shape do
    local d = shape[i]
    if math.type(d) ~= "integer" and not (math.type(d) == "float" and d == math.floor(d)) then
      util.fail("%s '%s': add_weight '%s' has the shape %s; its sizes must be integers >= 0 (a "
        .. "weight's sizes are known when build runs: take them from input_shape past the batch)",
        self.__name, self.name, name, shape_list(shape))
    end
    if d < 0 then
      util.fail("%s '%s': add_weight '%s' has the shape %s, with a negative size; a weight's sizes "
        .. "are known when build runs (-1 means unknown only in input shapes: take sizes from "
        .. "input_shape past the batch, or from the layer's options)", self.__name, self.name, name,
        shape_list(shape))
    end
    n, big = n * d, math.max(big, d)
  end
  if n >= MAX_ELEMENTS then
    local keys = {}
    for k, v in pairs(self) do
      if type(k) == "string" and k:sub(1, 1) ~= "_" and v == big then keys[#keys + 1] = k end
    end
    table.sort(keys)
    local option = keys[1] and string.format(" (its %s = %s)", keys[1], util.show(self[keys[1]])) or ""
    util.fail("%s '%s': the weight '%s' would have the shape %s, %.4g elements, beyond a tensor's "
      .. "limit of 2^40%s", self.__name, self.name, name, shape_list(shape), n, option)
  end
end

-- Names an initializer in errors: its name, or the option holding it (kernel_initializer).
local function initializer_text(self, init)
  if type(init) == "string" then return string.format("the initializer \"%s\"", init) end
  local text = "the initializer"
  for k, v in pairs(self) do
    if rawequal(v, init) and type(k) == "string" then text = text .. " " .. k; break end
  end
  if type(init) == "function" then
    local info = debug.getinfo(init, "S")
    if info.what == "Lua" and not info.short_src:match("^%[tpu%]") then
      text = string.format("%s (the function at %s:%d)", text, info.short_src, info.linedefined)
    end
  end
  return text
end

-- Creates a weight, stores it as self[name] and returns it.
function Module:add_weight(spec)
  ensure_init(self)
  if type(spec) ~= "table" or (spec.name ~= nil and type(spec.name) ~= "string") or type(spec.shape) ~= "table" then
    util.fail("%s '%s': add_weight needs {shape = <table>, name = <string>, ...}, got %s",
      self.__name, self.name, util.show(spec))
  end
  local name = spec.name or unnamed(self)
  check_weight_shape(self, name, spec.shape)
  local init = initializers.get(spec.initializer or "glorot_uniform")
  local dtype = spec.dtype or self:variable_dtype()
  local value = init(initializers._next_key(), util.copy(spec.shape), dtype)
  if not util.is_tensor(value) or not util.same_shape(value.shape, spec.shape) then
    util.fail("%s '%s': %s returned %s for the weight '%s'; an initializer function(key, shape, dtype) "
      .. "returns a tensor of the weight's shape, here %s", self.__name, self.name,
      initializer_text(self, spec.initializer), util.show(value), name, shape_list(spec.shape))
  end
  local reg = spec.regularizer ~= nil and regularizers.get(spec.regularizer) or nil
  table.insert(self._weights, {name = name, value = value, trainable = spec.trainable ~= false,
                               regularizer = reg})
  if reg then regularized_weights = regularized_weights + 1 end
  self[name] = value
  return value
end

-- Records the new value of one of this layer's non-trainable weights: in a train step
-- (ctx.updates) the step returns it and fit stores it; an eager call stores it at once, as
-- Keras updates a BatchNorm's moving statistics in `layer(x, training=True)`. A value traced
-- by a jit function that is not a train step cannot outlive its trace: it is dropped.
function Module:update_state(ctx, name, value)
  for _, e in ipairs(self._weights) do
    if e.name == name then
      if ctx and ctx.updates then
        ctx.updates[e] = value
      elseif not tpu.is_traced(value) then
        for k, v in pairs(self) do
          if rawequal(v, e.value) then self[k] = value end
        end
        e.value = value
      end
      return
    end
  end
  util.fail("%s '%s': update_state of unknown weight '%s'", self.__name, self.name, tostring(name))
end

-- A random key from ctx.key: the n-th request in one ctx (one step) gets ctx.key folded with
-- n, so every layer and every call draws its own numbers, the same ones for the same seed
-- whatever else the script built before.
function Module:random_key(ctx)
  if not (ctx and ctx.key) then
    util.fail("%s '%s' needs a random key in training mode: call it as "
      .. "layer(x, {training = true, key = tpu.random.key(seed)}) (fit passes one per step)",
      self.__name, self.name)
  end
  ctx.key_count = (ctx.key_count or 0) + 1
  return ctx.key:fold_in(ctx.key_count)
end

-- The sum of the weight regularizers (l2, ...) of every trainable weight, or nil when none.
function Module:regularization_loss()
  if regularized_weights == 0 then return nil end  -- no walk of a deep model for nothing
  local total
  self:each_weight(function(_, entry, trainable)
    local reg = entry.regularizer
    if reg and trainable then
      local v = reg(entry.value)
      total = total and total + v or v
    end
  end)
  return total
end

-- Default build: nothing to create. Subclasses override build(input_shape).
function Module:build(_input_shape) end

-- Builds once; containers call it with shapes before any data flows.
function Module:maybe_build(input_shape)
  ensure_init(self)
  if self.built then return end
  self:build(input_shape)
  -- Always: build may have set a layer in a field that already existed (no __newindex then).
  adopt_fields(self)
  self.built = true
  self.input_shape = util.copy(input_shape)
end

-- Input checks recorded by build: self.input_spec = {min_ndim=, ndim=, axes={[-1]=n}}.
function Module:_check_input(x)
  local spec = self.input_spec
  if not spec or not util.is_tensor(x) then return end
  local shape, nd = x.shape, x.ndim or #x.shape
  if spec.ndim and nd ~= spec.ndim then
    util.fail("%s '%s' expects input with %d dimensions, got %s",
      self.__name, self.name, spec.ndim, util.describe(x))
  end
  if spec.min_ndim and nd < spec.min_ndim then
    util.fail("%s '%s' expects input with at least %d dimensions, got %s",
      self.__name, self.name, spec.min_ndim, util.describe(x))
  end
  for axis, size in pairs(spec.axes or {}) do
    local i = axis < 0 and nd + 1 + axis or axis
    if shape[i] ~= size then
      util.fail("%s '%s' expects input with %s %d, got %s", self.__name, self.name,
        axis == -1 and "last dimension" or ("dimension " .. axis), size, util.describe(x))
    end
  end
end

-- A layer's argument other than a tensor: a symbolic tensor, or a list of (lists of) tensors
-- for a layer that takes several (not one whose class sets takes_one_tensor, as Dense does).
local function check_call_input(self, x, ctx)
  if ctx ~= nil and type(ctx) ~= "table" then
    util.fail("%s '%s': the second argument is the call's context, {training = true|false, ...}, got %s",
      self.__name, self.name, util.show(ctx))
  end
  if util.is_tensor(x) or Node._is(x) then return end
  local one = self.takes_one_tensor
  if type(x) ~= "table" or getmetatable(x) ~= nil then
    util.fail("%s '%s' must be called on a tensor or a symbolic tensor (from nn.Input)%s, got %s",
      self.__name, self.name, one and "" or ", or a list of them", util.show(x))
  end
  if one then
    util.fail("%s '%s' takes one tensor, got a list %s; to join tensors use a merge layer first "
      .. "(nn.Concatenate(), nn.Add(), nn.Multiply())", self.__name, self.name, util.show(x))
  end
  if next(x) == nil then
    util.fail("%s '%s' was called on an empty list; give it a tensor or a list of tensors",
      self.__name, self.name)
  end
  for i = 1, #x do
    local v = x[i]
    if not (util.is_tensor(v) or Node._is(v) or (type(v) == "table" and getmetatable(v) == nil)) then
      util.fail("%s '%s': input %d of the list is not a tensor, got %s", self.__name, self.name, i,
        util.show(v))
    end
  end
end

-- What call returned, when not a tensor: a list of tensors (several outputs) or a table of
-- them keyed by names (Keras's dict outputs), nested ones too; else an error naming the layer
-- (the next layer would fail on nil or a number with no word of this one).
local function valid_output(v, depth)
  if util.is_tensor(v) then return true end
  if type(v) ~= "table" or getmetatable(v) ~= nil or next(v) == nil or depth > 32 then return false end
  local n = #v
  for k, e in pairs(v) do
    if not (type(k) == "string" or (math.type(k) == "integer" and k >= 1 and k <= n)) then return false end
    if not valid_output(e, depth + 1) then return false end
  end
  return true
end

local function check_call_result(self, y)
  if not valid_output(y, 1) then
    util.fail("%s '%s': call returned %s; call(x, ctx) must return the output tensor (or a list of "
      .. "tensors, or a table of them keyed by names)", self.__name, self.name, util.show(y))
  end
end

-- A softmax's or sigmoid's output stays probabilities through a layer whose class sets
-- keeps_probabilities: "rearranges" (Flatten, Reshape, Cropping2D: the layer applied to the
-- logits gives the output's logits) or "scales" (Dropout: probabilities, no logits). Without
-- it a loss by name would read such an output as logits.
local function carry_probabilities(self, keeps, x, y, ctx)
  local Activation = package.loaded["tpu.nn.Activation"]
  if not (Activation and util.is_tensor(x) and util.is_tensor(y)) then return end
  local f = keeps == "rearranges" and function(z) return self:call(z, ctx) end or nil
  Activation._carry(x, y, f)
end

-- layer(x, ctx): builds on first use, checks the input, runs call. On symbolic tensors
-- (from nn.Input) it records the call for nn.Model and returns symbolic outputs.
function Module:__call(x, ctx)
  if ctx ~= nil or not util.is_tensor(x) then check_call_input(self, x, ctx) end
  if Node._contains(x) then return Node._apply(self, x, ctx) end
  self:maybe_build(util.shape_of(x))
  self:_check_input(x)
  if util.is_tensor(x) then self.input_dtype = x.dtype end  -- for summary's costs
  -- Nodes traced in call carry the layer's name (HBM report, profile, summary's costs) and the
  -- line that built it.
  local _ <close> = util.scope(self.name, rawget(self, "_built_at"))
  -- Under a frozen layer every layer is frozen, as Keras's trainable = false reaches every
  -- sublayer: ctx.frozen tells them (BatchNorm then runs in inference mode).
  if ctx and ctx.training and not self.trainable and not ctx.frozen then
    ctx = setmetatable({frozen = true}, {__index = ctx, __newindex = ctx})
  end
  ctx = ctx or {training = false}
  local y = self:call(x, ctx)
  if not util.is_tensor(y) then check_call_result(self, y) end
  -- The class's own mark only: a subclass's call may do more than move values.
  local keeps = rawget(getmetatable(self), "keeps_probabilities")
  if keeps then carry_probabilities(self, keeps, x, y, ctx) end
  self.output_shape = util.shape_of(y)
  return y
end

function Module:call(_x, _ctx)
  util.fail("%s '%s' has no call(x, ctx) method", self.__name, self.name)
end

-- Default output shape: build the layer if needed, then run it once eagerly on zeros (layers
-- override this cheaply). input_shape is a shape or a list of shapes (several inputs); a
-- dimension of unknown size (None, -1: the batch) runs as 1 and comes back as None.
function Module:compute_output_shape(input_shape)
  local unknown_batch = false
  local function zeros(s)
    if type(s[1]) == "table" then
      local list = {}
      for i, one in ipairs(s) do list[i] = zeros(one) end
      return list
    end
    local known = {}
    for i, d in ipairs(s) do
      known[i] = d < 0 and 1 or d
      unknown_batch = unknown_batch or (i == 1 and d < 0)
    end
    return tpu.zeros(known)
  end
  self:maybe_build(input_shape)
  local y = self:call(zeros(input_shape), {training = false})
  if not util.is_tensor(y) then check_call_result(self, y) end
  local out = util.shape_of(y)
  local function unknown(s)
    if type(s[1]) == "table" then for _, one in ipairs(s) do unknown(one) end
    elseif #s > 0 then s[1] = -1 end
  end
  if unknown_batch then unknown(out) end
  return out
end

-- Calls fn(owner, entry, trainable) for each weight in a fixed order: own weights in creation
-- order, then children in layer order (trainable is false under a frozen parent). A layer held
-- by two owners (shared weights) is visited once, at its first place in that order, as Keras
-- counts a shared layer's weights once. A train step's trace walks the weights several times:
-- a walk makes one table, none per weight.
local function weights_walk(m, fn, frozen, seen)
  if seen[m] then return end
  seen[m] = true
  ensure_init(m)
  if rawget(m, "_fields_pending") then adopt_fields(m) end
  frozen = frozen or not m.trainable
  for _, e in ipairs(m._weights) do fn(m, e, e.trainable and not frozen) end
  for _, c in ipairs(m.modules) do weights_walk(c, fn, frozen, seen) end
end

function Module:each_weight(fn, frozen)
  weights_walk(self, fn, frozen, {})
end

-- Calls visit(m, path) for self and each of its sublayers once (a shared one at its first
-- place), depth first in layer order; path is the layer's position as model:save names it
-- ("" for self, "2", "4.1").
function Module:_each_module(visit)
  local seen = {}
  local function walk(m, path)
    if seen[m] then return end
    seen[m] = true
    if rawget(m, "_fields_pending") then adopt_fields(m) end
    visit(m, path)
    for i, c in ipairs(rawget(m, "modules") or {}) do
      walk(c, path == "" and tostring(i) or path .. "." .. i)
    end
  end
  walk(self, "")
end

-- The same walk as a list of {owner=, entry=, trainable=}.
function Module:_weight_entries()
  local out = {}
  self:each_weight(function(owner, entry, trainable)
    out[#out + 1] = {owner = owner, entry = entry, trainable = trainable}
  end)
  return out
end

function Module:parameters(extra)
  errors.none(1, "parameters", extra)
  local list = {}
  self:each_weight(function(_, entry) list[#list + 1] = entry.value end)
  return list
end

-- Indices (into parameters()) of the weights the optimizer updates.
function Module:_trainable_indices()
  local idx, i = {}, 0
  self:each_weight(function(_, _, trainable)
    i = i + 1
    if trainable then idx[#idx + 1] = i end
  end)
  return idx
end

-- Swaps in new tensors: list[j] for entries[j], j = first..last (module m's own weights).
-- Fields that held the old tensor are updated too: one walk of the module's fields for all of
-- them, where only a tensor (a userdata) can match (a train step's trace swaps every layer's
-- weights in and back).
-- One tensor given for two weights of a module gets a view for the second: as one object they
-- could no longer be told apart by the next swap, whose fields would all take the first's value.
local function swap_weights(m, entries, list, first, last)
  local new = list
  for j = first + 1, last do
    for i = first, j - 1 do
      if rawequal(new[j], new[i]) then
        if new == list then new = table.move(list, first, last, first, {}) end
        new[j] = new[j]:reshape(new[j].shape)
        break
      end
    end
  end
  list = new
  for k, v in pairs(m) do
    if type(v) == "userdata" then
      for j = first, last do
        if rawequal(v, entries[j].value) then m[k] = list[j]; break end
      end
    end
  end
  for j = first, last do entries[j].value = list[j] end
end

-- The walk behind each list set_parameters returned (weakly): given that list back, it puts
-- the tensors back without walking the modules again. A walk misses the cache once per layer
-- of a deep model, and a train step's trace swaps its weights in and back.
local walk_of_replaced = setmetatable({}, {__mode = "k"})

local function find_weights(self)
  local owners, entries = {}, {}
  self:each_weight(function(owner, entry)
    local n = #entries + 1
    owners[n], entries[n] = owner, entry
  end)
  return {module = self, owners = owners, entries = entries}
end

-- Returns the tensors it replaced, in the same order. Nothing changes before the count is checked.
function Module:set_parameters(list)
  local walk = walk_of_replaced[list]
  if not (walk and walk.module == self) then walk = find_weights(self) end
  local owners, entries = walk.owners, walk.entries
  if type(list) ~= "table" or getmetatable(list) ~= nil then
    util.fail("%s '%s': set_parameters expects a list of %d tensors (model:parameters() order), got %s",
      self.__name, self.name, #entries, util.show(list))
  end
  if #list ~= #entries then
    util.fail("%s '%s': set_parameters expects %d tensors, got %d", self.__name, self.name, #entries, #list)
  end
  local replaced = {}
  for i, entry in ipairs(entries) do replaced[i] = entry.value end
  local first = 1
  while first <= #entries do  -- a module's weights are consecutive in the walk
    local last = first
    while owners[last + 1] == owners[first] do last = last + 1 end
    swap_weights(owners[first], entries, list, first, last)
    first = last + 1
  end
  walk_of_replaced[replaced] = walk
  return replaced
end

-- Total, trainable and non-trainable numbers of weight elements, the three lines of Keras's
-- summary (BatchNorm's moving statistics and the weights of frozen layers are non-trainable):
--   local total, trainable, non_trainable = model:count_params()
function Module:count_params(extra)
  errors.none(1, "count_params", extra)
  local total, trainable = 0, 0
  self:each_weight(function(_, entry, is_trainable)
    local n = util.numel(entry.value.shape)
    total = total + n
    if is_trainable then trainable = trainable + n end
  end)
  return total, trainable, total - trainable
end

-- One-line description used by __tostring; layers override it.
function Module:repr()
  return "nn." .. self.__name
end

function Module:__tostring()
  return self:repr()
end

function Module:summary(extra)
  errors.none(1, "summary", extra)
  io.stdout:write(require("tpu.nn.summary")(self), "\n")
end

-- Writes the inference graph as an ONNX model (opset 13): model:export("model.onnx").
function Module:export(path, extra)
  errors.none(2, "export", extra)
  require("tpu.nn.onnx").export(self, path)
end

for k, v in pairs(require "tpu.nn.training") do Module[k] = v end
local generate = require("tpu.nn.generate").generate
function Module:generate(...) return generate(self, ...) end  -- model:generate(ids, opts)

return Module
