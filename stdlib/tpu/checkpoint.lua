-- Tensors and training state in files (safetensors: a JSON header, then raw little-endian
-- data; every write goes to a temporary file in the same directory, is flushed and renamed,
-- so a crash leaves the previous file intact).
--
-- Tables of tensors (tpu.save / tpu.load):
--   tpu.save("w.safetensors", {encoder = {w = w1, b = b1}, head = w2})  -- "encoder.w", "head", ...
--   local t = tpu.load("w.safetensors")                  -- {["encoder.w"] = tensor, ...}, metadata
--   local t = tpu.load("w.safetensors", {nested = true}) -- {encoder = {w = ...}, head = ...}
-- Nested keys are joined with "."; integer keys become their digits ("layers.1.w") and come
-- back as integers with {nested = true}. An nn.Module inside the table stores its weights
-- under its model:save names. The optional metadata is a table of strings.
--
-- Training checkpoints (tpu.checkpoint.save / load):
--   tpu.checkpoint.save("ckpt.safetensors", {model = model, optimizer_state = ..., step = 1200,
--                       epoch = 3, rng = {dropout_key = key}, data_position = {pass = 3, batch = 0}})
--   local state = tpu.checkpoint.load("ckpt.safetensors", {model = model})
-- The state is any table of tensors, random keys, numbers, strings, booleans, nested tables
-- and (at most a few) nn.Modules. Everything comes back exactly: tensors bit for bit, numbers
-- as the same integer or float (floats are stored in hexadecimal), keys as keys. Modules come
-- back as their name -> tensor table, or loaded into opts.model (checked like model:load).
-- A checkpoint is a plain safetensors file: tensors under their dotted paths, and in the
-- metadata "tputrain.format" = "checkpoint/1", "value:<path>" = "i:12" | "f:0x1.8p+1" |
-- "s:text" | "x:636166e9" (a string that is not UTF-8, in hexadecimal) | "b:true" for plain
-- values and "kind:<path>" = "key" | "model" | "table" (an empty table) for the rest. Keys of
-- the state must be strings without "." or integers.
--
-- Resuming a fit bitwise identically needs (training_state / restore_training do this):
--   * every weight of the model, trainable or not (BatchNorm statistics)      -> model
--   * model.optimizer_state: step counter, lr tensor (callbacks may have changed it), slots
--   * model.train_steps (steps done; each step's dropout key is dropout_key:fold_in(step))
--     and model.dropout_key                                                   -> step, rng
--   * the data position: the training Dataset's pass counter (ds._epoch: shuffles depend on
--     the pass number) and the batches already taken from the current pass; the validation
--     set's counter too when it shuffles                                      -> data_position
--   * the epoch number, and the history so far for callbacks and plots       -> epoch, history
-- The compiled step itself is deterministic (fixed reduction order), so the same inputs give
-- the same weights. A checkpoint taken inside an epoch (checkpoint{save_freq = n}) also holds
-- that epoch's running loss and metric sums (epoch_sums), so the resumed epoch reports the same
-- numbers. With steps_per_epoch an epoch may continue the pass the last one left: the epoch's
-- steps (epoch_batch) then differ from the batches taken from the pass, and both are kept.
-- model:fit(ds, {epochs = n, resume = "ckpt.safetensors"}) does all of this.
local M = {}

local FORMAT_TENSORS = "tensors/1"
local FORMAT_CHECKPOINT = "checkpoint/1"

local core = require "tpu.core"
local random = require "tpu.random"

local errors = require "tpu.errors"
local fail = errors.fail

local function is_tensor(v) return core.is_tensor(v) end

local function is_module(v)
  local Module = package.loaded["tpu.nn.Module"]
  return Module ~= nil and getmetatable(v) ~= nil and Module.is_instance(v)
end

local function is_key(v) return random.is_key(v) end

local function persistence() return require "tpu.nn.persistence" end

local function check_path(path, what)
  if type(path) ~= "string" or path == "" then fail("%s: expected a file path, got %s", what, tostring(path)) end
