-- Model methods mixed into nn.Module: compile, fit, evaluate, predict.
--
--   model:compile {optimizer = optim.Adam {lr = 1e-3}, loss = "sparse_categorical_crossentropy",
--                  metrics = {"accuracy"}}
--   local history = model:fit(train, {epochs = 3, validation_data = test})
--   print(model:evaluate(test).accuracy)
--
-- One training step is one tpu.jit function, step(params, opt_state, state, x, y, key): forward,
-- value_and_grad, the optimizer update and the batch's loss/metric partial sums, all traced once.
-- `params` are the trainable weights, `state` the non-trainable ones (BatchNorm's moving
-- statistics, frozen layers); the step returns both updated: layers record new state values with
-- self:update_state(ctx, name, value) during the forward pass. `key` is a random key made on the
-- host for each step (fold_in of the step number), so Dropout masks change every step while the
-- compiled step stays the same. Weight regularizers add to the loss. Only the partial sums (one
-- small f32 vector) come back to the host each step.
--
-- Several outputs (functional models), as Keras 3's compile: `loss` is one loss for every output,
-- a list with one per output or a table keyed by output name (plus optional `loss_weights`, a
-- list or a table keyed by output name); `metrics` is a list with one entry per output (a metric
-- or a list of them) or a table keyed by output name, each named <output>_<metric>. An output's
-- name is its layer's.
--
-- fit(x, y) on tensors shuffles the rows each epoch (Keras's shuffle = true), in an order made
-- from the model's random key and the epoch number; data sets are left to order themselves.
--
-- Strategies: a model compiled inside `strategy:scope()` trains replicated on the strategy's
-- cores. Each core takes its rows of the global batch (which must divide by the cores), the
-- loss is the sum over the global batch of per-example losses divided by the global example
-- count, gradients and statistics are summed across the cores in a fixed order, and every core
-- applies the same update. Every step also takes per-example weights: 1 for an example, 0 for
-- the rows a partial last batch is padded with to the static batch size, so it neither
-- recompiles nor changes the losses, metrics or gradients.
local util = require "tpu.nn.util"
local History = require "tpu.nn.History"
local Progbar = require "tpu.nn.Progbar"
local nonfinite = require "tpu.nn.nonfinite"
local interrupt = require "tpu.interrupt"
local errors = require "tpu.errors"
local Optimizer = require "tpu.optim.Optimizer"

local M = {}

local tpu = require "tpu"  -- no cycle: tpu loads nn on first use, after tpu's own file has run

---------------------------------------------------------------- compile

local compile_options = {"optimizer", "loss", "metrics", "steps_per_execution", "loss_weights"}

local function is_list(v)
  return type(v) == "table" and getmetatable(v) == nil
end

-- Names of a functional model's outputs when it has several, else nil.
local function output_names(model)
  if not model.outputs or model.single_output then return nil end
  local names = {}
  for i, n in ipairs(model.outputs) do names[i] = n.name end
  return names
end

-- Every output's name, as Keras names them: a functional model's output layers, else the last
-- layer of a Sequential model (nil when the model has no layers to name it).
local function all_output_names(model)
  if model.outputs then
    local names = {}
    for i, n in ipairs(model.outputs) do names[i] = n.name end
    return names
  end
  local last = model.modules and model.modules[#model.modules]
  return last and last.name and {last.name} or nil
end

-- A plain table keyed by names (Keras's dict form), not a list.
local function is_dict(v)
  return is_list(v) and #v == 0 and next(v) ~= nil
end

-- A table keyed by output name as a list in output order: every key must name an output;
-- `all`: every output needs an entry (a missing one is `missing`).
local function by_output(v, names, what, all, missing)
  if not names then
    util.fail("compile: %s keyed by output name needs a model whose outputs have names; give a list", what)
  end
  local index = {}
  for i, n in ipairs(names) do index[n] = i end
  for k in pairs(v) do
    if not index[k] then
      util.fail("compile: %s has the key %s, which is not the name of an output of the model (its outputs: %s)",
        what, util.show(k), table.concat(names, ", "))
    end
  end
  local out = {}
  for i, n in ipairs(names) do
    if v[n] == nil and all then
      util.fail("compile: %s has no entry for the output '%s' (expected the keys %s)", what, n, table.concat(names, ", "))
    end
    if v[n] == nil then out[i] = missing else out[i] = v[n] end
  end
  return out
end

-- Keras's loss_weights: a list of numbers, one per output, that scale each output's loss.
local function check_loss_weights(weights, outputs)
  if weights == nil then return end
  local ok = is_list(weights) and #weights == outputs
  for i = 1, ok and outputs or 0 do ok = ok and type(weights[i]) == "number" end
  if not ok then
    util.fail("compile: loss_weights must be a list of %d number%s, one per output, got %s", outputs,
      outputs == 1 and "" or "s", util.show(weights))
  end
end

-- A loss of the user's, checked to return what fit differentiates: a scalar tensor (the batch
-- mean). A number or nil would otherwise fail inside the step, naming no loss.
local function checked_loss(fn, output)
  local what
  if type(fn) == "function" then
    local info = debug.getinfo(fn, "S")
    what = string.format("the loss function defined at %s:%d", info.short_src, info.linedefined)
  else
    what = "the loss " .. tostring(fn)
  end
  if output then what = what .. string.format(" (for output %d)", output) end
  return function(y, y_pred, w)
    local l = fn(y, y_pred, w)
    if not util.is_tensor(l) or l.ndim ~= 0 then
      util.fail("%s returned %s; a loss function(y_true, y_pred) returns a tensor: the batch mean, "
        .. "a scalar (reduce per-example losses with :mean())", what, util.show(l))
    end
    return l
  end
end

-- One loss function(y, y_pred) over every output, and whether it returns per-example losses
-- ([batch]; every loss is a built-in one) rather than the batch mean (a loss of the user's).
local function total_loss(spec, names, all_names)
  local losses = require "tpu.losses"
  local list, per_example, built_in = {}, true, {}
  local given, weights = spec.loss, spec.loss_weights
  if is_dict(given) then given = by_output(given, all_names, "loss", true) end
  if is_dict(weights) then weights = by_output(weights, all_names, "loss_weights", true) end
  for i, l in ipairs(is_list(given) and given or {given}) do
    local fn = losses.get(l)
    built_in[i] = losses.per_example(fn) ~= nil
    list[i] = losses.per_example(fn) or checked_loss(fn, is_list(given) and #given > 1 and i or nil)
    per_example = per_example and built_in[i]
  end
  if not per_example then  -- a loss of the user's among built-ins: every one gives the batch mean
    for i, per in ipairs(list) do
      if built_in[i] then list[i] = function(y, y_pred, w) return per(y, y_pred, w):mean() end end
    end
  end
  local n = names and #names or 1
  if is_list(given) and #list ~= n then
    util.fail("compile: %d losses for a model with %d output%s", #list, n, n == 1 and "" or "s")
  end
  check_loss_weights(weights, n)
  weights = weights or {}
  if not names then
    local one, scale = list[1], weights[1]
    if scale == nil or scale == 1 then return one, per_example end
    return function(y, y_pred, w) return one(y, y_pred, w) * scale end, per_example
  end
  return function(y, y_pred, w)
    if not is_list(y) or #y ~= #y_pred then
      util.fail("the model has %d outputs but the targets are %s; give one target per output: "
        .. "model:fit(x, {y1, y2}) (a data set: data.from_tensors {x, {y1, y2}})", #y_pred, util.show(y))
    end
    local total
    for i, p in ipairs(y_pred) do
      local l = (list[i] or list[1])(y[i], p, w) * (weights[i] or 1)
      total = total and total + l or l
    end
    return total
  end, per_example
end

-- Metric objects; with several outputs, one per (output, metric) named <output>_<metric>.
-- Two metrics of one name would share one entry of the logs: the second would hide the first.
local function check_metric_names(list)
  local seen = {}
  for _, m in ipairs(list) do
    if seen[m.name] then
      util.fail("compile: two metrics are named '%s'; give one another name (e.g. metrics.Perplexity "
        .. "{name = \"masked_perplexity\", ...})", m.name)
    end
    seen[m.name] = true
  end
  return list
end

-- As Keras 3: one output's metrics are a list (or, keyed by output name, a metric or a list);
-- several outputs' a list with one entry per output (a metric or a list of them) or a table
-- keyed by output name, where an output without an entry gets none.
local function metric_list(spec, names, all_names)
  local get, out = require("tpu.metrics").get, {}
  local function as_list(v) return is_list(v) and v or {v} end
  if not names then
    if is_dict(spec) then spec = as_list(by_output(spec, all_names, "metrics", false, {})[1]) end
    for i, m in ipairs(spec) do out[i] = get(m) end
    return check_metric_names(out)
  end
  if is_dict(spec) then
    spec = by_output(spec, all_names, "metrics", false, {})
  elseif #spec > 0 and #spec ~= #names then
    util.fail("compile: for a model with %d outputs, metrics has one entry per output (a metric or a list "
      .. "of them), or is keyed by output name, e.g. {%s = {\"accuracy\"}}; got %d entr%s: %s", #names,
      names[1], #spec, #spec == 1 and "y" or "ies", util.show(spec))
  end
  for o, name in ipairs(names) do
    for _, m in ipairs(as_list(spec[o] or {})) do
      local metric = get(m)
      out[#out + 1] = {name = name .. "_" .. metric.name, weighted = metric.weighted,
                       result = metric.result, partial = function(y, y_pred, w) return metric.partial(y[o], y_pred[o], w) end}
    end
  end
  return check_metric_names(out)
end

-- A model method called with a dot (model.fit(x, y)) gets x as its model: say how to call it.
local function check_model(self, who, call)
  -- Any model (a subclass may override compile and call this one), never a tensor or options.
  if type(self) ~= "table" or util.is_tensor(self) or type(self.maybe_build) ~= "function" then
    errors.dot_call(who, "the model", call, util.show(self), "model")
  end
end

function M:compile(spec, extra)
  check_model(self, "compile", "model:compile {optimizer = ..., loss = ...}")
  errors.none(2, "compile", extra)
  util.check_options({__name = "compile"}, spec or {}, compile_options)
  spec = spec or {}
  if spec.optimizer == nil or spec.loss == nil then
    util.fail("compile needs an optimizer and a loss, e.g. model:compile{optimizer = "
      .. "\"adam\", loss = \"sparse_categorical_crossentropy\"}")
  end
  if spec.metrics ~= nil and type(spec.metrics) ~= "table" then
    util.fail("compile: metrics must be a list, e.g. {\"accuracy\"}, got %s", util.show(spec.metrics))
  end
  -- Keras's steps_per_execution groups steps into one call to save its per-call overhead; here
  -- every step is one compiled call either way, with the same results, so it is checked and
  -- changes nothing.
  if spec.steps_per_execution ~= nil and not util.is_positive_integer(spec.steps_per_execution) then
    util.fail("compile: steps_per_execution must be a positive integer, got %s", util.show(spec.steps_per_execution))
  end
  local names, all_names = output_names(self), all_output_names(self)
  local strategy = require "tpu.strategy"
  local loss, per_example = total_loss(spec, names, all_names)
  self.compiled = {
    optimizer = require("tpu.optim").get(spec.optimizer),
    loss = loss, per_example_loss = per_example,
    metrics = metric_list(spec.metrics or {}, names, all_names),
    strategy = strategy.current() or strategy.default(),
    steps = {}, static_batch = {}, ones = {},
  }
  self.optimizer_state = nil
end

local function compiled(model, what)
  if not model.compiled then
    util.fail("%s '%s' must be compiled before %s: call model:compile{optimizer = ..., loss = ...}",
      model.__name, model.name, what)
  end
  return model.compiled
end

---------------------------------------------------------------- batches

local part_names = {"x", "y", "the sample weights"}

-- The number of examples of an {x, y[, weights]} list of tensors (y may be a list of tensors,
-- one per output): every tensor must have as many rows as x, else nothing would say that the
-- extra rows are never used.
local function pair_rows(who, list)
  local n
  for i, part in ipairs(list) do
    local leaves = util.is_tensor(part) and {part} or part
    for j, t in ipairs(leaves) do
      if not util.is_tensor(t) then
        util.fail("%s: %s%s is not a tensor, got %s", who, part_names[i] or ("part " .. i),
          util.is_tensor(part) and "" or "[" .. j .. "]", util.show(t))
      end
      if t.ndim == 0 then util.fail("%s: %s is a scalar; it needs one row per example", who, part_names[i] or i) end
      n = n or t.shape[1]
      if t.shape[1] ~= n then
        util.fail("%s: x has %d rows but %s%s has %d; every tensor needs one row per example", who, n,
          part_names[i] or ("part " .. i), util.is_tensor(part) and "" or "[" .. j .. "]", t.shape[1])
      end
    end
  end
  return n
end

-- Iterates batches of a data set (anything with :iter()), of a tensor (predict) or of an
-- {x, y} pair of tensors (y: a tensor or a list, one per output) cut into batches of
-- `batch_size` along the first axis.
-- `order` (fit's shuffle): the rows in this order, an i32[n] tensor of 0-based row indices.
local function slices(list, batch_size, who, order)
  local n = pair_rows(who or "fit", list)
  local first = 1
  local function cut(t, last)
    local rows = order and order:slice {{first, last}}
    local function one(leaf) return rows and leaf:take(rows) or leaf:slice {{first, last}} end
    if util.is_tensor(t) then return one(t) end
    local out = {}
    for j, leaf in ipairs(t) do out[j] = one(leaf) end
    return out
  end
  return function()
    if first > n then return nil end
    local last = math.min(first + batch_size - 1, n)
    local out = {}
    for i, t in ipairs(list) do out[i] = cut(t, last) end
    first = last + 1
    return table.unpack(out)
  end
end

local function is_dataset(data)
  return type(data) == "table" and type(data.iter) == "function"
end

-- A list of tensors: several inputs (or outputs) of a model.
local function is_tensor_list(v)
  return type(v) == "table" and not is_dataset(v) and util.is_tensor(v[1])
end

-- fused (fit, tpu.data.fusing): the data set's unmapped batches, each one list of components.
local function batches(data, batch_size, who, order, fused)
  batch_size = batch_size or 32
  if fused then return data:_iter_with(nil, {skip_maps = fused.skip}, true) end
  if is_dataset(data) then
    local f, s, ctl = data:iter()
    return function()
      local r = table.pack(f(s, ctl))
      ctl = r[1]
      return table.unpack(r, 1, r.n)
    end
  end
  if util.is_tensor(data) then return slices({data}, batch_size, who) end
  if type(data) == "table" and (util.is_tensor(data[1]) or is_tensor_list(data[1])) then
    return slices(data, batch_size, who, order)
  end
  util.fail("expected a data set (tpu.data), a tensor or an {x, y} pair of tensors, got %s",
    util.show(data))
end

-- Number of batches, or nil when unknown (the progress bar then counts up).
local function cardinality(data, batch_size)
  if is_dataset(data) then
    local n = type(data.cardinality) == "function" and data:cardinality() or -1
    return n >= 0 and n or nil
  end
  local x = util.is_tensor(data) and data or type(data) == "table" and data[1]
  if type(x) == "table" and not util.is_tensor(x) then x = x[1] end  -- a list of inputs
  if not util.is_tensor(x) then return nil end
  batch_size = batch_size or 32
  return (x.shape[1] + batch_size - 1) // batch_size
end

---------------------------------------------------------------- building

local function fully_built(m)
  if not m.built then return false end
  for _, c in ipairs(m.modules) do
    if not fully_built(c) then return false end
  end
  return true
end

-- The first example of each tensor in x: the build pass needs the shapes past the batch.
local function first_example(x)
  if util.is_tensor(x) then return #x.shape > 0 and x.shape[1] > 0 and x:slice {{1, 1}} or x end
  if type(x) == "table" and getmetatable(x) == nil then
    local out = {}
    for k, v in pairs(x) do out[k] = first_example(v) end
    return out
  end
  return x
end

-- Creates every weight before anything is traced: from shapes, or one eager forward pass over
-- the batch's first example (over the whole batch, its activations stayed resident: a d256
-- transformer's peak memory held 170 MB more than training needs).
local function ensure_built(model, x)
  model:maybe_build(util.shape_of(x))
  if not fully_built(model) then model(first_example(x), {training = false}) end
end

---------------------------------------------------------------- traced steps

-- The full parameter list from the trainable ones and the frozen ones.
local function merge(layout, trainable, frozen)
  local all = {}
  for i, idx in ipairs(layout.trainable) do all[idx] = trainable[i] end
  for i, idx in ipairs(layout.frozen) do all[idx] = frozen[i] end
  return all
end

local function split(layout, all)
  local t, f = {}, {}
  for i, idx in ipairs(layout.trainable) do t[i] = all[idx] end
  for i, idx in ipairs(layout.frozen) do f[i] = all[idx] end
  return t, f
end

local function param_layout(model)
  local trainable, frozen, is_t = model:_trainable_indices(), {}, {}
  for _, i in ipairs(trainable) do is_t[i] = true end
  for i = 1, #model:parameters() do
    if not is_t[i] then frozen[#frozen + 1] = i end
  end
  return {trainable = trainable, frozen = frozen}
end

local with_params = util.with_params

local function f32(x)
  return x.dtype == "f32" and x or x:cast("f32")
end

local function replicas(c) return c.strategy.num_replicas_in_sync end

-- Sums over the cores of a replicated step (the identity on one core).
local function cross_replica(c)
  if replicas(c) == 1 then return function(x) return x end end
  return function(x) return tpu.all_reduce(x) end
end

-- A step's weights: the mask (1 for an example, 0 for a padding row), or {mask =, sample =}
-- when the data set gives per-example sample weights too.
local function split_weights(w)
  if tpu.core.is_tensor(w) then return w end
  return w.mask, w.sample
end

-- The sum over this core's examples of their weighted losses, as Keras's default reduction
-- weighs them: the step divides it by the number of examples (the mask's sum), not by the
-- sample weights' sum. A loss of the user's gives the batch mean: it counts once per example
-- (fit pads no batch for it).
local function loss_sum(c, y, y_pred, w)
  local mask, sample = split_weights(w)
  -- a built-in loss gets the mask too (ignore_class counts the tokens of real rows only)
  local loss = c.loss(y, y_pred, c.per_example_loss and mask or nil)
  if c.per_example_loss then return (f32(loss) * (sample and mask * sample or mask)):sum() end
  return f32(loss) * mask.shape[1]
end

-- One f32 vector summed over the cores: loss sum (with the regularizers' penalty once per
-- example), example count (this core's: `count` when the caller has it), then (numerator,
-- denominator) per metric.
local function batch_stats(c, aux, y, w, count)
  w = split_weights(w)  -- metrics count examples, as Keras's `metrics` (not weighted_metrics) do
  count = count or w:sum()
  local loss = aux.reg and aux.sum + f32(aux.reg) * count or aux.sum
  local parts = {loss, count}
  for _, m in ipairs(c.metrics) do
    local num, den = m.partial(y, aux.y_pred, m.weighted and w or nil)
    parts[#parts + 1] = f32(num)
    parts[#parts + 1] = f32(den)
  end
  return cross_replica(c)(tpu.stack(parts, 1))
end

-- The non-trainable weights after a step: the values layers recorded, else unchanged.
local function new_state(model, layout, frozen, updates)
  if #layout.frozen == 0 then return {} end
  local entries, out = model:_weight_entries(), {}
  for i, idx in ipairs(layout.frozen) do out[i] = updates[entries[idx].entry] or frozen[i] end
  return out
end

-- The objective each core differentiates: its share of the global mean loss, plus its share
-- of the regularizers' penalty, so the gradients summed over the cores are the full ones.
-- maps: the data set's traced maps fit applies first (tpu.data.fusing): the step then takes the
-- unmapped element (a list of components) in place of x and y, and the mapped one's first two
-- components are x and y.
local function make_train_step(model, c, layout, maps)
  local reduce, R = cross_replica(c), replicas(c)
  local function objective_of(frozen, x, y, w, key, count)
    local ctx = {training = true, key = key, updates = {}, sample_weight = (split_weights(w)),
                 cross_replica = R > 1 and reduce or nil}
    local y_pred = model(x, ctx)
    local aux = {y_pred = y_pred, sum = loss_sum(c, y, y_pred, w), reg = model:regularization_loss(),
                 state = new_state(model, layout, frozen, ctx.updates)}
    local objective = aux.sum / count
    if aux.reg then objective = objective + (R > 1 and aux.reg / R or aux.reg) end
    return objective, aux
  end
  -- The model holds the traced weights while the objective is traced: the gradients are the
  -- graph's, so its own weights go back before the gradients are taken.
  local function loss_of(tparams, frozen, ...)
    return with_params(model, merge(layout, tparams, frozen), objective_of, frozen, ...)
  end
  local grad_fn = tpu.value_and_grad(loss_of, {argnums = 1, has_aux = true, name = "train_step.grad"})
  local function body(tparams, opt_state, frozen, x, y, w, dropout_key, step, replica)
    local key = dropout_key:fold_in(step)
    -- Each core's rows draw their own masks: the key is the same on every core, so without
    -- its index every core would drop the same positions of its slice of the batch.
    -- (replica is this core's one-element slice; the HBM advice's probes see it whole.)
    if replica then key = key:fold_in(replica:slice {{1, 1}}:reshape {}) end
    local core_count = split_weights(w):sum()
    local count = reduce(core_count)
    local _, aux, grads = grad_fn(tparams, frozen, x, y, w, key, count)
    for i, g in ipairs(grads) do grads[i] = reduce(g) end
    -- A step whose loss is not finite keeps the weights it got (its inputs are donated), so
    -- fit can find the layer that went non-finite: the update selects them itself (in the
    -- pass that computes the new ones). The optimizer state is not kept: selecting it too
    -- would cost a pass over it every step, and fit stops there anyway.
    local stats = batch_stats(c, aux, y, w, core_count)
    local finite = nonfinite.finite_flag(stats:slice {{1, 1}})
    local new_params, new_opt_state
    if c.optimizer.update == Optimizer.update then
      new_params, new_opt_state = c.optimizer:update(tparams, grads, opt_state, {where = finite})
    else  -- an update of the user's own, which may not know `where`
      new_params, new_opt_state = c.optimizer:update(tparams, grads, opt_state)
      new_params = nonfinite.keep_if_finite(finite, {tparams}, {new_params})
    end
    aux.state = nonfinite.keep_if_finite(finite, {frozen}, {aux.state})
    return new_params, new_opt_state, aux.state, stats
  end
  if maps then
    local fusing = require "tpu.data.fusing"
    return tpu.jit(function(tparams, opt_state, frozen, raw, w, dropout_key, step)
      local e = fusing.apply(maps, raw)
      return body(tparams, opt_state, frozen, e[1], e[2], w, dropout_key, step)
    end, {name = "train_step", donate_argnums = {1, 2}, batch_argnums = {4, 5}})
  end
  return tpu.jit(body, {name = "train_step", donate_argnums = {1, 2}, batch_argnums = {4, 5, 6}})
end

local function make_eval_step(model, c)
  return tpu.jit(function(params, x, y, w)
    return with_params(model, params, function()
      local y_pred = model(x, {training = false})
      local aux = {y_pred = y_pred, sum = loss_sum(c, y, y_pred, w), reg = model:regularization_loss()}
      return batch_stats(c, aux, y, w)
    end)
  end, {name = "eval_step", batch_argnums = {2, 3, 4}})
end

local function make_predict_step(model)
  return tpu.jit(function(params, x)
    return with_params(model, params, model, x, {training = false})
  end, {name = "predict_step", batch_argnums = 2})
end

-- maps (kind "train"): the fused maps of fit's data set (tpu.data.fusing). The step made for
-- them is kept by the outermost map, and c.steps.train is the step fit runs now.
local function step_fn(model, c, kind, maps)
  if kind == "train" then
    c.layout = c.layout or param_layout(model)
    if maps then
      c.fused_steps = c.fused_steps or setmetatable({}, {__mode = "k"})
      local outer = maps[#maps]
      c.fused_steps[outer] = c.fused_steps[outer] or make_train_step(model, c, c.layout, maps)
      c.steps.train = c.fused_steps[outer]
    else
      c.train_plain = c.train_plain or make_train_step(model, c, c.layout)
      c.steps.train = c.train_plain
    end
    return c.steps.train
  end
  if not c.steps[kind] then
    c.steps[kind] = kind == "eval" and make_eval_step(model, c) or make_predict_step(model)
  end
  return c.steps[kind]
end

---------------------------------------------------------------- static batches, cores

-- Rows of a batch: the leading dimension of its first tensor.
local function batch_rows(v)
  if tpu.core.is_tensor(v) then return v.shape[1] end  -- the common case, without a tree walk
  local leaves = require("tpu.jit").flatten(v)
  return leaves[1] and leaves[1].shape[1]
end

-- Every tensor of v grown to `size` rows with copies of its last row. Their weight is 0, so
-- they add nothing to the losses, metrics or gradients, and being real rows they keep the model
-- finite where it is finite (a model may give NaN on a row of zeros, and 0 * NaN is NaN).
local function pad_rows(v, size)
  local jit = require "tpu.jit"
  local leaves, spec = jit.flatten(v)
  for i, x in ipairs(leaves) do
    local n = x.shape[1]
    if n > 0 and n < size then
      local rows = {}
      for r = 1, size do rows[r] = math.min(r, n) - 1 end
      leaves[i] = x:take(tpu.tensor(rows, {dtype = "i32"}))
    end
  end
  return jit.unflatten(spec, leaves)
end

-- Why a partial batch cannot be padded and masked, and the fix; nil when it can.
local function padding_blocker(c)
  if not c.per_example_loss then
    return "the loss is a function that returns the batch mean", "or use a built-in loss"
  end
  for _, m in ipairs(c.metrics) do
    if not m.weighted then
      return "metric '" .. m.name .. "' takes no per-example weights",
             "or define the metric with partial = function(y_true, y_pred, weights)"
    end
  end
end

-- x, y at the static batch size of `kind` (the largest seen), padded with copies of a row, and the
-- per-example weights (1 real, 0 padding). When padding cannot be exact (a loss or metric of
-- the user's that takes no weights) a partial batch runs as it is, compiling once more, if the
-- cores can split it.
local function padded_batch(c, kind, x, y)
  local n = batch_rows(x)
  local size = c.static_batch[kind]
  if not size or n > size then
    -- The first batch may be a partial one (a data set smaller than its batch): padded up to a
    -- multiple of the cores, it splits, where it set a size that no core count divides.
    local R = replicas(c)
    if n % R ~= 0 then
      local why, fix = padding_blocker(c)
      if why then
        util.fail("a batch of %d examples (the first of its size: a data set smaller than its batch?) does "
          .. "not divide by the %d cores, and padding it is not exact: %s; give a multiple of %d examples, %s",
          n, R, why, R, fix)
      end
    end
    size = (n + R - 1) // R * R
    c.static_batch[kind] = size
  end
  local function ones(k)
    c.ones[k] = c.ones[k] or tpu.ones {k}
    return c.ones[k]
  end
  if n == size then return x, y, ones(n) end
  local why, fix = padding_blocker(c)
  if not why then
    return pad_rows(x, size), pad_rows(y, size), tpu.concat({tpu.ones {n}, tpu.zeros {size - n}}, 1)
  end
  if n % replicas(c) == 0 then return x, y, ones(n) end
  util.fail("a partial batch of %d examples (the others have %d) does not divide by the %d cores, "
    .. "and padding it is not exact: %s; use batch(n, {drop_remainder = true}), %s",
    n, size, replicas(c), why, fix)
end

-- The same with the data set's per-example sample weights, when it gives them (Keras's third
-- part of an element): a [n] tensor, padded with the batch.
local function static_batch(c, kind, x, y, sample, who)
  local bx, by, w = padded_batch(c, kind, x, y)
  if sample == nil then return bx, by, w end
  local n = batch_rows(x)
  if not util.is_tensor(sample) or #sample.shape ~= 1 or sample.shape[1] ~= n then
    util.fail("%s: the third part of the data set's elements is the sample weights, one per example "
      .. "(a [%d] tensor here), got %s", who, n, util.show(sample))
  end
  if not c.per_example_loss then
    util.fail("%s: sample weights need a built-in loss (the loss is a function that returns the batch "
      .. "mean)", who)
  end
  return bx, by, {mask = w, sample = pad_rows(sample:cast("f32"), w.shape[1])}
end

-- Under a strategy, before any step: the data set's batch size, or the batch_size tensors are
-- cut by, must divide by the cores (a partial batch is padded: padded_batch).
local function check_batches(c, data, batch_size)
  if replicas(c) == 1 or data == nil then return end
  if is_dataset(data) then c.strategy:distribute(data) else c.strategy:_check_batch(batch_size or 32) end
end

-- Per-core results (the cores disagree: a layer's state of its own batch rows) averaged.
local function agreed(s, v)
  if require("tpu.strategy").PerReplica.is_instance(v) then return s:reduce("mean", v) end
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = agreed(s, x) end
  return out
end

-- Runs a step on the strategy's cores: the arguments at positions `sharded` (the batch) are
-- split across them, the others replicated.
local function run_step(c, step, sharded, ...)
  local _ <close> = c.strategy:version_scope()  -- the model's cores' HBM, whatever scope is open
  if replicas(c) == 1 then return step(...) end
  local s, args = c.strategy, table.pack(...)
  for _, i in ipairs(sharded) do args[i] = s:shard(args[i]) end
  local out = table.pack(s:run(step, table.unpack(args, 1, args.n)))
  for i = 1, out.n do out[i] = agreed(s, out[i]) end
  return table.unpack(out, 1, out.n)
end

---------------------------------------------------------------- running sums

local function new_sums(c)
  local s = {}
  for i = 1, 2 + 2 * #c.metrics do s[i] = 0 end
  return s
end

local function add_stats(sums, stats)
  for i, v in ipairs(stats:totable()) do sums[i] = sums[i] + v end
end

-- Ordered {name, value} pairs and a name -> value table from the sums.
local function results(c, sums, prefix)
  prefix = prefix or ""
  local pairs_, logs = {}, {}
  local function put(name, value)
    pairs_[#pairs_ + 1] = {prefix .. name, value}
    logs[prefix .. name] = value
  end
  put("loss", sums[1] / math.max(sums[2], 1))
  for i, m in ipairs(c.metrics) do
    local v = sums[1 + 2 * i] / math.max(sums[2 + 2 * i], 1e-30)
    put(m.name, m.result and m.result(v) or v)
  end
  return pairs_, logs
end

-- Keras's verbose: 0 silent, 1 a progress bar, 2 a line per epoch; true and false as 1 and 0.
-- verbose = nil or "auto" is 1, or 0 under --quiet (an explicit 1 or 2 still shows).
local function verbosity(v, who)
  if v == nil or v == "auto" then return tpu.options.quiet and 0 or 1 end
  if v == true then return 1 end
  if v == false then return 0 end
  if v ~= 0 and v ~= 1 and v ~= 2 then
    util.fail("%s: verbose must be 0, 1, 2, \"auto\" or a boolean, got %s", who, util.show(v))
  end
  return math.tointeger(v)
end

---------------------------------------------------------------- callbacks

-- A plain table's on_batch_end answers on_train_batch_end, as the Callback class's does.
local hook_aliases = {on_train_batch_end = "on_batch_end"}

local function callback(cbs, hook, ...)
  for _, cb in ipairs(cbs) do
    local fn = cb[hook]
    if fn == nil and hook_aliases[hook] then fn = cb[hook_aliases[hook]] end
    if type(fn) == "function" then fn(cb, ...) end
  end
end

-- Ends fit after SIGINT (Ctrl-C), SIGTERM or SIGHUP: between steps, after the callbacks (so a
-- checkpoint is complete).
local function check_interrupt(model)
  local p = model.fit_progress
  interrupt.check("fit", "after step %d (epoch %d, batch %d)", model.train_steps or 0, p.epoch, p.batch)
end

-- The same when a signal stopped fit inside a step (a compile raised) or before its first one:
-- the weights and optimizer state are those of the last step done. `first` = train_steps when
-- this fit began; `where` = the user's call.
local function interrupted_fit(model, first, where)
  local steps, p = model.train_steps or 0, model.fit_progress
  if steps == first or not p then interrupt.check_at(where, "fit", "before its first step") end
  interrupt.check_at(where, "fit", "after step %d (epoch %d, batch %d)", steps, p.epoch, p.batch)
end

---------------------------------------------------------------- fit

-- Under a strategy, the global index of each replica (sharded: one per core), nil on one core.
local function replica_indices(c)
  local R = replicas(c)
  if R == 1 then return nil end
  c.replica_indices = c.replica_indices or tpu.arange(R)
  return c.replica_indices
end

-- The random key of the next train step is the seed's key folded with a step count that goes
-- on across fit calls; the step folds it in (a host fold_in cost more than the fused one). Both
-- are tensor leaves of the step's arguments, so a new step never recompiles.
local function model_key(model)
  if not model.dropout_key then
    local seed = require("tpu.nn.initializers").seed()
    model.dropout_key = tpu.random.key(seed):split(2)[2]
  end
  return model.dropout_key
end

-- The key and number of the next step; train_steps counts it once it is done.
local function step_key(model)
  model_key(model)
  return model.dropout_key, tpu.tensor((model.train_steps or 0) + 1, {dtype = "i32"})
end

-- After a non-finite loss: a class id outside the model's classes made it (a compiled sparse
-- cross-entropy gives such a position NaN), so the loss, run eagerly on the batch, names it.
local function check_labels(model, c, x, y)
  if c.per_example_loss then c.loss(y, model(x, {training = false})) end
end

-- A training or evaluation element is {x, y} or {x, y, sample_weight}: targets are needed.
local function check_element(who, y, fourth)
  if y == nil then
    util.fail("%s: the data set's elements have no targets; make it with data.from_tensors {x, y}", who)
  end
  if fourth ~= nil then
    util.fail("%s: the data set's elements have a fourth part (%s); give {x, y} or {x, y, sample_weight}",
      who, util.show(fourth))
  end
end

-- The rest of the pass the last epoch left (steps_per_epoch ended it), or a new pass when
-- nothing is left of it; and the batches already taken from that pass.
local function continued_pass(data, opts, left, fused)
  local first = table.pack(left.iter())
  if first[1] == nil then return batches(data, opts.batch_size, nil, nil, fused), 0 end
  local it = left.iter
  return function()
    if not first then return it() end
    local e = first
    first = nil
    return table.unpack(e, 1, e.n)
  end, left.pass_batch
end

-- Keras's shuffle of {x, y} tensors: the order of the rows in the epoch that starts now, an
-- i32[n] permutation made on the host from the model's random key (nn.set_seed, kept by
-- checkpoints) and its count of train steps so far (kept too), so every epoch, of one fit or of
-- the next, gets a new order, and fit{initial_epoch =} and resumed runs shuffle as an
-- uninterrupted one. nil when the rows keep their order (shuffle = false, or a data set, which
-- shuffles itself).
local function epoch_order(model, data, opts)
  if opts.shuffle == false or is_dataset(data) then return nil end
  local n = pair_rows("fit", data)
  local seed = model_key(model):split(1)[1]:value()
  return tpu.core.buffer_shuffle(0, n, n, seed, model.train_steps or 0)
end

-- The next element of a fused pass (tpu.data.fusing): x, y, sample weights, a fourth part, and
-- the unmapped batch when the step maps it. The first batch is mapped here, as Map would (so
-- its errors are the same), and tells whether the step can: its mapped element is x and y and
-- needs no padding. Else every batch is mapped here.
local function fused_next(c, fused, it)
  local raw = it()
  if raw == nil then return nil end
  if fused.ok then return nil, nil, nil, nil, raw end
  local e = require("tpu.data.fusing").apply(fused.maps, raw)
  if fused.ok == nil then
    fused.ok = false
    if e[2] ~= nil and e[3] == nil then
      local bx, _, w = padded_batch(c, "train", e[1], e[2])
      if rawequal(bx, e[1]) then fused.ok, fused.w = true, w end
    end
    if fused.ok then return e[1], e[2], nil, nil, raw end
  end
  return table.unpack(e, 1, 4)
end

-- One epoch. `start` continues one a checkpoint stopped inside ({batch=, sums=, iter=,
-- pass_batch=}), or the pass the last epoch left ({iter=, pass_batch=}): with steps_per_epoch
-- over a data set that ends (`carry`), as in Keras, an epoch takes the batches that follow the
-- last one's (a pass that ends ends its epoch, and the next one starts a new pass). Returns the
-- sums, the steps, and the rest of the pass when steps_per_epoch ended the epoch first.
-- A data set that never ends starts a new pass each epoch instead: a position inside its one
-- endless pass could only be resumed by making every batch before it again.
-- fused: the data set's maps the step applies (tpu.data.fusing), or nil.
local function train_epoch(model, c, data, opts, bar, cbs, epoch, start, carry, fused)
  local sums, step = start.sums or new_sums(c), start.batch or 0
  local spe = opts.steps_per_epoch
  local it, taken  -- the pass, and the batches taken from it (a checkpoint's data position)
  if start.iter and step == 0 then it, taken = continued_pass(data, opts, start, fused)
  else
    it = start.iter or batches(data, opts.batch_size, nil, epoch_order(model, data, opts), fused)
    taken = start.pass_batch or step
  end
  while not (spe and step >= spe) do
    local x, y, sample, fourth, raw
    if fused then x, y, sample, fourth, raw = fused_next(c, fused, it)
    else x, y, sample, fourth = it() end
    if x == nil and raw == nil then
      it = nil  -- the pass ended
      break
    end
    if not raw then check_element("fit", y, fourth) end
    if not model.optimizer_state then
      ensure_built(model, x)
      local layout = param_layout(model)
      model.optimizer_state = c.optimizer:init((split(layout, model:parameters())))
    end
    local train = step_fn(model, c, "train", raw and fused.maps)
    local tparams, frozen = split(c.layout, model:parameters())
    local key, step_number = step_key(model)
    local new_params, new_opt_state, state, stats
    if raw then
      new_params, new_opt_state, state, stats =
        run_step(c, train, {4, 5}, tparams, model.optimizer_state, frozen, raw, fused.w, key, step_number)
    else
      local bx, by, w = static_batch(c, "train", x, y, sample, "fit")
      new_params, new_opt_state, state, stats =
        run_step(c, train, {4, 5, 6, 9}, tparams, model.optimizer_state, frozen, bx, by, w, key, step_number,
                 replica_indices(c))
    end
    model:set_parameters(merge(c.layout, new_params, state))
    model.optimizer_state = new_opt_state
    model.train_steps = (model.train_steps or 0) + 1
    add_stats(sums, stats)
    step, taken = step + 1, taken + 1
    model.fit_progress = {epoch = epoch, batch = step, sums = sums, pass_batch = taken}
    if not util.is_finite(sums[1]) then
      if raw then
        local e = require("tpu.data.fusing").apply(fused.maps, raw)
        x, y = e[1], e[2]
      end
      check_labels(model, c, x, y)
      nonfinite.fail(model, x, sums[1], model.fit_progress)
    end
    local shown, logs = results(c, sums)
    bar:update(step, shown)
    callback(cbs, "on_train_batch_end", step, logs)
    check_interrupt(model)
  end
  if step == 0 then util.fail("fit: the training data set produced no batches") end
  local left = carry and it and {iter = it, pass_batch = taken} or nil
  -- At the epoch's end a checkpoint's data position is inside the pass only if it goes on.
  model.fit_progress = {epoch = epoch, batch = step, sums = sums, pass_batch = left and taken or nil}
  return sums, step, left
end

local function evaluate_sums(model, c, data, opts, bar)
  local sums, step = new_sums(c), 0
  local who = bar and "evaluate" or "fit: validation_data"
  local where = errors.where()  -- a signal stops the loop after a batch, or names the last one done
  local _ <close> = interrupt.deferred(function() interrupt.check_at(where, who, "after batch %d", step) end)
  for x, y, sample, fourth in batches(data, opts.batch_size, who) do
    check_element(who, y, fourth)
    ensure_built(model, x)
    local bx, by, w = static_batch(c, "eval", x, y, sample, who)
    local stats = run_step(c, step_fn(model, c, "eval"), {2, 3, 4}, model:parameters(), bx, by, w)
    local finite_before = util.is_finite(sums[1])
    add_stats(sums, stats)
    if finite_before and not util.is_finite(sums[1]) then check_labels(model, c, x, y) end  -- the first one
    step = step + 1
    if bar then bar:update(step, (results(c, sums))) end
    interrupt.check(who, "after batch %d", step)
  end
  if step == 0 then util.fail("%s: the data set produced no batches", who) end
  return sums, step
end

local fit_options = {"epochs", "validation_data", "verbose", "callbacks", "batch_size",
                     "steps_per_epoch", "resume", "validation_split", "initial_epoch", "shuffle"}

-- Keras's validation_split on {x, y} tensors (x, y: a tensor or a list of them, one per input or
-- output): the last fraction of the rows of each (taken before any shuffling) becomes
-- validation_data. Returns the training data and a copy of opts.
local function split_validation(data, opts)
  local split = opts.validation_split
  if split == nil then return data, opts end
  if type(split) ~= "number" or split <= 0 or split >= 1 then
    util.fail("fit: validation_split must be a number in (0, 1), got %s", util.show(split))
  end
  if opts.validation_data ~= nil then util.fail("fit: give validation_split or validation_data, not both") end
  local function tensors(v) return util.is_tensor(v) or is_tensor_list(v) end
  local pair = type(data) == "table" and not is_dataset(data) and #data == 2
  if not (pair and tensors(data[1]) and tensors(data[2])) then
    util.fail("fit: validation_split needs x and y tensors (fit(x, y, {...}); x or y may be a list of "
      .. "tensors); for a data set, pass validation_data")
  end
  local n = pair_rows("fit", data)
  local at = math.floor(n * (1 - split))
  if at < 1 or at >= n then
    util.fail("fit: validation_split = %g of %d rows leaves no %s rows", split, n, at < 1 and "training" or "validation")
  end
  local out = {}
  for k, v in pairs(opts) do out[k] = v end
  out.validation_split = nil
  local function cut(v, first, last)
    if util.is_tensor(v) then return v:slice {{first, last}} end
    local parts = {}
    for i, t in ipairs(v) do parts[i] = t:slice {{first, last}} end
    return parts
  end
  local function head(v) return cut(v, 1, at) end
  local function tail(v) return cut(v, at + 1, n) end
  out.validation_data = {tail(data[1]), tail(data[2])}
  return {head(data[1]), head(data[2])}, out
end

-- validation_data, checked before the first step rather than after the first epoch.
local function check_validation_data(v)
  if v == nil then return end
  local pair = type(v) == "table" and not is_dataset(v) and v[2] ~= nil
    and (util.is_tensor(v[1]) or is_tensor_list(v[1]))
  if not (is_dataset(v) or pair) then
    util.fail("fit: validation_data must be a data set or an {x, y} pair of tensors, got %s", util.show(v))
  end
  if pair and pair_rows("fit: validation_data", v) == 0 then util.fail("fit: validation_data has no rows") end
  if is_dataset(v) and type(v.cardinality) == "function" then
    local n = v:cardinality()
    if n == 0 then util.fail("fit: validation_data: the data set produced no batches") end
    if n == -1 then
      util.fail("fit: validation_data never ends (cycle() without a count); give it an end with take(n)")
    end
  end
end

-- Steps per epoch for the progress bar; an endless data set needs steps_per_epoch.
local function epoch_steps(data, opts)
  local spe = opts.steps_per_epoch
  if spe ~= nil and not util.is_positive_integer(spe) then
    util.fail("fit: steps_per_epoch must be a positive integer, got %s", util.show(spe))
  end
  if is_dataset(data) and type(data.cardinality) == "function" and data:cardinality() == -1
     and not spe then
    util.fail("fit: the training data set never ends (cycle() without a count); "
      .. "pass steps_per_epoch = N to fit, or give cycle a count")
  end
  local n = cardinality(data, opts.batch_size)
  -- Known to be empty: say so before "Epoch 1/N" prints, not after the first pass.
  if n == 0 and is_dataset(data) then
    util.fail("fit: the training data set has no batches (its cardinality() is 0)")
  end
  if spe then return n and math.min(n, spe) or spe end
  return n
end

-- fit(x, y, {...}) and evaluate(x, y, {...}) with tensors, as in Keras, mean ({x, y}, {...}).
local xy_call = {fit = "model:fit(x, y, {epochs = ...}) or model:fit(dataset, {...})",
                 evaluate = "model:evaluate(x, y) or model:evaluate(dataset)"}

-- Keras's fit(x, y, opts) and evaluate(x, y): the tensors become one {x, y} pair. Inputs
-- without their targets are an error that shows the call.
local function keras_xy(who, self, data, opts, more)
  check_model(self, who, xy_call[who])
  -- x: a tensor, or a list of tensors (one per input); y: a tensor, or a list (one per output)
  local y_ok = util.is_tensor(opts) or is_tensor_list(opts)
  if (util.is_tensor(data) or is_tensor_list(data)) and y_ok then return {data, opts}, more end
  errors.none(3, who, more)
  if util.is_tensor(data) then
    util.fail("%s: %s needs the targets too: %s", who, errors.show(data), xy_call[who])
  end
  return data, opts
end

-- fit's, evaluate's and predict's data and batch_size, checked before anything is printed.
local data_call = {fit = xy_call.fit, evaluate = xy_call.evaluate,
                   predict = "model:predict(x) or model:predict(dataset)"}

local function check_data(who, data, opts)
  local size = opts.batch_size
  -- A data set's elements are batches already: batch_size would be silently ignored (Keras raises).
  if size ~= nil and is_dataset(data) then
    util.fail("%s: batch_size is for tensors; a data set is batched by its own batch(n), e.g. "
      .. "ds:batch(%s), before it is given to %s", who, util.show(size), who)
  end
  if size ~= nil and not util.is_positive_integer(size) then
    util.fail("%s: batch_size must be a positive integer, got %s", who, util.show(size))
  end
  if is_dataset(data) or util.is_tensor(data) then return end
  if is_list(data) and (util.is_tensor(data[1]) or is_tensor_list(data[1])) then return end
  util.fail("%s needs %s: %s; got %s%s", who, who == "predict" and "inputs" or "data", data_call[who],
    util.show(data), type(data) == "string" and " (a file name: read it into a data set first, e.g. "
      .. "tpu.data.csv(path) or tpu.data.npy(path))" or "")
end

-- Where fit starts: a resumed state, Keras's initial_epoch (0-based count of epochs already
-- done; the data set's shuffles continue from that pass, as in an uninterrupted run), or 0.
local function first_epoch(model, history, data, opts, epochs)
  local done = opts.initial_epoch
  if done == nil then return require("tpu.checkpoint").resume_fit(model, history, data, opts) end
  if math.type(done) ~= "integer" or done < 0 then
    util.fail("fit: initial_epoch must be a non-negative integer, got %s", util.show(done))
  end
  if opts.resume ~= nil then util.fail("fit: give resume or initial_epoch, not both (resume knows its epoch)") end
  if done >= epochs then
    util.fail("fit: initial_epoch = %d leaves nothing to train with epochs = %d "
      .. "(epochs is the number of the last epoch, as in Keras: fit{initial_epoch = %d, epochs = %d})",
      done, epochs, done, done + 1)
  end
  if is_dataset(data) then require("tpu.checkpoint").restore_data_position(data, {pass = done, batch = 0}) end
  return {epoch = done, batch = 0}
end

-- New tensors for a list of weights, with the same values: tensors a train step never donates
-- (a buffer still held elsewhere is copied when a step donates its new tensor).
local copy_step
local function copies(list)
  if #list == 0 then return {} end
  copy_step = copy_step or tpu.jit(function(l) return l end, {name = "copy_weights"})
  return copy_step(list)
end

-- Keras's get_weights(): copies of the weights in parameters() order, which fit never changes.
function M:get_weights(extra)
  check_model(self, "get_weights", "model:get_weights()")
  errors.none(1, "get_weights", extra)
  return copies(self:parameters())
end

-- Keras's set_weights(list): copies of the tensors become the weights (the list stays valid
-- after fit); each must have the shape and dtype of the weight it replaces.
function M:set_weights(list, extra)
  check_model(self, "set_weights", "model:set_weights(weights)")
  errors.none(2, "set_weights", extra)
  local current = self:parameters()
  if not is_list(list) or #list ~= #current then
    util.fail("set_weights: expected a list of %d tensors (model:get_weights() order), got %s", #current,
      util.show(list))
  end
  for i, t in ipairs(list) do
    local w = current[i]
    if not util.is_tensor(t) or t.dtype ~= w.dtype or table.concat(t.shape, ",") ~= table.concat(w.shape, ",") then
      util.fail("set_weights: weight %d is %s[%s], got %s", i, w.dtype, table.concat(w.shape, ","), util.show(t))
    end
  end
  self:set_parameters(copies(list))
end

function M:fit(data, opts, more)
  data, opts = keras_xy("fit", self, data, opts, more)
  opts = opts or {}
  util.check_options({__name = "fit"}, opts, fit_options)
  check_data("fit", data, opts)
  if opts.shuffle ~= nil and type(opts.shuffle) ~= "boolean" then
    util.fail("fit: shuffle must be true or false, got %s", util.show(opts.shuffle))
  end
  data, opts = split_validation(data, opts)
  check_validation_data(opts.validation_data)
  local c = compiled(self, "fit")
  local epochs = opts.epochs or 1
  if not util.is_positive_integer(epochs) then
    util.fail("fit: epochs must be a positive integer, got %s", util.show(epochs))
  end
  local verbose, cbs = verbosity(opts.verbose, "fit"), opts.callbacks or {}
  local history = History {epochs = epochs, verbose = verbose}
  self.history, self.stop_training = history, false
  local start = first_epoch(self, history, data, opts, epochs)
  for _, ds in ipairs {data, opts.validation_data} do check_batches(c, ds, opts.batch_size) end
  local steps = epoch_steps(data, opts)
  c.strategy:_agree {{"", "fit"}, {"epochs", epochs}, {"first epoch", start.epoch + 1},  -- multi_worker
                    {"steps per epoch", steps or "unknown"}}
  cbs = require("tpu.callbacks")._prepare(cbs, self, {epochs = epochs, steps = steps, verbose = verbose,
    train_data = data, validation_data = opts.validation_data})
  local first_step, where = self.train_steps or 0, errors.where()
  local _ <close> = interrupt.deferred(function() interrupted_fit(self, first_step, where) end)
  callback(cbs, "on_train_begin", {})
  local left  -- the pass the last epoch left under way (steps_per_epoch)
  local carry = is_dataset(data) and data:cardinality() ~= -1
  -- The data set's last traced maps, applied by the train step (tpu.data.fusing); not when
  -- resuming inside a pass (its iterator gives mapped batches) or on several cores.
  local fused
  local maps = is_dataset(data) and not start.iter and replicas(c) == 1
    and require("tpu.data.fusing").maps(data)
  if maps then
    fused = {maps = maps, skip = {}}
    for _, m in ipairs(maps) do fused.skip[m] = true end
  end
  local done  -- steps of the last epoch: the bar's target when the data set's size is unknown
  for epoch = start.epoch + 1, epochs do
    if verbose > 0 then io.stdout:write(string.format("Epoch %d/%d\n", epoch, epochs)) end
    if epoch > start.epoch + 1 or start.batch == 0 then  -- a resumed epoch has begun before
      callback(cbs, "on_epoch_begin", epoch, {})
    end
    local bar = Progbar {target = steps or done, verbose = verbose}
    local sums
    sums, done, left = train_epoch(self, c, data, opts, bar, cbs, epoch,
      epoch == start.epoch + 1 and start or left or {}, carry, fused)
    local shown, logs = results(c, sums)
    if opts.validation_data then
      local vshown, vlogs = results(c, (evaluate_sums(self, c, opts.validation_data, opts)), "val_")
      for _, p in ipairs(vshown) do shown[#shown + 1] = p; logs[p[1]] = vlogs[p[1]] end
    end
    bar:update(done, shown, true)
    local order = {}
    for i, p in ipairs(shown) do order[i] = p[1] end
    history:_append(epoch, logs, order)
    callback(cbs, "on_epoch_end", epoch, logs)
    history:_append_late(logs)
    self.fit_progress = {epoch = epoch, batch = done, pass_batch = left and left.pass_batch or nil}
    check_interrupt(self)
    if self.stop_training then break end
  end
  callback(cbs, "on_train_end", {})
  return history
end

---------------------------------------------------------------- evaluate, predict

function M:evaluate(data, opts, more)
  data, opts = keras_xy("evaluate", self, data, opts, more)
  opts = opts or {}
  util.check_options({__name = "evaluate"}, opts, {"verbose", "batch_size"})
  check_data("evaluate", data, opts)
  local c = compiled(self, "evaluate")
  check_batches(c, data, opts.batch_size)
  local verbose = verbosity(opts.verbose, "evaluate")
  local bar = Progbar {target = cardinality(data, opts.batch_size), verbose = verbose}
  local sums, steps = evaluate_sums(self, c, data, opts, bar)
  local shown, logs = results(c, sums)
  bar:update(steps, shown, true)
  return logs
end

-- predict(ds | tensor | {x}) -> tensor of outputs for every example (concatenated batches); a
-- list of them for a model with several outputs.
function M:predict(data, opts, extra)
  check_model(self, "predict", "model:predict(x) or model:predict(dataset)")
  errors.none(3, "predict", extra)
  opts = opts or {}
  util.check_options({__name = "predict"}, opts, {"verbose", "batch_size"})
  check_data("predict", data, opts)
  self.predict_steps = self.predict_steps or {steps = {}}
  local c = self.predict_steps
  -- checked against the HBM of the model's own strategy's cores, as fit's and evaluate's steps
  local _ <close> = (self.compiled and self.compiled.strategy or require("tpu.strategy").default()):version_scope()
  -- a model of several inputs takes a list of tensors, one per input (as fit does)
  local inputs = not self.single_input and self.inputs and #self.inputs or 1
  if inputs > 1 and is_tensor_list(data) and #data == inputs then data = {data} end
  local x = util.is_tensor(data) and data or (inputs > 1 and type(data) == "table" and #data == 1 and data[1])
  if x and not opts.batch_size then
    ensure_built(self, x)
    return step_fn(self, c, "predict")(self:parameters(), x)
  end
  local outs = {}
  local bar = Progbar {target = cardinality(data, opts.batch_size),
                       verbose = verbosity(opts.verbose or 0, "predict")}
  local where = errors.where()
  local stop <close> = interrupt.deferred(function() interrupt.check_at(where, "predict", "after batch %d", #outs) end)
  for x in batches(data, opts.batch_size, "predict") do
    ensure_built(self, x)
    outs[#outs + 1] = step_fn(self, c, "predict")(self:parameters(), x)
    bar:update(#outs, {})
    interrupt.check("predict", "after batch %d", #outs)
  end
  if #outs == 0 then util.fail("predict: the data set produced no batches") end
  bar:update(#outs, {}, true)
  if #outs == 1 then return outs[1] end
  if util.is_tensor(outs[1]) then return tpu.concat(outs, 1) end
  local joined = {}  -- several outputs: one tensor per output
  for i = 1, #outs[1] do
    local parts = {}
    for b, out in ipairs(outs) do parts[b] = out[i] end
    joined[i] = tpu.concat(parts, 1)
  end
  return joined
end

-- compile_stats() -> {train=, evaluate=, predict=}: for each step that fit, evaluate or predict
-- compiled so far, its jit counters (compiles, cache_hits, compile_ms: trace + compile,
-- executions, run_ms) and the plan of its last signature (kernels, flops, planned_bytes,
-- hbm_bytes: per core under a TPU strategy).
function M:compile_stats(extra)
  errors.none(1, "compile_stats", extra)
  local out = {}
  local function add(kind, step)
    if not step then return end
    local s = step:stats()
    if step.last then
      local info = step.last.exe:info()
      s.kernels, s.flops, s.planned_bytes, s.hbm_bytes = info.kernels, info.flops, info.planned_bytes, info.hbm_bytes
    end
    out[kind] = s
  end
  local steps = self.compiled and self.compiled.steps or {}
  add("train", steps.train)
  add("evaluate", steps.eval)
  add("predict", self.predict_steps and self.predict_steps.steps.predict)
  return out
end

return M