end

local function check_metadata(meta, what)
  if meta == nil then return {} end
  if type(meta) ~= "table" then fail("%s: metadata must be a table of strings, got %s", what, type(meta)) end
  local out = {}
  for k, v in pairs(meta) do
    if type(k) ~= "string" or type(v) ~= "string" then
      fail("%s: metadata must map strings to strings, got %s = %s", what, tostring(k), tostring(v))
    end
    out[k] = v
  end
  return out
end

-- A key of a table as a path component.
local function component(k, path, what, strict)
  if math.type(k) == "integer" then return tostring(k) end
  if type(k) ~= "string" or k == "" then
    fail("%s: key %s at '%s' is not a string or an integer", what, tostring(k), path)
  end
  if strict and k:find(".", 1, true) then
    fail("%s: key '%s' at '%s' contains '.', which separates names in the file", what, k, path)
  end
  if strict and k:match("^%-?%d+$") then
    fail("%s: key '%s' at '%s' is a number written as a string; use the integer %s or another name",
      what, k, path, k)
  end
  return k
end

local function join(prefix, key) return prefix == "" and key or prefix .. "." .. key end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    local ta, tb = math.type(a) or type(a), math.type(b) or type(b)
    if ta ~= tb then return ta < tb end
    if ta == "integer" or ta == "float" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return keys
end

---------------------------------------------------------------- tables of tensors

-- Puts every tensor of `v` into out[name]; `on_leaf(v, name)` handles anything else.
local function flatten(v, prefix, out, ctx)
  if is_tensor(v) then
    if out[prefix] ~= nil then fail("%s: two tensors would be named '%s'", ctx.what, prefix) end
    out[prefix] = v
  elseif is_module(v) then
    for name, t in pairs((persistence().state_of(v, ctx.what))) do flatten(t, join(prefix, name), out, ctx) end
    if ctx.on_module then ctx.on_module(prefix) end
  elseif type(v) == "table" and getmetatable(v) == nil then
    if ctx.seen[v] then fail("%s: the table at '%s' contains itself", ctx.what, prefix) end
    ctx.seen[v] = true
    if next(v) == nil and ctx.on_empty then ctx.on_empty(prefix) end
    for _, k in ipairs(sorted_keys(v)) do
      flatten(v[k], join(prefix, component(k, prefix, ctx.what, ctx.strict)), out, ctx)
    end
    ctx.seen[v] = nil
  elseif ctx.on_leaf then
    ctx.on_leaf(v, prefix)
  else
    fail("%s: '%s' is a %s, not a tensor (tpu.save stores tables of tensors; "
      .. "tpu.checkpoint.save also stores numbers, strings and keys)", ctx.what, prefix, type(v))
  end
end

-- tpu.save(path, tensors[, metadata])
function M.save_tensors(path, tensors, metadata)
  check_path(path, "tpu.save")
  if type(tensors) ~= "table" or is_tensor(tensors) then
    fail("tpu.save: expected a table of tensors, got %s", is_tensor(tensors) and "a tensor (wrap it: {x = t})" or type(tensors))
  end
  local meta = check_metadata(metadata, "tpu.save")
  meta["tputrain.format"] = meta["tputrain.format"] or FORMAT_TENSORS
  local out = {}
  flatten(tensors, "", out, {what = "tpu.save", seen = {}})
  core.save_safetensors(path, out, meta)
end

local function split(name)
  local parts = {}
  for part in (name .. "."):gmatch("(.-)%.") do
    parts[#parts + 1] = part:match("^%-?%d+$") and math.tointeger(tonumber(part)) or part
  end
  return parts
end

-- Sets root[a][b]... = value for the path a.b...; `what` and `path` name the file in errors.
local function place(root, parts, value, ctx)
  local t = root
  for i = 1, #parts - 1 do
    local k = parts[i]
    if t[k] == nil then t[k] = {} end
    if type(t[k]) ~= "table" or is_tensor(t[k]) or is_key(t[k]) then
      fail("%s: %s: '%s' is both a value and a prefix of other names; load it without {nested = true}",
        ctx.what, ctx.path, table.concat(parts, ".", 1, i))
    end
    t = t[k]
  end
  local last = parts[#parts]
  if t[last] ~= nil then
    fail("%s: %s: '%s' is both a value and a prefix of other names; load it without {nested = true}",
      ctx.what, ctx.path, table.concat(parts, "."))
  end
  t[last] = value
end

-- tpu.load(path[, {nested = true}]) -> table, metadata
function M.load_tensors(path, opts)
  check_path(path, "tpu.load")
  opts = opts or {}
  if type(opts) ~= "table" then fail("tpu.load: options must be a table, got %s", type(opts)) end
  for k in pairs(opts) do
    if k ~= "nested" then fail("tpu.load: unknown option '%s' (known options: nested)", tostring(k)) end
  end
  persistence().check_safetensors(path, "tpu.load")
  local tensors, meta, names = core.load_safetensors(path)
  if not opts.nested then return tensors, meta end
  local out = {}
  for _, name in ipairs(names) do place(out, split(name), tensors[name], {what = "tpu.load", path = path}) end
  return out, meta
end

---------------------------------------------------------------- values in metadata

-- The forms of a UTF-8 character the header's JSON takes (no overlong forms, no surrogates,
-- nothing past U+10FFFF), runs of ASCII first.
local UTF8_FORMS = {
  "^[\0-\127]+", "^[\194-\223][\128-\191]", "^\224[\160-\191][\128-\191]",
  "^[\225-\236\238\239][\128-\191][\128-\191]", "^\237[\128-\159][\128-\191]",
  "^\240[\144-\191][\128-\191][\128-\191]", "^[\241-\243][\128-\191][\128-\191][\128-\191]",
  "^\244[\128-\143][\128-\191][\128-\191]",
}

-- Whether `s` is UTF-8 text (Lua's utf8 library need not be open).
local function is_utf8(s)
  local i = 1
  while i <= #s do
    local last
    for _, form in ipairs(UTF8_FORMS) do
      last = select(2, s:find(form, i))
      if last then break end
    end
    if not last then return false end
    i = last + 1
  end
  return true
end

local function encode_value(v, path)
  if math.type(v) == "integer" then return string.format("i:%d", v) end
  if math.type(v) == "float" then
    if v ~= v then return "f:nan" end
    if v == math.huge then return "f:inf" end
    if v == -math.huge then return "f:-inf" end
    return "f:" .. string.format("%a", v)
  end
  -- Bytes that are not UTF-8 cannot go into the header's JSON text as they are: in hexadecimal.
  if type(v) == "string" and is_utf8(v) then return "s:" .. v end
  if type(v) == "string" then return "x:" .. v:gsub(".", function(c) return string.format("%02x", c:byte()) end) end
  if type(v) == "boolean" then return v and "b:true" or "b:false" end
  fail("tpu.checkpoint.save: '%s' is a %s; a checkpoint holds tensors, random keys, numbers, "
    .. "strings, booleans, tables of them and models", path, type(v))
end

local function decode_value(text, path, file)
  local tag, body = text:match("^(%a):(.*)$")
  local v
  if tag == "i" then v = body:match("^%-?%d+$") and math.tointeger(tonumber(body))
  elseif tag == "f" then
    if body == "nan" then v = 0 / 0
    elseif body == "inf" then v = math.huge
    elseif body == "-inf" then v = -math.huge
    else v = tonumber(body); v = v and v + 0.0 end
  elseif tag == "s" then v = body
  elseif tag == "x" and #body % 2 == 0 and body:match("^%x*$") then
    v = body:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
  elseif tag == "b" and (body == "true" or body == "false") then v = body == "true"
  end
  if v == nil then fail("tpu.checkpoint.load: %s: corrupt checkpoint: bad value %q for '%s'", file, text, path) end
  return v
end

---------------------------------------------------------------- checkpoints

local function check_state(state, what)
  if type(state) ~= "table" or getmetatable(state) ~= nil then
    fail("%s: the state must be a table such as {model = model, step = n, ...}, got %s", what,
      is_tensor(state) and "a tensor" or type(state))
  end
end

-- tpu.checkpoint.save(path, state)
function M.save(path, state, extra)
  local what = "tpu.checkpoint.save"
  check_path(path, what)
  errors.none(3, what, extra)
  check_state(state, what)
  local meta = {["tputrain.format"] = FORMAT_CHECKPOINT}
  local out = {}
  local ctx = {what = what, seen = {}, strict = true}
  ctx.on_module = function(prefix) meta["kind:" .. prefix] = "model" end
  ctx.on_empty = function(prefix)
    if prefix ~= "" then meta["kind:" .. prefix] = "table" end
  end
  ctx.on_leaf = function(v, prefix)
    if is_key(v) then
      flatten(v.data, prefix, out, ctx)
      meta["kind:" .. prefix] = "key"
    else
      meta["value:" .. prefix] = encode_value(v, prefix)
    end
  end
  flatten(state, "", out, ctx)
  core.save_safetensors(path, out, meta)
end

local function check_format(meta, path, what)
  local format = meta["tputrain.format"]
  if format == FORMAT_CHECKPOINT then return end
  if format == nil or format == FORMAT_TENSORS or format:match("^weights/") then
    fail("%s: %s is not a training checkpoint (it holds %s); read it with %s", what, path,
      format and format:match("^weights/") and "model weights" or "plain tensors",
      format and format:match("^weights/") and "model:load(path)" or "tpu.load(path)")
  end
  fail("%s: %s was written in checkpoint format '%s', which this version cannot read", what, path, format)
end

-- Names under a model prefix stay flat (their own dots are part of the weight names).
local function model_prefix(name, models)
  for prefix in pairs(models) do
    if name:sub(1, #prefix + 1) == prefix .. "." then return prefix end
  end
  return nil
end

local function make_key(data)
  local mt = getmetatable(random.key(0))
  return mt.__tpu_unflatten({data})
end

-- tpu.checkpoint.load(path[, {model = m}]) -> state
function M.load(path, opts, extra)
  local what = "tpu.checkpoint.load"
  check_path(path, what)
  opts = errors.options(2, what, opts, {"model"})
  errors.none(3, what, extra)
  persistence().check_safetensors(path, what)
  local tensors, meta, names = core.load_safetensors(path)
  check_format(meta, path, what)
  local state, models, ctx = {}, {}, {what = what, path = path}
  for k, v in pairs(meta) do
    local kind_path = k:match("^kind:(.+)$")
    if kind_path and v == "model" then models[kind_path] = {} end
  end
  for _, name in ipairs(names) do
    local prefix = model_prefix(name, models)
    if prefix then models[prefix][name:sub(#prefix + 2)] = tensors[name]
    else place(state, split(name), tensors[name], ctx) end
  end
  for prefix, weights in pairs(models) do place(state, split(prefix), weights, ctx) end
  for k, v in pairs(meta) do
    local value_path = k:match("^value:(.+)$")
    local kind_path = k:match("^kind:(.+)$")
    if value_path then
      place(state, split(value_path), decode_value(v, value_path, path), ctx)
    elseif kind_path and v == "table" then
      place(state, split(kind_path), {}, ctx)
    elseif kind_path and v == "key" then
      local parts, t = split(kind_path), state
      for i = 1, #parts - 1 do t = type(t) == "table" and t[parts[i]] or nil end
      local data = type(t) == "table" and t[parts[#parts]] or nil
      if not is_tensor(data) or data.dtype ~= "i32" or #data.shape ~= 1 or data.shape[1] ~= 2 then
        fail("%s: %s: corrupt checkpoint: the random key '%s' is not an i32[2] tensor", what, path, kind_path)
      end
      t[parts[#parts]] = make_key(data)
    elseif kind_path and v ~= "model" then
      fail("%s: %s: corrupt checkpoint: unknown kind '%s' of '%s'", what, path, v, kind_path)
    end
  end
  if opts.model ~= nil then
    if type(state.model) ~= "table" then fail("%s: %s holds no model weights", what, path) end
    persistence().assign(opts.model, state.model, path, what)
    state.model = opts.model
  end
  return state
end

---------------------------------------------------------------- training state

-- Where a data set stands: pass `pass` (0-based, the data set's epoch counter) has had `batch`
-- batches taken. With batch = 0 it is the pass the next ds:iter() starts.
function M.data_position(ds, batches_taken)
  local started = ds._epoch or 0
  if batches_taken and batches_taken > 0 then return {pass = started - 1, batch = batches_taken} end
  return {pass = started, batch = 0}
end

-- Sets a data set's pass counter from a position taken at a pass boundary (batch = 0), so the
-- next ds:iter() starts the same pass with the same shuffle as the uninterrupted run.
function M.restore_data_position(ds, position)
  if type(position) ~= "table" or math.type(position.pass) ~= "integer" then
    fail("restore_data_position: expected {pass = n, batch = n}, got %s", tostring(position))
  end
  if (position.batch or 0) ~= 0 then
    fail("restore_data_position: the position is inside pass %d (after %d batches); "
      .. "continue it with tpu.checkpoint.resume_iter(ds, position)", position.pass, position.batch)
  end
  ds._epoch = position.pass
end

-- An iterator (like ds:iter()) continuing from `position`: the pass's first `batch` batches
-- are produced again and dropped, so shuffles and random maps match the uninterrupted run.
function M.resume_iter(ds, position)
  position = position or {pass = 0, batch = 0}
  local it = ds:iter {epoch = position.pass}
  for _ = 1, position.batch or 0 do
    if it() == nil then break end
  end
  return it
end

-- The state a training checkpoint needs (see the top of this file). `extra` adds epoch,
-- data_position, history or anything else.
function M.training_state(model, extra)
  local state = {
    model = model,
    optimizer_state = model.optimizer_state,
    step = model.train_steps or 0,
    rng = {dropout_key = model.dropout_key},
  }
  for k, v in pairs(extra or {}) do state[k] = v end
  return state
end

-- A name -> "f32[3,4]" table of every tensor in a table (to compare structures).
local function layout_of(v)
  local out, text = {}, {}
  if v ~= nil then flatten(v, "", out, {what = "restore_training", seen = {}, on_leaf = function() end}) end
  for name, t in pairs(out) do text[name] = t.dtype .. "[" .. table.concat(t.shape, ",") .. "]" end
  return text
end

-- Fails unless `state` has the layout of the compiled optimizer's state for this model.
local function check_optimizer_state(model, state, source)
  local opt = model.compiled and model.compiled.optimizer
  if not opt or state == nil then return end
  local params, trainable = model:parameters(), {}
  for i, idx in ipairs(model:_trainable_indices()) do trainable[i] = params[idx] end
  local want, got = layout_of(opt:init(trainable)), layout_of(state)
  -- In name order, so the error names the same entry every run.
  for _, name in ipairs(sorted_keys(want)) do
    local d = want[name]
    if got[name] ~= d then
      fail("%s: the optimizer state does not fit %s: '%s' is %s in the file but %s for this model "
        .. "(resume with the optimizer and model the checkpoint was made with)", source, tostring(opt),
        name, got[name] or "missing", d)
    end
  end
  for _, name in ipairs(sorted_keys(got)) do
    if want[name] == nil then
      fail("%s: the optimizer state does not fit %s: the file has '%s' (%s), which it does not use",
        source, tostring(opt), name, got[name])
    end
  end
end

-- Puts a loaded state back into a model built and compiled like the saved one: weights,
-- optimizer state, step counter and dropout key. Returns the state (epoch, data_position...).
function M.restore_training(model, state, source)
  if type(model) ~= "table" or not require("tpu.nn.Module").is_instance(model) then
    errors.type_error(1, "restore_training", "model", model)
  end
  if type(state) ~= "table" or getmetatable(state) ~= nil then
    errors.type_error(2, "restore_training", "table (checkpoint.load(path))", state)
  end
  errors.check(3, "restore_training", source, "string or nil")
  source = source or "the checkpoint"
  if state.model == nil then
    fail("restore_training: %s has no model weights (state.model is nil); give the state "
      .. "checkpoint.load(path) returns for a file saved from checkpoint.training_state(model)", source)
  end
  if state.model ~= model then persistence().assign(model, state.model, source, "restore_training") end
  check_optimizer_state(model, state.optimizer_state, source)
  model.optimizer_state = state.optimizer_state
  model.train_steps = state.step
  model.dropout_key = state.rng and state.rng.dropout_key or nil
  return state
end

---------------------------------------------------------------- resuming fit

local function is_dataset(data) return type(data) == "table" and type(data.iter) == "function" end

-- Creates the model's weights from the first batch of `data` (restoring needs them).
local function build_from(model, data)
  if model.built and #model:parameters() > 0 then return end
  if type(data) == "table" and core.is_tensor(data[1]) then  -- fit(x, y, ...): one row of x
    model(data[1]:slice {{1, 1}}, {training = false})
    return
  end
  if not is_dataset(data) then fail("fit: resume: build the model first (call it once on a batch)") end
  local pass = data._epoch  -- a look at the first batch is not a pass of the data set
  local x = data:iter {epoch = 0}()
  data._epoch = pass
  if x == nil then fail("fit: resume: the training data set produced no batches") end
  model(x, {training = false})
end

local function restore_history(history, saved)
  if not history or type(saved) ~= "table" then return end
  history.history = saved.values or {}
  history.keys = saved.keys or {}
  history.epoch = saved.epochs or {}
end

-- fit's `resume` option (a checkpoint path, or a state from tpu.checkpoint.load): puts back the
-- weights, optimizer state, step counter, random key, history and data positions. Returns where
-- fit continues: {epoch = epochs done, batch = batches done in the next one, sums = that
-- epoch's running sums, iter = the rest of its pass}; {epoch = 0, batch = 0} without resume.
function M.resume_fit(model, history, data, opts)
  local source = opts.resume
  if source == nil then return {epoch = 0, batch = 0} end
  if type(source) == "string" then  -- no checkpoint yet: the first run starts from scratch
    local f, _, errno = io.open(source, "rb")
    if f then f:close() elseif errno == 2 then return {epoch = 0, batch = 0} end  -- ENOENT
  end
  local name = type(source) == "string" and source or "the resumed state"
  build_from(model, data)
  local state = type(source) == "string" and M.load(source, {model = model}) or source
  if type(state) ~= "table" or state.step == nil then
    fail("fit: resume must be a checkpoint file or what tpu.checkpoint.load returned, got %s", tostring(source))
  end
  M.restore_training(model, state, name)
  restore_history(history, state.history)
  local position = state.data_position or {pass = 0, batch = 0}
  -- epoch_batch: the epoch's steps, when they differ from the batches taken from the pass
  -- (steps_per_epoch, with epochs that continue a pass)
  local start = {epoch = state.epoch or 0, batch = state.epoch_batch or position.batch or 0, sums = state.epoch_sums}
  if (position.batch or 0) > 0 then
    if not is_dataset(data) then
      fail("fit: %s stops inside a pass of its data; resuming there needs a tpu.data data set", name)
    end
    start.iter, start.pass_batch = M.resume_iter(data, position), position.batch
  elseif is_dataset(data) then
    M.restore_data_position(data, position)
  end
  local vpos, vdata = state.validation_position, opts.validation_data
  if vpos and is_dataset(vdata) then vdata._epoch = vpos.pass end
  return start
end

-- A name tpu.checkpoint lacks is an error listing what it has.
return errors.strict_namespace(M, "tpu.checkpoint")
